// A small history router: in-app links change the address without a
// reload; the Go side serves index.html for every path it does not know.

import type { Page } from "./ui";

export interface Route {
  path: RegExp;
  render(m: RegExpMatchArray, q: URLSearchParams): Page | Promise<Page>;
}

let routes: Route[] = [];
let onRender: (p: Page, path: string) => void = () => {};

export function setRoutes(r: Route[], render: (p: Page, path: string) => void): void {
  routes = r;
  onRender = render;
  window.addEventListener("popstate", () => void show());
  document.addEventListener("click", (e) => {
    const a = (e.target as HTMLElement).closest("a[data-link]") as HTMLAnchorElement | null;
    if (!a || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    go(a.getAttribute("href") ?? "/");
  });
}

export function go(href: string, replace = false): void {
  if (replace) history.replaceState(null, "", href);
  else history.pushState(null, "", href);
  void show();
}

let seq = 0;

export async function show(): Promise<void> {
  const n = ++seq;
  const path = location.pathname;
  const q = new URLSearchParams(location.search);
  for (const r of routes) {
    const m = path.match(r.path);
    if (m) {
      const p = await r.render(m, q);
      if (n === seq) onRender(p, path);
      else p.destroy?.();
      return;
    }
  }
}
