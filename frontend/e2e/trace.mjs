// Where the browser's time goes on the UI's two slow paths, from real
// Chromium traces (Tracing and the V8 CPU profiler over CDP), read here
// rather than in DevTools so that a run prints the same summary each time:
//
//   click   on the Jobs page, a click on the big job until its first rows
//           are on screen: the main thread's tasks in order (what ran, when,
//           how long), where the requests started and ended, and the
//           style, layout, paint and GC totals;
//   scroll  the big job's grid dragged top to bottom as bench.mjs drags it:
//           the longest tasks and what was inside them.
//
// Usage: node e2e/trace.mjs [--rows 1000000] [--jobs 1000] [--runs 3]
//        [--only click|scroll] [--save DIR] (writes the raw traces there).

import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { chromiumPath, dragLeg, FIRST_ROWS_SHOWN, launch, ROWS_SHOWN, signedIn, startFixture, until } from "./lib.mjs";

const { values: opt } = parseArgs({
  options: {
    rows: { type: "string", default: "1000000" },
    jobs: { type: "string", default: "1000" },
    runs: { type: "string", default: "3" },
    only: { type: "string", default: "" },
    save: { type: "string", default: "" },
  },
});
const ROWS = Number(opt.rows);
const RUNS = Number(opt.runs);

const CATEGORIES = [
  "devtools.timeline",
  "disabled-by-default-devtools.timeline",
  "disabled-by-default-devtools.timeline.frame",
  "v8",
  "v8.execute",
  "blink.user_timing",
  "loading",
  "disabled-by-default-v8.gc",
].join(",");

// mainThread finds the renderer main thread that ran the page's script.
function mainThread(events) {
  const names = events.filter((e) => e.ph === "M" && e.name === "thread_name" && e.args?.name === "CrRendererMain");
  let best = null;
  let most = -1;
  for (const n of names) {
    const c = events.filter((e) => e.pid === n.pid && e.tid === n.tid && e.name === "FunctionCall").length;
    if (c > most) {
      most = c;
      best = n;
    }
  }
  return best && { pid: best.pid, tid: best.tid };
}

const DETAIL = new Set([
  "EventDispatch",
  "FunctionCall",
  "TimerFire",
  "FireAnimationFrame",
  "UpdateLayoutTree",
  "Layout",
  "PrePaint",
  "Paint",
  "Layerize",
  "ParseHTML",
  "ParseAuthorStyleSheet",
  "MinorGC",
  "MajorGC",
  "V8.GC_SCAVENGER",
  "V8.GC_MC_INCREMENTAL",
  "V8.GCFinalizeMC",
  "BlinkGC.AtomicPhase",
  "v8.compile",
  "v8.parseOnBackground",
  "XHRLoad",
  "ResourceReceivedData",
  "HitTest",
  "ScheduleStyleRecalculation",
  "InvalidateLayout",
  "v8.callFunction",
  "ResizeObserver",
  "IntersectionObserverController::computeIntersections",
  "RunMicrotasks",
  "Document::updateStyleAndLayout",
]);

