// Automation: the allowlisted commands (definitions), the triggers that
// start jobs on schedules and events (next fire time in each trigger's own
// zone), and the worker processes by heartbeat, with stale ones flagged.
// GET /api/definitions, /api/triggers, /api/workers; admins may enable or
// disable a trigger (PATCH /api/triggers/{name}) and remove one (DELETE).

import * as api from "../api";
import { h } from "../dom";
import * as fmt from "../format";
import { listPage } from "../listpage";
import type { Page } from "../ui";

interface Definition {
  key: string;
  description?: string;
  executable: string;
  args?: string[];
  argSchema?: unknown;
  timeoutSeconds?: number;
  maxAttempts?: number;
  active?: boolean;
  version: number;
  updatedAt?: string;
}

interface Trigger {
  name: string;
  kind: "event" | "schedule";
  event?: string;
  cron?: string;
  tz?: string;
  definition?: string;
  pipeline?: string;
  dedupeWindow?: string;
  missed?: string;
  enabled: boolean;
  nextFireLocal?: string;
  lastFireAt?: string;
  lastJobId?: number;
  lastResult?: string;
}

interface Worker {
  id: string;
  version: string;
  lastSeen: string;
  running: number;
  scheduler?: boolean;
  stale: boolean;
  secondsSinceSeen: number;
}

export function definitionsPage(): Page {
  return listPage<Definition>({
    title: "Commands",
    intro: "The only programs Sluice runs: an admin defines each with its argument templates and the JSON Schema its payload must pass. No shell is used.",
    empty: "No commands yet. Define one with: sluice definition apply FILE",
    cls: "definitions",
    head: ["Key", "Command", "Timeout", "Attempts", "Active", "Version", "Description"],
    load: async () => (await api.get<{ definitions: Definition[] }>("/api/definitions")).definitions,
    row: (d) =>
      h(
        "tr",
        { "data-definition": d.key },
        h("td", null, d.key),
        h("td", null, h("code", null, [d.executable, ...(d.args ?? [])].join(" "))),
        h("td", { class: "num" }, fmt.duration(d.timeoutSeconds ?? 3600)),
        h("td", { class: "num" }, String(d.maxAttempts ?? 3)),
        h("td", null, d.active === false ? "no" : "yes"),
        h("td", { class: "num" }, String(d.version)),
        h("td", null, d.description ?? ""),
      ),
  });
}

export function triggersPage(me: api.Me): Page {
  const admin = me.user.role === "admin";
  return listPage<Trigger>({
    title: "Triggers",
    intro: "Schedules (cron in the trigger's own time zone) and Sluice's events that start jobs. Next fire times are shown in each trigger's zone.",
    empty: 'No triggers yet. Add one with: sluice trigger add NAME --cron "0 2 * * *" --tz America/New_York --definition KEY',
    cls: "triggers",
    head: ["Name", "Enabled", "On", "Runs", "Next fire", "Last", "Dedupe", "Missed", ""],
    load: async () => (await api.get<{ triggers: Trigger[] }>("/api/triggers")).triggers,
    row: (t, reload, note) => {
      const rm = h("button", { type: "button", "aria-label": `Remove trigger ${t.name}` }, "Remove") as HTMLButtonElement;
      rm.onclick = async () => {
        if (!confirm(`Remove trigger ${t.name}?`)) return;
        rm.disabled = true;
        try {
          await api.call("DELETE", `/api/triggers/${encodeURIComponent(t.name)}`);
          note.info(`Trigger ${t.name} removed.`);
          await reload();
        } catch (e) {
          note.error(e);
          rm.disabled = false;
        }
      };
      // The toggle: a disabled schedule fires no tick; enabled again, it
      // starts from its next tick (missed ones are not run).
      const toggle = h("input", {
        type: "checkbox",
        class: "enabled",
        "aria-label": `Trigger ${t.name} enabled`,
        checked: t.enabled,
        disabled: !admin,
      }) as HTMLInputElement;
      toggle.onchange = async () => {
        const enabled = toggle.checked;
        toggle.disabled = true;
        try {
          await api.call("PATCH", `/api/triggers/${encodeURIComponent(t.name)}`, { body: { enabled } });
          note.info(`Trigger ${t.name} ${enabled ? "enabled" : "disabled"}.`);
          await reload();
        } catch (e) {
          note.error(e);
          toggle.checked = !enabled;
          toggle.disabled = false;
        }
      };
      const on = t.kind === "schedule" ? `${t.cron} (${t.tz})` : `event ${t.event}`;
      const runs = t.definition ? `command ${t.definition}` : `pipeline ${t.pipeline}`;
      const last = t.lastResult ? `${t.lastResult}${t.lastJobId ? ` (job ${t.lastJobId})` : ""} ${fmt.time(t.lastFireAt)}` : "";
      return h(
        "tr",
        { "data-trigger": t.name },
        h("td", null, t.name),
        h("td", null, toggle),
        h("td", null, on),
        h("td", null, runs),
        h("td", { class: "next-fire" }, !t.enabled ? "disabled" : (t.nextFireLocal ?? (t.kind === "event" ? "on event" : ""))),
        h("td", null, last),
        h("td", null, t.dedupeWindow && t.dedupeWindow !== "0s" ? t.dedupeWindow : "while running"),
        h("td", null, t.kind === "schedule" ? (t.missed ?? "skip") : ""),
        h("td", null, admin ? rm : ""),
      );
    },
  });
}

export function workersPage(): Page {
  return listPage<Worker>({
    title: "Workers",
    intro: "Processes that run workers (sluice worker, sluice --serve), by heartbeat. A stale worker has not been heard from for 15 s: its items are handed to the others.",
    empty: "No worker is running.",
    cls: "workers",
    head: ["Worker", "Version", "Last seen", "Running", "Scheduler", "State"],
    load: async () => (await api.get<{ workers: Worker[] }>("/api/workers")).workers,
    row: (w) =>
      h(
        "tr",
        { "data-worker": w.id, class: w.stale ? "stale" : "" },
        h("td", null, w.id),
        h("td", null, w.version),
        h("td", null, `${fmt.duration(Math.round(w.secondsSinceSeen))} ago`),
        h("td", { class: "num" }, fmt.int(w.running)),
        h("td", null, w.scheduler ? "yes" : ""),
        h("td", { class: w.stale ? "error" : "" }, w.stale ? "STALE" : "ok"),
      ),
  });
}
