// Jobs: every job with its state, progress, rate, ETA and errors, kept
// live by the event stream; new jobs from files dropped on the page or
// chosen with the file picker.

import * as api from "../api";
import { inDesktop, onDropped } from "../desktop";
import { h, replace } from "../dom";
import * as fmt from "../format";
import { link, notice, progress, progressText, stateChip, type Page } from "../ui";

// JOBS_FIRST_PAGE is the page's first request (the router asks for it
// before the page is built).
export const JOBS_FIRST_PAGE = "/api/jobs?pageSize=100";

export function jobsPage(): Page {
  const note = notice();
  const rows = new Map<number, HTMLTableRowElement>();
  const tbody = h("tbody");
  const empty = h("p", { class: "muted", hidden: true }, "No jobs yet: drop a CSV, XLSX or image files here to start one.");
  let next: string | null = null;
  const more = h("button", { type: "button", hidden: true, onclick: () => void load() }, "Load more jobs");

  const rowOf = (j: api.Job): HTMLTableRowElement => {
    const errs = j.failed
      ? link(`/jobs/${j.id}?statuses=ERROR,NOT_FOUND`, fmt.int(j.failed), { class: "errcount", "aria-label": `${j.failed} failed items of job ${j.id}` })
      : h("span", { class: "muted" }, "0");
    const tr = h(
      "tr",
      { "data-job": j.id, "data-state": j.state },
      h("td", { class: "num" }, String(j.id)),
      h("td", null, link(`/jobs/${j.id}`, j.name || `job ${j.id}`)),
      h("td", null, j.pipeline),
      h("td", null, stateChip(j.state)),
      h("td", { class: "progcell" }, h("div", { class: "prog" }, progress(j), h("div", { class: "small muted" }, progressText(j)))),
      h("td", { class: "num" }, errs),
      h("td", { class: "small" }, fmt.time(j.createdAt)),
    );
    return tr;
  };

  const put = (j: api.Job, atTop: boolean) => {
    const tr = rowOf(j);
    const old = rows.get(j.id);
    if (old) old.replaceWith(tr);
    else if (atTop) tbody.prepend(tr);
    else tbody.append(tr);
    rows.set(j.id, tr);
    empty.hidden = rows.size > 0;
  };

  // shown puts a job this page just made at the top at once: the event
  // stream may not tell of a small job that finished between two of its
  // looks.
  const shown = (id: number) => {
    if (rows.has(id)) return;
    api.get<api.Job>(`/api/jobs/${id}`).then((j) => {
      if (!rows.has(j.id)) put(j, true);
    }, () => {});
  };

  async function load(): Promise<void> {
    try {
      const page = await api.get<{ jobs: api.Job[]; next: string | null }>(next ? "/api/jobs?" + new URLSearchParams({ pageSize: "100", after: next }) : JOBS_FIRST_PAGE);
      for (const j of page.jobs) put(j, false);
      next = page.next;
      more.hidden = !next;
      empty.hidden = rows.size > 0;
    } catch (e) {
      note.error(e);
    }
  }

  // A safety net beside the event stream (which can miss a change that
  // starts and ends between two of its looks): the newest jobs every 15 s.
  const timer = window.setInterval(async () => {
    try {
      const page = await api.get<{ jobs: api.Job[] }>(JOBS_FIRST_PAGE);
      for (const j of page.jobs) if (rows.has(j.id)) put(j, false);
    } catch {
      // the next look will tell
    }
  }, 15_000);

  const unsub = api.onJob(
    (j) => {
      const top = Math.max(0, ...rows.keys());
      if (rows.has(j.id) || j.id > top) put(j, true);
    },
    (id) => {
      rows.get(id)?.remove();
      rows.delete(id);
    },
  );

  // New jobs.
  const pipeline = h("select", { id: "new-pipeline" }, h("option", { value: "" }, "Automatic (by file type)"));
  api
    .get<{ pipelines: api.Pipeline[] }>("/api/pipelines")
    .then((r) => {
      for (const p of r.pipelines) pipeline.append(h("option", { value: p.name }, p.name + (p.description ? " — " + p.description : "")));
    })
    .catch((e) => note.error(e));
  const uploads = h("ul", { class: "uploads", "aria-live": "polite" });
  const picker = h("input", {
    id: "new-files",
    type: "file",
    multiple: true,
    accept: ".csv,.tsv,.txt,.xlsx,image/*",
    class: "visually-hidden",
    onchange: () => {
      if (picker.files) void send(Array.from(picker.files));
      picker.value = "";
    },
  });
  async function send(files: File[]): Promise<void> {
    for (const f of files) {
      const bar = h("progress", { max: 100, value: 0, "aria-label": `Uploading ${f.name}` });
      const status = h("span", null, "uploading…");
      uploads.prepend(h("li", null, h("strong", null, f.name), " ", bar, " ", status));
      try {
        const r = await api.upload(f, pipeline.value, (sent, total) => {
          bar.value = total ? (100 * sent) / total : 0;
          if (sent === total) status.textContent = "storing every row…";
        });
        bar.value = 100;
        replace(status, "stored as ", link(`/jobs/${r.jobId}`, `job ${r.jobId}`));
        shown(r.jobId);
      } catch (e) {
        bar.remove();
        status.className = "error";
        status.textContent = e instanceof Error ? e.message : String(e);
      }
    }
  }
  const drop = h("div", { class: "dropzone" }, "Drop files to create jobs");
  let depth = 0;
  const onEnter = (e: DragEvent) => {
    if (!e.dataTransfer?.types.includes("Files")) return;
    e.preventDefault();
    depth++;
    drop.classList.add("on");
  };
  const onLeave = () => {
    if (--depth <= 0) {
      depth = 0;
      drop.classList.remove("on");
    }
  };
  const onOver = (e: DragEvent) => {
    if (e.dataTransfer?.types.includes("Files")) e.preventDefault();
  };
  const onDrop = (e: DragEvent) => {
    e.preventDefault();
    depth = 0;
    drop.classList.remove("on");
    const files = Array.from(e.dataTransfer?.files ?? []);
    // In the desktop window Go takes dropped files by path (showDropped).
    if (files.length && !inDesktop()) void send(files);
  };
  // showDropped lists what became of files dropped on the desktop window.
  const offDropped = onDropped((files) => {
    for (const f of files) {
      if (f.jobId) shown(f.jobId);
      const name = h("strong", null, f.file.split(/[\\/]/).pop() ?? f.file);
      uploads.prepend(
        f.jobId && !f.error
          ? h("li", null, name, " stored as ", link(`/jobs/${f.jobId}`, `job ${f.jobId}`), ` (${f.items ?? 0} items)`)
          : h("li", null, name, " ", h("span", { class: "error" }, f.error ?? "not stored")),
      );
    }
  });
  document.addEventListener("dragenter", onEnter);
  document.addEventListener("dragleave", onLeave);
  document.addEventListener("dragover", onOver);
  document.addEventListener("drop", onDrop);

  const newJob = h(
    "section",
    { class: "card newjob", "aria-labelledby": "newjob-title" },
    h("h2", { id: "newjob-title" }, "New job"),
    h(
      "div",
      { class: "row-form" },
      h("label", { for: "new-pipeline" }, "Pipeline"),
      pipeline,
      picker,
      h("label", { for: "new-files", class: "button primary", tabindex: 0, role: "button", onkeydown: (e: KeyboardEvent) => {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          picker.click();
        }
      } }, "Choose files…"),
      h("span", { class: "muted" }, "or drop CSV, XLSX or image files anywhere on this page."),
    ),
    uploads,
  );

  const table = h(
    "table",
    { class: "jobs" },
    h(
      "thead",
      null,
      h(
        "tr",
        null,
        h("th", { scope: "col", class: "num" }, "#"),
        h("th", { scope: "col" }, "Name"),
        h("th", { scope: "col" }, "Pipeline"),
        h("th", { scope: "col" }, "State"),
        h("th", { scope: "col" }, "Progress"),
        h("th", { scope: "col", class: "num" }, "Errors"),
        h("th", { scope: "col" }, "Created"),
      ),
    ),
    tbody,
  );
  void load();
  return {
    title: "Jobs",
    el: h("section", { class: "page" }, h("h1", null, "Jobs"), newJob, note.el, h("div", { class: "table-wrap" }, table), empty, more, drop),
    destroy() {
      clearInterval(timer);
      unsub();
      document.removeEventListener("dragenter", onEnter);
      document.removeEventListener("dragleave", onLeave);
      document.removeEventListener("dragover", onOver);
      document.removeEventListener("drop", onDrop);
      offDropped();
    },
  };
}