// summarize reads the main thread between t0 and t1 (µs): its top-level
// tasks, the totals of what ran inside them, and the network events.
function summarize(events, t0, t1) {
  const mt = mainThread(events);
  if (!mt) return { error: "no renderer main thread in the trace" };
  const on = events.filter((e) => e.pid === mt.pid && e.tid === mt.tid && e.ts >= t0 && e.ts <= t1);
  const tasks = on.filter((e) => e.ph === "X" && (e.name === "RunTask" || e.name === "ThreadControllerImpl::RunTask")).sort((a, b) => a.ts - b.ts);
  const totals = {};
  for (const e of on) {
    if (e.ph !== "X" || !DETAIL.has(e.name)) continue;
    const t = (totals[e.name] ??= { count: 0, ms: 0 });
    t.count++;
    t.ms += (e.dur ?? 0) / 1000;
  }
  for (const t of Object.values(totals)) t.ms = +t.ms.toFixed(1);
  const inside = (task) => {
    const kids = on.filter((e) => e.ph === "X" && DETAIL.has(e.name) && e.ts >= task.ts && e.ts + (e.dur ?? 0) <= task.ts + task.dur && e !== task);
    const by = {};
    for (const k of kids) by[k.name] = +(((by[k.name] ?? 0) + (k.dur ?? 0) / 1000).toFixed(1));
    const fn = kids.find((k) => k.name === "FunctionCall" || k.name === "EventDispatch" || k.name === "TimerFire" || k.name === "FireAnimationFrame");
    const what = fn ? fn.name + (fn.args?.data?.type ? `(${fn.args.data.type})` : fn.args?.data?.functionName ? `(${fn.args.data.functionName})` : "") : "";
    return { what, by };
  };
  const net = events
    .filter((e) => e.ts >= t0 && e.ts <= t1 && (e.name === "ResourceSendRequest" || e.name === "ResourceFinish" || e.name === "ResourceReceiveResponse"))
    .map((e) => ({ at: +((e.ts - t0) / 1000).toFixed(1), ev: e.name.replace("Resource", ""), url: e.args?.data?.url?.replace(/^https?:\/\/[^/]+/, "") ?? e.args?.data?.requestId }));
  const list = tasks
    .filter((t) => t.dur >= 2000)
    .map((t) => ({ at: +((t.ts - t0) / 1000).toFixed(1), ms: +(t.dur / 1000).toFixed(1), cpuMs: +((t.tdur ?? 0) / 1000).toFixed(1), ...inside(t) }));
  // busy is the wall time of the main thread's tasks; cpu is the thread
  // time they used (tdur), which other processes on a loaded machine do
  // not inflate.
  const busy = tasks.reduce((a, t) => a + t.dur, 0) / 1000;
  const cpu = tasks.reduce((a, t) => a + (t.tdur ?? 0), 0) / 1000;
  const longestCpu = tasks.reduce((a, t) => Math.max(a, t.tdur ?? 0), 0) / 1000;
  return {
    spanMs: +((t1 - t0) / 1000).toFixed(1),
    busyMs: +busy.toFixed(1),
    cpuMs: +cpu.toFixed(1),
    longestTaskCpuMs: +longestCpu.toFixed(1),
    tasksOver50CpuMs: tasks.filter((t) => (t.tdur ?? 0) > 50_000).length,
    tasks: list,
    totals,
    net,
  };
}

// selfTimes turns a V8 CPU profile into the functions with the most self
// time and the most total (inclusive) time, over the samples between t0
// and t1 (µs, the trace's clock, which the profiler shares).
function selfTimes(profile, t0 = -Infinity, t1 = Infinity, top = 15) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const name = (n) => {
    const cf = n.callFrame;
    return `${cf.functionName || "(anonymous)"} ${cf.url ? path.basename(cf.url) + ":" + (cf.lineNumber + 1) : ""}`.trim();
  };
  const self = new Map();
  const total = new Map();
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i];
    if (t < t0 || t > t1) continue;
    const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
    const n = byId.get(profile.samples[i]);
    self.set(name(n), (self.get(name(n)) ?? 0) + dt);
    const seen = new Set();
    for (let id = n.id; id !== undefined; id = parent.get(id)) {
      const k = name(byId.get(id));
      if (seen.has(k)) continue;
      seen.add(k);
      total.set(k, (total.get(k) ?? 0) + dt);
    }
  }
  const list = (m) =>
    [...m.entries()]
      .filter(([k]) => k !== "(root)")
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([fn, ms]) => `${ms.toFixed(1)} ${fn}`);
  return { self: list(self), total: list(total) };
}

async function traced(browser, page, fn) {
  await browser.startTracing(page, { categories: CATEGORIES.split(",") });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Profiler.enable");
  await cdp.send("Profiler.setSamplingInterval", { interval: 200 });
  await cdp.send("Profiler.start");
  const span = await fn();
  const { profile } = await cdp.send("Profiler.stop");
  const buf = await browser.stopTracing();
  await cdp.detach();
  return { span, profile, trace: JSON.parse(buf.toString()) };
}

