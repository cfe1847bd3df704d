// The virtual grid of a job's items: only the rows on screen exist in the
// DOM (a pool reused as it scrolls), positioned by the scaled scroll model,
// with data from the Pager. Keyboard: arrows, Page Up/Down, Home/End move
// the active row; Space selects it; Enter opens it.

import type { Column, Item } from "./api";
import { cellText } from "./format";
import { h, replace } from "./dom";
import { ScrollModel } from "./scroll";
import { WantGate } from "./settle";

export const ROW_HEIGHT = 32;

// A move of more than JUMP_PAGES screens in one frame is a jump: the rows
// of a jump are asked for once the position rests (WantGate).
const JUMP_PAGES = 3;

// INPUT_KEY is the key of the optional "Input (summary)" column: the
// listing's short inputSummary. It is the one column not in the exports
// (it is not a column of /columns); the grid shows it only when asked.
export const INPUT_KEY = "\u0000input";

export interface GridSource {
  rowCount(): number;
  row(i: number): Item | undefined;
  want(first: number, last: number): void;
}

export interface GridHandlers {
  isSelected(it: Item): boolean;
  toggle(it: Item): void;
  open(it: Item): void;
}

let gridSeq = 0;

// width of a column in px.
function widthOf(c: Column): number {
  switch (c.key) {
    case "seq":
      return 90;
    case "status":
      return 120;
    case "attempts":
      return 90;
    case "error":
      return 240;
    case INPUT_KEY:
      return 420;
  }
  return 180;
}

// cellOf is what a column shows for an item (the export's cells: see
// engine/export/cells.go).
export function cellOf(it: Item, key: string): string {
  switch (key) {
    case "seq":
      return String(it.seq);
    case "status":
      return it.status;
    case "attempts":
      return String(it.attempts);
    case "error":
      return it.lastError ?? "";
    case INPUT_KEY:
      return it.inputSummary ?? "";
  }
  const k = key.startsWith("result.") ? key.slice(7) : key;
  const r = it.result;
  if (!r || typeof r !== "object") return "";
  return cellText((r as Record<string, unknown>)[k]);
}

export class Grid {
  readonly el: HTMLElement;
  private scroller: HTMLElement;
  private head: HTMLElement;
  private spacer: HTMLElement;
  private layer: HTMLElement;
  private pool: HTMLElement[] = [];
  private cols: Column[] = [];
  private template = "";
  private model = new ScrollModel(ROW_HEIGHT);
  private active = 0;
  // top is the content offset shown (px of virtual content above the
  // viewport); scrolledTo is the scrollTop the grid itself last set, to
  // tell its own scroll events from the user's dragging the scrollbar.
  private top = 0;
  private scrolledTo = -1;
  private frame = 0;
  private id = ++gridSeq;
  private resize: ResizeObserver;
  private emptyEl: HTMLElement;
  // The scroller's client height and the header's height, read when they
  // change (a ResizeObserver's callback runs after layout, so the reads
  // there cost nothing) rather than in every frame, where a read after
  // the frame's writes forces a second layout. -1: not known yet.
  private viewH = -1;
  private headH = -1;
  private gate: WantGate;

  constructor(
    private src: GridSource,
    private on: GridHandlers,
    label: string,
  ) {
    this.head = h("div", { class: "grid-head", role: "row", "aria-rowindex": 1 });
    this.layer = h("div", { class: "grid-layer", role: "rowgroup" });
    this.spacer = h("div", { class: "grid-spacer" }, this.layer);
    this.scroller = h(
      "div",
      {
        class: "grid-scroll",
        tabindex: 0,
        role: "grid",
        "aria-label": label,
        "aria-multiselectable": "true",
        onscroll: () => this.scrolled(),
        onwheel: (e: WheelEvent) => this.wheel(e),
        onkeydown: (e: KeyboardEvent) => this.key(e),
      },
      this.head,
      this.spacer,
    );
    this.emptyEl = h("p", { class: "grid-empty muted", hidden: true }, "Loading…");
    this.el = h("div", { class: "grid" }, this.scroller, this.emptyEl);
    this.resize = new ResizeObserver(() => {
      this.viewH = this.scroller.clientHeight;
      this.headH = this.head.offsetHeight;
      this.schedule();
    });
    this.resize.observe(this.scroller);
    this.resize.observe(this.head);
    this.gate = new WantGate(
      (a, b) => this.src.want(a, b),
      () => JUMP_PAGES * this.model.rowsPerPage(),
    );
  }

