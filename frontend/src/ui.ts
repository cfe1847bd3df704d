// Shared pieces of the screens: pages, notices, state chips, progress.

import { ApiError, type Job } from "./api";
import { h } from "./dom";
import * as fmt from "./format";

// A Page is what a route renders; destroy stops its timers and streams.
export interface Page {
  el: HTMLElement;
  title: string;
  destroy?: () => void;
}

// message is what a person reads for an error.
export function message(e: unknown): string {
  if (e instanceof ApiError) return e.message;
  if (e instanceof Error) return e.message;
  return String(e);
}

// notice is an inline status or error line; set("") hides it.
export function notice(): { el: HTMLElement; error(e: unknown): void; info(t: string): void; clear(): void } {
  const el = h("p", { class: "notice", role: "status", hidden: true });
  return {
    el,
    error(e) {
      el.hidden = false;
      el.className = "notice error";
      el.setAttribute("role", "alert");
      el.textContent = message(e);
    },
    info(t) {
      el.hidden = false;
      el.className = "notice info";
      el.setAttribute("role", "status");
      el.textContent = t;
    },
    clear() {
      el.hidden = true;
      el.textContent = "";
    },
  };
}

export function stateChip(state: string): HTMLElement {
  return h("span", { class: `chip state-${state}` }, state.toLowerCase());
}

export function progress(j: Job): HTMLElement {
  const pct = Math.max(0, Math.min(100, j.percent || 0));
  const bar = h("div", {
    class: "bar",
    role: "progressbar",
    "aria-valuemin": 0,
    "aria-valuemax": 100,
    "aria-valuenow": Math.floor(pct),
    "aria-label": `Job ${j.id} progress`,
  });
  const fill = h("div", { class: "fill" });
  const errPct = j.totalItems ? (100 * j.failed) / j.totalItems : 0;
  const err = h("div", { class: "fill err" });
  err.style.width = errPct + "%";
  bar.append(err, fill);
  fill.style.left = errPct + "%";
  fill.style.width = Math.max(0, pct - errPct) + "%";
  return bar;
}

export function progressText(j: Job): string {
  const parts = [`${fmt.int(j.processed)} / ${fmt.int(j.totalItems)}`, `${Math.floor(j.percent || 0)}%`];
  if (!["DONE", "FAILED", "CANCELED"].includes(j.state)) {
    parts.push(fmt.rate(j.itemsPerSec));
    if (j.etaSeconds !== null) parts.push("ETA " + fmt.duration(j.etaSeconds));
  } else if (j.itemsPerSec > 0) {
    parts.push(fmt.rate(j.itemsPerSec) + " avg");
  }
  return parts.join(" · ");
}

// link is an in-app link (the router handles it without a reload).
export function link(href: string, text: string, attrs: Record<string, unknown> = {}): HTMLAnchorElement {
  return h("a", { href, "data-link": true, ...attrs }, text);
}

// jsonBlock shows a JSON value pretty-printed.
export function jsonBlock(v: unknown): HTMLElement {
  const text = v === undefined || v === null ? "null" : JSON.stringify(v, null, 2);
  return h("pre", { class: "json", tabindex: 0 }, text);
}