// markAt puts a user-timing mark in the trace (markTs finds its time
// there) and returns the page's performance.now().
async function markAt(page, name) {
  return page.evaluate((n) => {
    performance.mark(n);
    return performance.now();
  }, name);
}
function markTs(events, name) {
  const e = events.find((x) => x.name === name && (x.cat ?? "").includes("blink.user_timing"));
  return e?.ts;
}

async function clickRun(browser, context, url, jobId, i) {
  const page = await context.newPage();
  await page.goto(url + "/", { waitUntil: "commit" });
  await until(page, `!!document.querySelector("table.jobs tr[data-job]")`);
  await page.waitForTimeout(1000);
  const r = await traced(browser, page, async () => {
    const p0 = await markAt(page, "sluice-click");
    await page.locator(`table.jobs a[href="/jobs/${jobId}"]`).click();
    await until(page, FIRST_ROWS_SHOWN);
    const p1 = await markAt(page, "sluice-rows");
    await page.waitForTimeout(100);
    return p1 - p0;
  });
  await page.close();
  const ev = r.trace.traceEvents;
  const t0 = markTs(ev, "sluice-click");
  const t1 = markTs(ev, "sluice-rows");
  if (opt.save) writeFileSync(path.join(opt.save, `click-${i}.json`), JSON.stringify(r.trace));
  // The click as the page saw it (Playwright's own checks before it are not the page's time).
  const down = ev.find((e) => e.ts >= t0 && e.name === "EventDispatch" && e.args?.data?.type === "pointerdown");
  const tc = down?.ts ?? t0;
  return { clickToRowsMs: +r.span.toFixed(1), pointerdownToRowsMs: +((t1 - tc) / 1000).toFixed(1), ...summarize(ev, tc, t1), profile: selfTimes(r.profile, tc, t1) };
}

async function scrollRun(browser, context, url, jobId, i) {
  const page = await context.newPage();
  await page.goto(`${url}/jobs/${jobId}`);
  await until(page, ROWS_SHOWN);
  await page.waitForTimeout(500);
  let itemRequests = 0;
  page.on("request", (q) => q.url().includes("/items?") && itemRequests++);
  const r = await traced(browser, page, async () => {
    itemRequests = 0;
    await markAt(page, "sluice-scroll");
    for (let s = 1; s <= 10; s++) {
      await dragLeg(page, s, 10);
      await until(page, ROWS_SHOWN, 180_000);
    }
    await markAt(page, "sluice-scrolled");
    return 0;
  });
  await page.close();
  const ev = r.trace.traceEvents;
  const t0 = markTs(ev, "sluice-scroll");
  const t1 = markTs(ev, "sluice-scrolled");
  if (opt.save) writeFileSync(path.join(opt.save, `scroll-${i}.json`), JSON.stringify(r.trace));
  const s = summarize(ev, t0, t1);
  s.tasks = s.tasks.sort((a, b) => b.ms - a.ms).slice(0, 12);
  delete s.net;
  return { itemRequests, ...s, profile: selfTimes(r.profile, t0, t1) };
}

async function main() {
  const c = chromiumPath();
  if (!c.path) throw new Error(c.reason);
  if (opt.save) mkdirSync(opt.save, { recursive: true });
  const out = { rows: ROWS, loadAverage: os.loadavg().map((l) => +l.toFixed(1)), click: [], scroll: [] };
  const srv = await startFixture(["--big", String(ROWS), "--jobs", String(Number(opt.jobs) - 1)]);
  const browser = await launch(c.path);
  try {
    const context = await signedIn(browser, srv);
    for (let i = 0; i < RUNS; i++) {
      if (opt.only !== "scroll") out.click.push(await clickRun(browser, context, srv.url, srv.bigId, i));
      if (opt.only !== "click") out.scroll.push(await scrollRun(browser, context, srv.url, srv.bigId, i));
    }
  } finally {
    await browser.close();
    await srv.stop();
  }
  console.log(JSON.stringify(out, null, 1));
}

main().catch((e) => {
  console.error("trace:", e);
  process.exit(1);
});
