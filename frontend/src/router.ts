// A small history router: in-app links change the address without a
// reload; the Go side serves index.html for every path it does not know.

import type { Page } from "./ui";

export interface Route {
  path: RegExp;
  render(m: RegExpMatchArray, q: URLSearchParams): Page | Promise<Page>;
  // prefetch asks for the page's first data (api.prefetch) before the page
  // is built: on a link's pointerdown, on its click before the route
  // changes, and on a cold load beside /api/me.
  prefetch?(m: RegExpMatchArray, q: URLSearchParams): void;
}

let routes: Route[] = [];
let onRender: (p: Page, path: string) => void = () => {};

export function setRoutes(r: Route[], render: (p: Page, path: string) => void): void {
  routes = r;
  onRender = render;
  window.addEventListener("popstate", () => void show());
  const inAppLink = (e: MouseEvent): string | null => {
    const a = (e.target as HTMLElement).closest("a[data-link]") as HTMLAnchorElement | null;
    if (!a || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return null;
    return a.getAttribute("href") ?? "/";
  };
  // The next page's data is asked for when the button goes down, tens of
  // milliseconds before the click, and before the old page is torn down.
  document.addEventListener("pointerdown", (e) => {
    const href = inAppLink(e);
    if (href) prefetch(href);
  });
  document.addEventListener("click", (e) => {
    const href = inAppLink(e);
    if (!href) return;
    e.preventDefault();
    prefetch(href);
    go(href);
  });
}

// prefetch starts the first requests of the page at href (a path with
// its query), if its route has any.
export function prefetch(href: string): void {
  const u = new URL(href, location.origin);
  for (const r of routes) {
    const m = u.pathname.match(r.path);
    if (m) {
      r.prefetch?.(m, u.searchParams);
      return;
    }
  }
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
