// Pipelines: the list, and an editor of one pipeline in YAML or JSON
// (PUT /api/pipelines/{name}); a validation error is shown at its field.

import * as api from "../api";
import { h, replace } from "../dom";
import { lineOfField } from "../fieldline";
import { go } from "../router";
import * as fmt from "../format";
import { link, notice, type Page } from "../ui";

const TEMPLATE = `{
  "name": "my-pipeline",
  "description": "what it does",
  "stages": [
    { "processor": "noop" }
  ]
}
`;

export function pipelinesPage(name: string | null, me: api.Me): Page {
  const note = notice();
  const list = h("ul", { class: "plist" });
  const editor = h("div", { class: "editor-wrap" });
  const isAdmin = me.user.role === "admin";

  async function loadList(): Promise<void> {
    try {
      const r = await api.get<{ pipelines: api.Pipeline[] }>("/api/pipelines");
      replace(
        list,
        ...r.pipelines.map((p) =>
          h(
            "li",
            null,
            link(`/pipelines/${encodeURIComponent(p.name)}`, p.name, { "aria-current": p.name === name ? "page" : null }),
            h("span", { class: "small muted" }, ` v${p.version}`),
            p.description ? h("div", { class: "small muted" }, p.description) : null,
          ),
        ),
        isAdmin ? h("li", null, link("/pipelines/new", "+ New pipeline")) : null,
      );
    } catch (e) {
      note.error(e);
    }
  }

  async function loadEditor(): Promise<void> {
    if (!name) {
      replace(editor, h("p", { class: "muted" }, "Choose a pipeline to see it" + (isAdmin ? " or change it." : ".")));
      return;
    }
    let text = TEMPLATE;
    let target = "";
    if (name !== "new") {
      try {
        const p = await api.get<api.Pipeline>(`/api/pipelines/${encodeURIComponent(name)}`);
        const shown: Record<string, unknown> = { ...p };
        delete shown.updatedAt;
        delete shown.version;
        text = JSON.stringify(shown, null, 2) + "\n";
        target = p.name;
        replace(editor, form(text, target, `Version ${p.version}, changed ${fmt.time(p.updatedAt)}`));
      } catch (e) {
        replace(editor, h("p", { class: "notice error", role: "alert" }, (e as Error).message));
      }
      return;
    }
    replace(editor, form(text, target, "A new pipeline"));
  }

  function form(text: string, target: string, sub: string): HTMLElement {
    const area = h("textarea", {
      id: "pipeline-text",
      spellcheck: "false",
      rows: 22,
      readonly: !isAdmin,
      "aria-describedby": "pipeline-help pipeline-error",
      value: text,
    });
    const gutter = h("pre", { class: "gutter", "aria-hidden": "true" });
    const errBox = h("div", { id: "pipeline-error", class: "field-error", role: "alert", hidden: true });
    const nameIn = h("input", { id: "pipeline-name", value: target, readonly: !!target, required: true });
    const numbers = (bad = -1) => {
      const n = area.value.split("\n").length;
      replace(gutter, ...Array.from({ length: n }, (_, i) => h("span", { class: i === bad ? "bad" : null }, String(i + 1) + "\n")));
    };
    area.addEventListener("input", () => numbers());
    area.addEventListener("scroll", () => (gutter.scrollTop = area.scrollTop));
    numbers();
    const save = h("button", { type: "submit", class: "primary", hidden: !isAdmin }, "Save");
    return h(
      "form",
      {
        class: "card",
        onsubmit: async (e: Event) => {
          e.preventDefault();
          errBox.hidden = true;
          area.removeAttribute("aria-invalid");
          note.clear();
          const n = nameIn.value.trim();
          try {
            const body = area.value;
            const isJSON = body.trimStart().startsWith("{");
            const p = await api.call<api.Pipeline>("PUT", `/api/pipelines/${encodeURIComponent(n)}`, {
              body,
              contentType: isJSON ? "application/json" : "application/yaml",
            });
            note.info(`Saved ${p.name}, version ${p.version}.`);
            numbers();
            if (!target) go(`/pipelines/${encodeURIComponent(p.name)}`, true);
            else void loadList();
          } catch (err) {
            const field = err instanceof api.ApiError ? err.field : undefined;
            const line = field ? lineOfField(area.value, field) : -1;
            errBox.hidden = false;
            replace(
              errBox,
              field ? h("strong", null, field) : null,
              field ? " — " : null,
              (err as Error).message,
              line >= 0 ? h("span", { class: "small" }, ` (line ${line + 1})`) : null,
            );
            area.setAttribute("aria-invalid", "true");
            numbers(line);
            if (line >= 0) selectLine(area, line);
          }
        },
      },
      h("h2", null, target || "New pipeline"),
      h("p", { class: "small muted" }, sub),
      h("label", { for: "pipeline-name" }, "Name"),
      nameIn,
      h("label", { for: "pipeline-text" }, "Definition (YAML or JSON)"),
      h("p", { id: "pipeline-help", class: "small muted" }, isAdmin ? "Errors are shown at the field they are about." : "Only an admin may change pipelines."),
      h("div", { class: "editor" }, gutter, area),
      errBox,
      save,
    );
  }

  void loadList();
  void loadEditor();
  return {
    title: "Pipelines",
    el: h("section", { class: "page" }, h("h1", null, "Pipelines"), note.el, h("div", { class: "split" }, h("nav", { "aria-label": "Pipelines" }, list), editor)),
  };
}

function selectLine(area: HTMLTextAreaElement, line: number): void {
  const lines = area.value.split("\n");
  let start = 0;
  for (let i = 0; i < line; i++) start += lines[i].length + 1;
  area.focus();
  area.setSelectionRange(start, start + lines[line].length);
  const lh = parseFloat(getComputedStyle(area).lineHeight) || 18;
  area.scrollTop = Math.max(0, (line - 3) * lh);
}
