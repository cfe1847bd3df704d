// A small hand-drawn SVG line chart for the Health screen.

import { h, svg } from "./dom";

export interface Series {
  name: string;
  values: number[];
}

const W = 360;
const H = 120;
const PAD = 4;

// lineChart draws series (equal lengths, oldest first) over a shared y axis
// from 0 to their maximum; the legend shows each series' latest value.
export function lineChart(title: string, series: Series[], format: (v: number) => string): HTMLElement {
  let max = 0;
  let len = 0;
  for (const s of series) {
    len = Math.max(len, s.values.length);
    for (const v of s.values) if (Number.isFinite(v) && v > max) max = v;
  }
  const top = max > 0 ? niceCeil(max) : 1;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", preserveAspectRatio: "none" });
  const titleEl = svg("title");
  const latest = series.map((s) => `${s.name} ${format(s.values[s.values.length - 1] ?? 0)}`).join(", ");
  titleEl.textContent = `${title}: ${latest || "no data yet"}`;
  root.appendChild(titleEl);
  for (const f of [0.25, 0.5, 0.75]) {
    root.appendChild(svg("line", { x1: 0, x2: W, y1: y(top * f, top), y2: y(top * f, top), class: "gridline" }));
  }
  series.forEach((s, i) => {
    if (s.values.length < 2) return;
    const step = (W - 2 * PAD) / Math.max(1, len - 1);
    const off = len - s.values.length;
    const pts = s.values.map((v, j) => `${(PAD + (off + j) * step).toFixed(1)},${y(Number.isFinite(v) ? v : 0, top).toFixed(1)}`).join(" ");
    root.appendChild(svg("polyline", { points: pts, class: `line c${i % 6}` }));
  });
  return h(
    "figure",
    { class: "card chartbox" },
    h("figcaption", null, h("span", null, title), h("span", { class: "small muted" }, "max " + format(top))),
    root,
    h(
      "ul",
      { class: "legend" },
      ...(series.length
        ? series.map((s, i) => h("li", null, h("i", { class: `sw c${i % 6}` }), `${s.name}: `, h("strong", null, format(s.values[s.values.length - 1] ?? 0))))
        : [h("li", { class: "muted" }, "none yet")]),
    ),
  );
}

function y(v: number, top: number): number {
  return H - PAD - (v / top) * (H - 2 * PAD);
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
export function niceCeil(v: number): number {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}