  destroy(): void {
    this.resize.disconnect();
    cancelAnimationFrame(this.frame);
    this.gate.close();
  }

  setColumns(cols: Column[]): void {
    this.cols = cols;
    const widths = [40, ...cols.map(widthOf)];
    this.template = widths.map((w) => w + "px").join(" ");
    const total = widths.reduce((a, b) => a + b, 0);
    this.head.style.gridTemplateColumns = this.template;
    this.head.style.width = total + "px";
    this.spacer.style.width = total + "px";
    replace(
      this.head,
      h("div", { role: "columnheader", class: "cell sel", "aria-label": "Selected" }),
      ...cols.map((c) => h("div", { role: "columnheader", class: "cell", title: c.label }, c.label)),
    );
    for (const r of this.pool) r.remove();
    this.pool = [];
    this.schedule();
  }

  // setEmptyText is what shows when there are no rows.
  setEmptyText(t: string): void {
    this.emptyEl.textContent = t;
  }

  // update re-renders (new data, new count, new selection).
  update(): void {
    for (const r of this.pool) r.dataset.key = "";
    this.schedule();
  }

  // scrollToRow brings row i into view and makes it active.
  scrollToRow(i: number): void {
    this.active = Math.max(0, Math.min(i, this.src.rowCount() - 1));
    this.measure();
    this.setTop(this.model.topToShow(this.active, this.top));
    this.update();
  }

  // setTop shows content offset v and moves the scrollbar to match.
  private setTop(v: number): void {
    this.top = this.model.clampTop(v);
    const st = this.model.scrollTopFor(this.top);
    this.scroller.scrollTop = st;
    this.scrolledTo = this.scroller.scrollTop;
    this.schedule();
  }

  private scrolled(): void {
    const st = this.scroller.scrollTop;
    if (Math.abs(st - this.scrolledTo) > 1) {
      // The user moved the scrollbar: its position picks the content.
      this.measure();
      this.top = this.model.virtualTop(st);
      this.scrolledTo = st;
    }
    this.schedule();
  }

  // wheel scrolls the content by the wheel's distance, not by the scaled
  // scrollbar's (which would move many rows per notch on a huge grid).
  private wheel(e: WheelEvent): void {
    if (this.model.ratio() === 1 || Math.abs(e.deltaY) < Math.abs(e.deltaX) || e.ctrlKey) return;
    e.preventDefault();
    const unit = e.deltaMode === 1 ? ROW_HEIGHT : e.deltaMode === 2 ? this.model.viewport : 1;
    this.setTop(this.top + e.deltaY * unit);
  }

  scrollToEnd(): void {
    this.scrollToRow(this.src.rowCount() - 1);
  }

