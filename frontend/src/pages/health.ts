// Health: the adaptive controllers over time, from GET /api/stats polled
// every 2 s (the last 5 minutes are kept in the page).

import * as api from "../api";
import { h, replace } from "../dom";
import * as fmt from "../format";
import { lineChart, type Series } from "../chart";
import { notice, type Page } from "../ui";

const EVERY = 2000;
const KEEP = 150;

interface Sample {
  t: number;
  s: api.Stats;
}

export function healthPage(): Page {
  const note = notice();
  const charts = h("div", { class: "charts" });
  const ingest = h("div", { class: "card" });
  const samples: Sample[] = [];
  let timer = 0;
  let stopped = false;

  async function poll(): Promise<void> {
    try {
      const s = await api.get<api.Stats>("/api/stats");
      if (stopped) return;
      samples.push({ t: Date.now(), s });
      if (samples.length > KEEP) samples.shift();
      note.clear();
      draw();
    } catch (e) {
      note.error(e);
    }
    if (!stopped) timer = window.setTimeout(poll, EVERY);
  }

  // perSec turns a counter into a rate between samples.
  function perSec(get: (s: api.Stats) => number | undefined): number[] {
    const out: number[] = [];
    for (let i = 1; i < samples.length; i++) {
      const a = get(samples[i - 1].s);
      const b = get(samples[i].s);
      const dt = (samples[i].t - samples[i - 1].t) / 1000;
      out.push(a === undefined || b === undefined || dt <= 0 ? 0 : Math.max(0, (b - a) / dt));
    }
    return out;
  }
  const gauge = (get: (s: api.Stats) => number | undefined) => samples.map((x) => get(x.s) ?? 0);

  function draw(): void {
    const last = samples[samples.length - 1].s;
    const classes = new Set<string>();
    const hosts = new Set<string>();
    for (const x of samples) {
      for (const k of Object.keys(x.s.runner?.byClass ?? {})) classes.add(k);
      for (const hs of x.s.hosts) hosts.add(hs.host);
    }
    const host = (name: string, f: (hs: api.HostState) => number) => (s: api.Stats) => {
      const hs = s.hosts.find((x) => x.host === name);
      return hs ? f(hs) : 0;
    };
    const num = (v: number) => (v >= 100 ? fmt.int(v) : v.toFixed(v >= 10 ? 0 : 1));
    const list: [string, Series[], (v: number) => string][] = [
      ["Items per second", [{ name: "completed", values: perSec((s) => s.runner?.completed) }], num],
      [
        "Queue depth",
        [
          { name: "due", values: gauge((s) => s.queue.due) },
          { name: "later", values: gauge((s) => s.queue.later) },
          { name: "processing", values: gauge((s) => s.queue.processing) },
        ],
        num,
      ],
      ["Errors per second by class", [...classes].map((c) => ({ name: c, values: perSec((s) => s.runner?.byClass?.[c] ?? 0) })), num],
      ["Claim size", [{ name: "items per claim", values: gauge((s) => s.claim?.size) }], num],
      ["Average item time", [{ name: "avgItemMs", values: gauge((s) => s.claim?.avgItemMs) }], fmt.ms],
      ["Per-host rate (requests/s)", [...hosts].map((n) => ({ name: n, values: gauge(host(n, (x) => x.rate)) })), num],
      ["Per-host concurrency", [...hosts].map((n) => ({ name: n, values: gauge(host(n, (x) => x.concurrency)) })), num],
    ];
    replace(charts, ...list.map(([t, s, f]) => lineChart(t, s, f)));
    const li = last.lastIngest;
    replace(
      ingest,
      h("h2", null, "Last ingest"),
      li
        ? h(
            "p",
            null,
            `Job ${li.jobId}: ${fmt.int(li.rows)} rows in ${fmt.ms(li.ms)}, ${fmt.int(li.batches)} batches, final batch size ${fmt.int(li.finalBatch)} (${fmt.time(li.at)}).`,
          )
        : h("p", { class: "muted" }, "No upload since the server started."),
      last.runner
        ? h(
            "p",
            { class: "small muted" },
            `This server's workers: ${fmt.int(last.runner.completed)} items completed, ${fmt.int(last.runner.retried)} retried; concurrency ${last.claim?.concurrency ?? "–"}.`,
          )
        : h("p", { class: "small muted" }, "This server runs no workers (--no-workers): worker charts stay empty."),
    );
  }

  void poll();
  return {
    title: "Health",
    el: h("section", { class: "page" }, h("h1", null, "Health"), h("p", { class: "muted" }, "Live from /api/stats every 2 seconds; the last 5 minutes."), note.el, ingest, charts),
    destroy() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
