// Job detail: header with controls, status facets with exact counts, the
// virtual grid (keyset pages through the Pager), selection and reprocess,
// exports of exactly what the grid shows, and the item drawer.

import * as api from "../api";
import { h, replace } from "../dom";
import * as fmt from "../format";
import { Grid, INPUT_KEY } from "../grid";
import { go } from "../router";
import { Pager } from "../pager";
import { jsonBlock, link, message, notice, progress, progressText, stateChip, type Page } from "../ui";

// BLOCK is the rows of one request: a screenful and its margins is one or
// two of them, and a multiple of the server's mark spacing (250), so a
// page by position starts right at a mark.
const BLOCK = 250;

// prefetchJob asks for what the page shows first, the job and its first
// block of rows, before the page is built (the router calls it when a
// link to the job is pressed, and on a cold load); the page's own calls
// then take these answers.
export function prefetchJob(id: number, q: URLSearchParams): void {
  api.prefetch(`/api/jobs/${id}`);
  api.prefetch(api.itemsPath(id, parseStatuses(q.get("statuses")), BLOCK, { at: 0 }));
}

export function jobPage(id: number, q: URLSearchParams): Page {
  // Asked for before anything is built (already asked for when the page
  // was opened by a link: then this does nothing).
  prefetchJob(id, q);
  let job: api.Job | null = null;
  let statuses: api.Status[] = parseStatuses(q.get("statuses"));
  let columns: api.Column[] = [];
  const inputBox = h("input", {
    type: "checkbox",
    id: "show-input",
    checked: localStorage.getItem("sluice.showInput") === "1",
    onchange: () => {
      localStorage.setItem("sluice.showInput", inputBox.checked ? "1" : "0");
      showColumns();
    },
  });
  function showColumns(): void {
    grid.setColumns(inputBox.checked ? [...columns, { key: INPUT_KEY, label: "Input (summary, not exported)" }] : columns);
  }
  const note = notice();

  // Selection: explicit item ids, or every item matching the filter.
  const selected = new Set<number>();
  let allMatching = false;

  const pager = new Pager((at, size, signal) => api.get<api.Page>(api.itemsPath(id, statuses, size, { at }), signal), BLOCK, 40);
  const rowCount = () => {
    if (!job) return 0;
    const known = pager.knownRows();
    const counted = sumCounts(job, statuses.length ? statuses : api.STATUSES);
    return known !== null && known < counted ? known : counted;
  };
  const grid = new Grid(
    { rowCount, row: (i) => pager.row(i), want: (a, b) => pager.want(a, b) },
    {
      isSelected: (it) => allMatching || selected.has(it.id),
      toggle: (it) => {
        if (allMatching) {
          allMatching = false;
          selected.clear();
        }
        if (selected.has(it.id)) selected.delete(it.id);
        else selected.add(it.id);
        renderSelection();
      },
      open: (it) => void openDrawer(it.id),
    },
    `Items of job ${id}`,
  );
  // The columns (which the server finds by reading the job's results,
  // 1.5 s of a core for a million rows) are asked for once the first rows
  // are painted: the grid starts with the fixed columns, and the server's
  // read does not take a core from the browser while it draws them.
  let colsAsked = false;
  pager.onChange = () => {
    grid.update();
    if (pager.error) note.error(pager.error);
    if (!colsAsked) {
      colsAsked = true;
      // After the grid's frame (its callback was registered first), then
      // after that frame's paint.
      requestAnimationFrame(() => setTimeout(() => !closed && void loadColumns(), 0));
    }
  };

  // Header.
  const title = h("h1", null, `Job ${id}`);
  const meta = h("div", { class: "jobmeta" });
  const btn = (text: string, fn: () => Promise<void>, cls = "") =>
    h("button", { type: "button", class: cls, onclick: () => void act(fn) }, text);
  const pauseB = btn("Pause", () => control("pause"));
  const resumeB = btn("Resume", () => control("resume"));
  const cancelB = btn("Cancel job", async () => {
    if (confirm(`Cancel job ${id}? Items not yet run become SKIPPED.`)) await control("cancel");
  });
  const kickDur = h(
    "select",
    { id: "kick-dur", "aria-label": "Kickoff slice length" },
    h("option", { value: "5000" }, "5 s"),
    h("option", { value: "15000" }, "15 s"),
    h("option", { value: "60000" }, "60 s"),
  );
  const kickB = btn("Kick off a slice", async () => {
    note.info("Running a slice of work on this job now…");
    const r = await api.post<{ processed: number; elapsedMs: number; job: api.Job }>(`/api/jobs/${id}/kickoff?durationMs=${kickDur.value}`);
    note.info(`The slice processed ${fmt.count(r.processed, "item")} in ${fmt.ms(r.elapsedMs)}.`);
    setJob(r.job);
  });
  const deleteB = btn(
    "Delete",
    async () => {
      if (!confirm(`Delete job ${id} with all its items and attempts? This cannot be undone.`)) return;
      await api.call("DELETE", `/api/jobs/${id}`);
      go("/");
    },
    "danger",
  );
  const csvA = exportButton("csv");
  const xlsxA = exportButton("xlsx");
  const controls = h(
    "div",
    { class: "toolbar", role: "toolbar", "aria-label": "Job controls" },
    pauseB,
    resumeB,
    cancelB,
    h("span", { class: "group" }, kickDur, kickB),
    csvA,
    xlsxA,
    deleteB,
  );

  async function act(fn: () => Promise<void>): Promise<void> {
    note.clear();
    try {
      await fn();
    } catch (e) {
      note.error(e);
    }
    follow();
  }

  // The event stream can miss a change that starts and ends between two
  // of its looks (a reprocessed item of a finished job runs in
  // microseconds), so after an action the page also asks for the job every
  // second for a while, and every 15 s in any case.
  let followUntil = 0;
  let pollTimer = 0;
  let closed = false;
  function follow(): void {
    followUntil = Date.now() + 10_000;
    schedulePoll(300);
  }
  function schedulePoll(ms: number): void {
    clearTimeout(pollTimer);
    pollTimer = window.setTimeout(async () => {
      try {
        const j = await api.get<api.Job>(`/api/jobs/${id}`);
        if (!closed) setJob(j);
      } catch {
        // the stream or the next poll will tell
      }
      if (!closed) schedulePoll(Date.now() < followUntil ? 1000 : 15_000);
    }, ms);
  }
  async function control(verb: string): Promise<void> {
    setJob(await api.post<api.Job>(`/api/jobs/${id}/${verb}`));
  }

  // Facets.
  const facets = h("div", { class: "facets", role: "group", "aria-label": "Filter by status" });
  function renderFacets(): void {
    if (!job) return;
    const total = sumCounts(job, api.STATUSES);
    const all = h(
      "button",
      { type: "button", class: "facet", "aria-pressed": String(statuses.length === 0), onclick: () => setFilter([]) },
      "All ",
      h("span", { class: "count" }, fmt.int(total)),
    );
    replace(
      facets,
      all,
      ...api.STATUSES.map((s) =>
        h(
          "button",
          {
            type: "button",
            class: `facet s-${s}`,
            "data-status": s,
            "aria-pressed": String(statuses.includes(s)),
            onclick: () => setFilter(statuses.includes(s) ? statuses.filter((x) => x !== s) : [...statuses, s]),
          },
          s.replace("_", " ").toLowerCase() + " ",
          h("span", { class: "count" }, fmt.int(job!.counts[s] ?? 0)),
        ),
      ),
    );
  }
  function setFilter(sts: api.Status[]): void {
    statuses = api.STATUSES.filter((s) => sts.includes(s));
    allMatching = false;
    selected.clear();
    const u = new URL(location.href);
    if (statuses.length) u.searchParams.set("statuses", statuses.join(","));
    else u.searchParams.delete("statuses");
    history.replaceState(null, "", u.pathname + u.search);
    renderFacets();
    renderSelection();
    renderExports();
    if (job) grid.setEmptyText(statuses.length ? "No item has these statuses." : "This job has no items.");
    pager.reset();
    grid.scrollToRow(0);
    void loadColumns();
  }
  function renderExports(): void {
    const what = statuses.length ? statuses.join(", ") : "every status";
    for (const [b, f] of [
      [csvA, "csv"],
      [xlsxA, "xlsx"],
    ] as const) {
      b.dataset.href = api.exportPath(id, f, statuses);
      b.setAttribute("aria-label", `Export the grid (${what}) as ${f.toUpperCase()}`);
    }
  }

  // exportButton downloads the export of the grid's filter. The file is
  // fetched (not followed as a link) so that an error shows as a message
  // here rather than as a saved file or a raw JSON page; a second click
  // stops it.
  function exportButton(format: "csv" | "xlsx"): HTMLButtonElement {
    const label = `Export ${format.toUpperCase()}`;
    let ctrl: AbortController | null = null;
    const b = h("button", {
      type: "button",
      onclick: async () => {
        if (ctrl) {
          ctrl.abort();
          return;
        }
        note.clear();
        ctrl = new AbortController();
        b.textContent = "Exporting… (click to stop)";
        try {
          const saved = await api.download(b.dataset.href!, ctrl.signal, (bytes) => {
            b.textContent = `Exporting… ${fmt.bytes(bytes)} (click to stop)`;
          });
          if (saved) note.info(`Saved ${saved}`);
        } catch (e) {
          if ((e as Error).name !== "AbortError") note.error(e);
        } finally {
          ctrl = null;
          b.textContent = label;
        }
      },
    }, label);
    return b;
  }

  // Selection and reprocess.
  const selInfo = h("span", { class: "selinfo", "aria-live": "polite" });
  const selAll = h("button", { type: "button", onclick: () => ((allMatching = true), selected.clear(), renderSelection(), grid.update()) });
  const selClear = h("button", { type: "button", onclick: () => ((allMatching = false), selected.clear(), renderSelection(), grid.update()) }, "Clear selection");
  const reset = h("input", { type: "checkbox", id: "reset-attempts" });
  const reprocessB = btn("Reprocess selected", async () => {
    // Only finished items go back to the queue. "All matching" names the
    // statuses: without any the API would take only ERROR and NOT_FOUND.
    const finished = (statuses.length ? statuses : api.STATUSES).filter((s) => s !== "PENDING" && s !== "PROCESSING");
    if (allMatching && finished.length === 0) {
      note.error("Pending and processing items are already in the queue: only done, error, not found and skipped items can be reprocessed.");
      return;
    }
    if (allMatching && !confirm(`Put every ${finished.join(", ").toLowerCase()} item of this filter back in the queue?`)) return;
    const body = allMatching ? { scope: "job", statuses: finished } : { scope: "items", itemIds: Array.from(selected, String) };
    const r = await api.post<{ reprocessed: number }>(`/api/jobs/${id}/reprocess`, { ...body, resetAttempts: reset.checked });
    note.info(`${fmt.count(r.reprocessed, "item")} back in the queue.`);
    allMatching = false;
    selected.clear();
    renderSelection();
    pager.refresh();
  }, "primary");
  const selBar = h(
    "div",
    { class: "toolbar selbar", role: "toolbar", "aria-label": "Selection" },
    selInfo,
    selAll,
    selClear,
    reprocessB,
    h("label", { class: "check" }, reset, " reset attempts"),
    h("label", { class: "check push" }, inputBox, " input summary column"),
  );
  function renderSelection(): void {
    const n = rowCount();
    const count = allMatching ? n : selected.size;
    selInfo.textContent = allMatching
      ? `All ${fmt.int(n)} items matching the filter are selected`
      : `${fmt.int(count)} selected`;
    selAll.textContent = `Select all ${fmt.int(n)} matching`;
    selAll.disabled = allMatching || n === 0;
    selClear.disabled = count === 0;
    reprocessB.disabled = count === 0;
    grid.update();
  }

  // The drawer.
  const drawerBody = h("div", { class: "drawer-body" });
  const drawerTitle = h("h2", { id: "drawer-title" }, "Item");
  const closeB = h("button", { type: "button", class: "ghost", "aria-label": "Close the item", onclick: () => closeDrawer() }, "✕");
  const drawer = h(
    "aside",
    { class: "drawer", role: "dialog", "aria-labelledby": "drawer-title", hidden: true, onkeydown: (e: KeyboardEvent) => e.key === "Escape" && closeDrawer() },
    h("div", { class: "drawer-head" }, drawerTitle, closeB),
    drawerBody,
  );
  let drawerFor = 0;
  async function openDrawer(itemId: number): Promise<void> {
    drawerFor = itemId;
    drawer.hidden = false;
    drawerTitle.textContent = `Item ${itemId}`;
    replace(drawerBody, h("p", { class: "muted" }, "Loading…"));
    closeB.focus();
    try {
      const it = await api.get<api.ItemDetail>(`/api/items/${itemId}`);
      if (drawerFor !== itemId) return;
      drawerTitle.textContent = `Row ${it.seq} · item ${it.id}`;
      replace(
        drawerBody,
        h(
          "dl",
          { class: "kv" },
          h("dt", null, "Status"),
          h("dd", null, h("span", { class: `chip s-${it.status}` }, it.status)),
          h("dt", null, "Attempts"),
          h("dd", null, String(it.attempts)),
          h("dt", null, "Updated"),
          h("dd", null, fmt.time(it.updatedAt)),
          it.lastError ? h("dt", null, "Last error") : null,
          it.lastError ? h("dd", { class: "error" }, (it.lastErrorCode ? it.lastErrorCode + ": " : "") + it.lastError) : null,
        ),
        h("h3", null, "Input"),
        jsonBlock(it.input),
        h("h3", null, "Normalised input"),
        jsonBlock(it.normalized),
        h("h3", null, "Result"),
        jsonBlock(it.result),
        h("h3", null, `Attempt history (${it.attemptHistory.length})`),
        it.attemptHistory.length
          ? h(
              "table",
              { class: "attempts" },
              h("thead", null, h("tr", null, ...["#", "Outcome", "Started", "Took", "Worker", "Error"].map((t) => h("th", { scope: "col" }, t)))),
              h(
                "tbody",
                null,
                ...it.attemptHistory.map((a) =>
                  h(
                    "tr",
                    null,
                    h("td", null, String(a.attempt)),
                    h("td", null, h("span", { class: `chip s-${a.outcome}` }, a.outcome)),
                    h("td", null, fmt.time(a.startedAt)),
                    h("td", null, fmt.ms(a.durationNs / 1e6)),
                    h("td", null, a.worker),
                    h("td", { class: "error" }, [a.errorClass, a.error].filter(Boolean).join(": ")),
                  ),
                ),
              ),
            )
          : h("p", { class: "muted" }, "Not attempted yet."),
      );
    } catch (e) {
      replace(drawerBody, h("p", { class: "notice error", role: "alert" }, message(e)));
    }
  }
  function closeDrawer(): void {
    drawer.hidden = true;
    drawerFor = 0;
    grid.focus();
  }

  // Data.
  function setJob(j: api.Job): void {
    const before = job;
    job = j;
    grid.setEmptyText(statuses.length ? "No item has these statuses." : "This job has no items.");
    title.textContent = j.name || `Job ${j.id}`;
    replace(
      meta,
      h("span", { class: "muted" }, `#${j.id} · pipeline ${j.pipeline} · created ${fmt.time(j.createdAt)}`),
      stateChip(j.state),
      h("div", { class: "prog" }, progress(j), h("span", { class: "small" }, progressText(j))),
      j.requestCap ? h("span", { class: "small muted" }, `requests ${fmt.int(j.requests)} / cap ${fmt.int(j.requestCap)}`) : null,
      j.lastError ? h("p", { class: "notice error" }, j.lastError) : null,
    );
    const terminal = api.TERMINAL_STATES.includes(j.state);
    pauseB.disabled = !(j.state === "QUEUED" || j.state === "RUNNING");
    resumeB.disabled = j.state !== "PAUSED";
    cancelB.disabled = terminal;
    kickB.disabled = !(j.state === "QUEUED" || j.state === "RUNNING");
    renderFacets();
    renderSelection();
    if (before && changed(before, j)) liveRefresh(terminal);
  }
  // While a job runs its rows move (the grid's order is by last update):
  // the rows on screen are read again at most every 2 s, the columns at
  // most every 10 s.
  let lastRefresh = 0;
  let lastCols = 0;
  let pending = 0;
  function liveRefresh(final: boolean): void {
    const now = Date.now();
    const wait = final ? 0 : Math.max(0, lastRefresh + 2000 - now);
    clearTimeout(pending);
    pending = window.setTimeout(() => {
      lastRefresh = Date.now();
      pager.refresh();
      if (final || lastRefresh - lastCols > 10000) void loadColumns();
    }, wait);
  }
  async function loadColumns(): Promise<void> {
    lastCols = Date.now();
    try {
      const qs = statuses.length ? "?statuses=" + statuses.join(",") : "";
      const r = await api.get<{ columns: api.Column[] }>(`/api/jobs/${id}/columns${qs}`);
      if (JSON.stringify(r.columns) !== JSON.stringify(columns)) {
        columns = r.columns;
        showColumns();
      }
    } catch (e) {
      note.error(e);
    }
  }
  const unsub = api.onJob(
    (j) => j.id === id && setJob(j),
    (gone) => gone === id && note.error(`Job ${id} was deleted.`),
  );

  const el = h(
    "section",
    { class: "page jobpage" },
    h("p", { class: "crumbs" }, link("/", "Jobs"), " / ", `job ${id}`),
    title,
    meta,
    controls,
    note.el,
    facets,
    selBar,
    grid.el,
    drawer,
  );
  columns = [
    { key: "seq", label: "Seq" },
    { key: "status", label: "Status" },
    { key: "attempts", label: "Attempts" },
    { key: "error", label: "Error" },
  ];
  showColumns();
  renderExports();
  api
    .get<api.Job>(`/api/jobs/${id}`)
    .then((j) => {
      setJob(j);
      grid.update();
    })
    .catch((e) => note.error(e));
  // The first rows are asked for beside the job, not after it.
  pager.want(0, 60);
  schedulePoll(15_000);
  return {
    title: `Job ${id}`,
    el,
    destroy() {
      closed = true;
      clearTimeout(pollTimer);
      unsub();
      pager.close();
      grid.destroy();
      clearTimeout(pending);
    },
  };
}

function parseStatuses(v: string | null): api.Status[] {
  if (!v) return [];
  const want = v.split(",").map((s) => s.trim().toUpperCase());
  return api.STATUSES.filter((s) => want.includes(s));
}

function sumCounts(j: api.Job, sts: readonly api.Status[]): number {
  let n = 0;
  for (const s of sts) n += j.counts[s] ?? 0;
  return n;
}

function changed(a: api.Job, b: api.Job): boolean {
  return a.state !== b.state || api.STATUSES.some((s) => a.counts[s] !== b.counts[s]);
}