  focus(): void {
    this.scroller.focus();
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  private measure(): void {
    if (this.viewH < 0) this.viewH = this.scroller.clientHeight;
    if (this.headH < 0) this.headH = this.head.offsetHeight;
    this.model.rows = this.src.rowCount();
    this.model.viewport = Math.max(ROW_HEIGHT, this.viewH - this.headH);
    setStyle(this.spacer, "height", this.model.spacerHeight() + "px");
    setStyle(this.layer, "height", Math.min(this.model.viewport, this.model.spacerHeight()) + "px");
    setStyle(this.layer, "top", this.headH + "px");
    const count = String(this.model.rows + 1);
    if (this.scroller.getAttribute("aria-rowcount") !== count) this.scroller.setAttribute("aria-rowcount", count);
  }

  private render(): void {
    this.measure();
    this.top = this.model.clampTop(this.top);
    // A new row count changes the scale: keep the scrollbar on the content.
    const st = this.model.scrollTopFor(this.top);
    if (Math.abs(this.scroller.scrollTop - st) > 1) {
      this.scroller.scrollTop = st;
      this.scrolledTo = this.scroller.scrollTop;
    }
    const vis = this.model.visibleAt(this.top);
    this.emptyEl.hidden = this.model.rows > 0;
    const n = vis.last - vis.first + 1;
    this.gate.ask(vis.first - 50, vis.last + 50);
    while (this.pool.length < n) {
      const r = this.newRow();
      this.pool.push(r);
      this.layer.appendChild(r);
    }
    for (let j = 0; j < this.pool.length; j++) {
      const r = this.pool[j];
      const i = vis.first + j;
      if (j >= n) {
        r.hidden = true;
        continue;
      }
      r.hidden = false;
      r.style.transform = `translateY(${vis.top + j * ROW_HEIGHT}px)`;
      this.fill(r, i);
    }
    const act = this.active - vis.first;
    if (act >= 0 && act < n) this.scroller.setAttribute("aria-activedescendant", this.pool[act].id);
    else this.scroller.removeAttribute("aria-activedescendant");
  }

  // newRow makes a pooled row with its cells, which fill only rewrites:
  // scrolling changes text and classes, never the row's structure.
  private newRow(): HTMLElement {
    const box = h("input", { type: "checkbox", tabindex: -1 });
    const cells = [h("div", { class: "cell sel", role: "gridcell" }, box), ...this.cols.map(() => h("div", { class: "cell", role: "gridcell" }))];
    const r = h("div", { class: "row", role: "row" }, ...cells);
    r.style.gridTemplateColumns = this.template;
    r.addEventListener("click", (e) => this.click(r, e));
    return r;
  }

  private fill(r: HTMLElement, i: number): void {
    const it = this.src.row(i);
    const sel = it ? this.on.isSelected(it) : false;
    const key = `${i}|${it ? it.id + "@" + it.updatedAt + it.status : "-"}|${sel}|${i === this.active}`;
    if (r.dataset.key === key) return;
    r.dataset.key = key;
    r.dataset.index = String(i);
    r.id = `grid${this.id}-row${i}`;
    r.setAttribute("aria-rowindex", String(i + 2));
    r.setAttribute("aria-selected", String(sel));
    r.classList.toggle("active", i === this.active);
    r.classList.toggle("odd", i % 2 === 1);
    r.classList.toggle("loading", !it);
    const cells = r.children;
    const box = cells[0].firstElementChild as HTMLInputElement;
    box.hidden = !it;
    if (!it) {
      for (let c = 1; c < cells.length; c++) setCell(cells[c] as HTMLElement, "cell muted", c === 1 ? "…" : "");
      r.removeAttribute("data-seq");
      r.removeAttribute("data-status");
      return;
    }
    r.dataset.seq = String(it.seq);
    r.dataset.status = it.status;
    box.checked = sel;
    box.setAttribute("aria-label", `Select row ${it.seq}`);
    for (let c = 0; c < this.cols.length; c++) {
      const k = this.cols[c].key;
      const t = cellOf(it, k);
      const cls = k === "status" ? `cell status s-${it.status}` : k === "error" && t ? "cell err" : k === INPUT_KEY ? "cell input" : "cell";
      setCell(cells[c + 1] as HTMLElement, cls, t);
    }
  }

  private click(r: HTMLElement, e: MouseEvent): void {
    const i = Number(r.dataset.index);
    const it = this.src.row(i);
    if (!it) return;
    this.active = i;
    if ((e.target as HTMLElement).closest(".sel")) this.on.toggle(it);
    else this.on.open(it);
    this.update();
  }

  private key(e: KeyboardEvent): void {
    const n = this.src.rowCount();
    if (n === 0) return;
    let to = this.active;
    const page = this.model.rowsPerPage();
    switch (e.key) {
      case "ArrowDown":
        to++;
        break;
      case "ArrowUp":
        to--;
        break;
      case "PageDown":
        to += page;
        break;
      case "PageUp":
        to -= page;
        break;
      case "Home":
        to = 0;
        break;
      case "End":
        to = n - 1;
        break;
      case " ":
      case "Enter": {
        const it = this.src.row(this.active);
        if (it) {
          if (e.key === " ") this.on.toggle(it);
          else this.on.open(it);
          this.update();
        }
        e.preventDefault();
        return;
      }
      default:
        return;
    }
    e.preventDefault();
    this.scrollToRow(to);
  }
}

// setStyle writes an inline style property only when it changed.
function setStyle(el: HTMLElement, prop: "height" | "top", v: string): void {
  if (el.style[prop] !== v) el.style[prop] = v;
}

// setCell writes a cell only where it changed (a write costs style work
// even when the value is the same).
function setCell(el: HTMLElement, cls: string, text: string): void {
  if (el.className !== cls) el.className = cls;
  if (el.textContent !== text) el.textContent = text;
  const title = text.length > 20 ? text : "";
  if ((el.getAttribute("title") ?? "") !== title) {
    if (title) el.setAttribute("title", title);
    else el.removeAttribute("title");
  }
}
