// Pending: items across jobs (GET /api/pending, seed 000's global view
// behind SLUICE_PENDING_VIEW), with "Go to job" and "Reprocess selected".

import * as api from "../api";
import { h, replace } from "../dom";
import * as fmt from "../format";
import { link, notice, type Page } from "../ui";

export function pendingPage(me: api.Me): Page {
  const note = notice();
  let statuses: api.Status[] = ["PENDING", "PROCESSING"];
  let owner = "me";
  let next: string | null = null;
  const items = new Map<number, api.Item>();
  const selected = new Set<number>();
  const tbody = h("tbody");
  const more = h("button", { type: "button", hidden: true, onclick: () => void load(false) }, "Load more");
  const empty = h("p", { class: "muted", hidden: true }, "Nothing here: no item with these statuses.");

  const facets = h("div", { class: "facets", role: "group", "aria-label": "Statuses shown" });
  function renderFacets(): void {
    replace(
      facets,
      ...api.STATUSES.map((s) =>
        h(
          "button",
          {
            type: "button",
            class: `facet s-${s}`,
            "aria-pressed": String(statuses.includes(s)),
            onclick: () => {
              const nextSts = statuses.includes(s) ? statuses.filter((x) => x !== s) : [...statuses, s];
              if (nextSts.length === 0) return;
              statuses = api.STATUSES.filter((x) => nextSts.includes(x));
              renderFacets();
              void load(true);
            },
          },
          s.replace("_", " ").toLowerCase(),
        ),
      ),
    );
  }
  const ownerSel = h(
    "select",
    { id: "pending-owner", onchange: () => ((owner = ownerSel.value), void load(true)) },
    h("option", { value: "me" }, "Mine"),
    h("option", { value: "all" }, "Everyone's"),
  );
  const selInfo = h("span", { "aria-live": "polite" }, "0 selected");
  const reprocessB = h("button", { type: "button", class: "primary", disabled: true, onclick: () => void reprocess() }, "Reprocess selected");
  const allBox = h("input", {
    type: "checkbox",
    "aria-label": "Select every item shown",
    onchange: () => {
      if (allBox.checked) for (const id of items.keys()) selected.add(id);
      else selected.clear();
      renderRows();
    },
  });

  function renderSel(): void {
    selInfo.textContent = `${fmt.int(selected.size)} selected`;
    reprocessB.disabled = selected.size === 0;
  }
  function renderRows(): void {
    replace(
      tbody,
      ...Array.from(items.values(), (it) => {
        const box = h("input", {
          type: "checkbox",
          checked: selected.has(it.id),
          "aria-label": `Select item ${it.id} (job ${it.jobId}, row ${it.seq})`,
          onchange: () => {
            if (box.checked) selected.add(it.id);
            else selected.delete(it.id);
            renderSel();
          },
        });
        return h(
          "tr",
          null,
          h("td", null, box),
          h("td", null, link(`/jobs/${it.jobId}`, `Go to job ${it.jobId}`)),
          h("td", { class: "num" }, String(it.seq)),
          h("td", null, h("span", { class: `chip s-${it.status}` }, it.status)),
          h("td", { class: "num" }, String(it.attempts)),
          h("td", { class: "summary", title: it.inputSummary }, it.inputSummary),
          h("td", { class: "error" }, it.lastError ?? ""),
          h("td", { class: "small" }, fmt.time(it.updatedAt)),
        );
      }),
    );
    empty.hidden = items.size > 0;
    renderSel();
  }

  async function load(fresh: boolean): Promise<void> {
    note.clear();
    if (fresh) {
      next = null;
      items.clear();
      selected.clear();
      allBox.checked = false;
    }
    try {
      const q = new URLSearchParams({ statuses: statuses.join(","), pageSize: "200", userId: owner });
      if (next) q.set("after", next);
      const page = await api.get<api.Page>("/api/pending?" + q);
      for (const it of page.items) items.set(it.id, it);
      next = page.next;
      more.hidden = !next;
      renderRows();
    } catch (e) {
      note.error(e);
    }
  }

  async function reprocess(): Promise<void> {
    const byJob = new Map<number, string[]>();
    for (const id of selected) {
      const it = items.get(id);
      if (!it) continue;
      byJob.set(it.jobId, [...(byJob.get(it.jobId) ?? []), String(id)]);
    }
    let n = 0;
    try {
      for (const [jobId, ids] of byJob) {
        const r = await api.post<{ reprocessed: number }>(`/api/jobs/${jobId}/reprocess`, { scope: "items", itemIds: ids });
        n += r.reprocessed;
      }
      await load(true);
      note.info(
        `${fmt.count(n, "selected item")} back in the queue` +
          (n < selectedCount(byJob) ? " (items still pending or running are left as they are)." : "."),
      );
    } catch (e) {
      note.error(e);
    }
  }

  renderFacets();
  void load(true);
  return {
    title: "Pending",
    el: h(
      "section",
      { class: "page" },
      h("h1", null, "Pending across jobs"),
      h(
        "div",
        { class: "toolbar" },
        facets,
        me.user.role === "admin" ? h("label", { for: "pending-owner" }, "Whose") : null,
        me.user.role === "admin" ? ownerSel : null,
        h("button", { type: "button", onclick: () => void load(true) }, "Refresh"),
      ),
      h("div", { class: "toolbar" }, selInfo, reprocessB),
      note.el,
      h(
        "div",
        { class: "table-wrap" },
        h(
          "table",
          { class: "pending" },
          h(
            "thead",
            null,
            h(
              "tr",
              null,
              h("th", { scope: "col" }, allBox),
              ...["Job", "Row", "Status", "Attempts", "Input", "Error", "Updated"].map((t) => h("th", { scope: "col" }, t)),
            ),
          ),
          tbody,
        ),
      ),
      empty,
      more,
    ),
  };
}

function selectedCount(m: Map<number, string[]>): number {
  let n = 0;
  for (const v of m.values()) n += v.length;
  return n;
}
