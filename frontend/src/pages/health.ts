// Health: the adaptive controllers over time. The server samples them once
// a second and keeps the last 10 minutes (GET /api/stats?series=1), so the
// charts show that history as soon as the page opens; the page then asks
// every 2 s for the points taken since the newest one it has.

import * as api from "../api";
import { h, replace } from "../dom";
import * as fmt from "../format";
import { lineChart, type Series } from "../chart";
import { notice, type Page } from "../ui";

const EVERY = 2000;

type Line = api.Point[];

// History holds every line of the server's series, merged across polls and
// trimmed to the server's capacity.
export class History {
  lines = new Map<string, Line>();
  // newest is the t of the newest point, as the server wrote it (the next
  // poll's since); newestMs is the same time as a number.
  newest = "";
  newestMs = -Infinity;
  capacity = 600;

  // add merges one answer's series; a line's name is its path
  // ("queueDue", "hosts.api.example.com.rate", "errorsPerSec.transient").
  add(s: api.StatsSeries): void {
    this.capacity = s.capacity || this.capacity;
    const put = (name: string, pts: Line | undefined) => {
      if (!pts || pts.length === 0) return;
      const line = this.lines.get(name) ?? [];
      for (const p of pts) {
        const ms = Date.parse(p.t);
        if (line.length && ms <= Date.parse(line[line.length - 1].t)) continue; // already have it
        line.push(p);
        if (ms > this.newestMs) [this.newest, this.newestMs] = [p.t, ms];
      }
      if (line.length > this.capacity) line.splice(0, line.length - this.capacity);
      this.lines.set(name, line);
    };
    for (const k of ["claimSize", "avgItemMs", "leaseMs", "itemsPerSec", "queueDue", "queueLater", "queueProcessing", "ingestBatchRows"] as const) {
      put(k, s[k]);
    }
    for (const [c, pts] of Object.entries(s.errorsPerSec ?? {})) put(`errorsPerSec.${c}`, pts);
    for (const [host, hs] of Object.entries(s.hosts ?? {})) {
      put(`hosts.${host}.rate`, hs.rate);
      put(`hosts.${host}.concurrency`, hs.concurrency);
    }
  }

  values(name: string): number[] {
    return (this.lines.get(name) ?? []).map((p) => p.v);
  }

  // group lists the lines under a prefix and suffix, named by the part
  // between ("hosts.", ".rate" → one series per host).
  group(prefix: string, suffix = ""): Series[] {
    const out: Series[] = [];
    for (const name of [...this.lines.keys()].sort()) {
      if (name.startsWith(prefix) && name.endsWith(suffix)) {
        out.push({ name: name.slice(prefix.length, name.length - suffix.length), values: this.values(name) });
      }
    }
    return out;
  }
}

export function healthPage(): Page {
  const note = notice();
  const charts = h("div", { class: "charts" });
  const ingest = h("div", { class: "card" });
  const hist = new History();
  let last: api.Stats | undefined;
  let timer = 0;
  let stopped = false;

  async function poll(): Promise<void> {
    try {
      const since = hist.newest ? `&since=${encodeURIComponent(hist.newest)}` : "";
      const s = await api.get<api.Stats>(`/api/stats?series=1${since}`);
      if (stopped) return;
      if (s.series) hist.add(s.series);
      last = s;
      note.clear();
      draw();
    } catch (e) {
      note.error(e);
    }
    if (!stopped) timer = window.setTimeout(poll, EVERY);
  }

  function draw(): void {
    if (!last) return;
    const num = (v: number) => (v >= 100 ? fmt.int(v) : v.toFixed(v >= 10 ? 0 : 1));
    const line = (name: string, key: string): Series => ({ name, values: hist.values(key) });
    const list: [string, Series[], (v: number) => string][] = [
      ["Items per second", [line("completed", "itemsPerSec")], num],
      ["Queue depth", [line("due", "queueDue"), line("later", "queueLater"), line("processing", "queueProcessing")], num],
      ["Errors per second by class", hist.group("errorsPerSec."), num],
      ["Claim size", [line("items per claim", "claimSize")], num],
      ["Average item time", [line("avgItemMs", "avgItemMs"), line("lease", "leaseMs")], fmt.ms],
      ["Per-host rate (requests/s)", hist.group("hosts.", ".rate"), num],
      ["Per-host concurrency", hist.group("hosts.", ".concurrency"), num],
      ["Ingest batch size (rows)", [line("final batch", "ingestBatchRows")], num],
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
    el: h(
      "section",
      { class: "page" },
      h("h1", null, "Health"),
      h("p", { class: "muted" }, "Sampled by the server once a second; the last 10 minutes, refreshed every 2 seconds."),
      note.el,
      ingest,
      charts,
    ),
    destroy() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
