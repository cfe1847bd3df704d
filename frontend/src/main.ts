// Sluice's UI: the shell (navigation, theme, sign-in state) and the routes.

import "./style.css";
import * as api from "./api";
import { guardDrops } from "./desktop";
import { h, replace } from "./dom";
import { go, prefetch, setRoutes, show } from "./router";
import type { Page } from "./ui";
import { loginPage } from "./pages/login";
import { JOBS_FIRST_PAGE, jobsPage } from "./pages/jobs";
import { jobPage, prefetchJob } from "./pages/job";
import { pendingPage } from "./pages/pending";
import { pipelinesPage } from "./pages/pipelines";
import { healthPage } from "./pages/health";
import { definitionsPage, triggersPage, workersPage } from "./pages/automation";
import { soonPage } from "./pages/soon";
import { sourcesPage } from "./pages/sources";

// session is who is signed in (null before /api/me answered yes).
export let session: api.Me | null = null;

const main = h("main", { id: "main", tabindex: -1 });
const who = h("span", { class: "who" });
const live = h("span", { class: "live", title: "Live updates", "aria-live": "polite" });
const themeBtn = h("button", { type: "button", class: "ghost", onclick: () => cycleTheme() });
const signOut = h("button", { type: "button", class: "ghost", onclick: () => void doSignOut() }, "Sign out");

const navItems: [string, string, boolean][] = [
  ["/", "Jobs", false],
  ["/pending", "Pending", false],
  ["/pipelines", "Pipelines", false],
  ["/health", "Health", false],
  ["/sources", "Sources", false],
  ["/definitions", "Commands", false],
  ["/triggers", "Triggers", false],
  ["/workers", "Workers", false],
];
const nav = h(
  "nav",
  { "aria-label": "Main" },
  h(
    "ul",
    null,
    ...navItems.map(([href, text, soon]) =>
      h("li", null, h("a", { href, "data-link": true, class: soon ? "soon" : null }, text, soon ? h("small", null, " soon") : null)),
    ),
  ),
);
const header = h(
  "header",
  { class: "top" },
  h("a", { href: "#main", class: "skip" }, "Skip to content"),
  h("a", { href: "/", "data-link": true, class: "brand" }, "Sluice"),
  nav,
  h("div", { class: "right" }, live, who, themeBtn, signOut),
);

document.getElementById("app")!.append(header, main);
guardDrops();

// Theme: follows the system (prefers-color-scheme) unless chosen.
type Theme = "auto" | "light" | "dark";
function applyTheme(t: Theme): void {
  if (t === "auto") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
  themeBtn.textContent = { auto: "Theme: auto", light: "Theme: light", dark: "Theme: dark" }[t];
  themeBtn.setAttribute("aria-label", `Colour theme: ${t}; change`);
}
function cycleTheme(): void {
  const cur = (localStorage.getItem("sluice.theme") as Theme) || "auto";
  const next: Theme = cur === "auto" ? "light" : cur === "light" ? "dark" : "auto";
  localStorage.setItem("sluice.theme", next);
  applyTheme(next);
}
applyTheme((localStorage.getItem("sluice.theme") as Theme) || "auto");

let current: Page | null = null;
function render(p: Page, path: string): void {
  current?.destroy?.();
  current = p;
  replace(main, p.el);
  document.title = p.title + " · Sluice";
  for (const a of nav.querySelectorAll("a")) {
    const href = a.getAttribute("href")!;
    const on = href === "/" ? path === "/" || path.startsWith("/jobs") : path.startsWith(href);
    if (on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const signedIn = session !== null;
  nav.hidden = !signedIn;
  signOut.hidden = !signedIn || session!.via === "desktop"; // the window has no sign-in
  live.hidden = !signedIn;
  who.textContent = signedIn ? session!.user.name : "";
}

function signedIn(me: api.Me): void {
  session = me;
  api.startEvents();
}

async function doSignOut(): Promise<void> {
  try {
    await api.post("/api/logout");
  } catch {
    // signed out either way
  }
  session = null;
  api.stopEvents();
  go("/login", true);
}

api.setSignedOutHandler(() => {
  if (!session) return;
  session = null;
  api.stopEvents();
  go("/login?next=" + encodeURIComponent(location.pathname + location.search), true);
});
api.onLive((on) => {
  live.textContent = on ? "● live" : "○ reconnecting";
  live.className = on ? "live on" : "live off";
});

// guard renders a page only when signed in.
function guard(fn: (m: RegExpMatchArray, q: URLSearchParams) => Page): (m: RegExpMatchArray, q: URLSearchParams) => Promise<Page> {
  return async (m, q) => {
    if (!session) {
      try {
        signedIn(await api.me());
      } catch {
        const next = location.pathname + location.search;
        history.replaceState(null, "", "/login" + (next !== "/" ? "?next=" + encodeURIComponent(next) : ""));
        return loginPage(new URLSearchParams(location.search), onLogin);
      }
    }
    return fn(m, q);
  };
}

function onLogin(me: api.Me, next: string): void {
  signedIn(me);
  go(next.startsWith("/") && !next.startsWith("//") ? next : "/", true);
}

setRoutes(
  [
    { path: /^\/login$/, render: (_m, q) => loginPage(q, onLogin) },
    { path: /^\/$/, render: guard(() => jobsPage()), prefetch: () => api.prefetch(JOBS_FIRST_PAGE) },
    { path: /^\/jobs\/(\d+)$/, render: guard((m, q) => jobPage(Number(m[1]), q)), prefetch: (m, q) => prefetchJob(Number(m[1]), q) },
    { path: /^\/pending$/, render: guard(() => pendingPage(session!)) },
    { path: /^\/pipelines(?:\/([^/]+))?$/, render: guard((m) => pipelinesPage(m[1] ? decodeURIComponent(m[1]) : null, session!)) },
    { path: /^\/health$/, render: guard(() => healthPage()) },
    { path: /^\/sources$/, render: guard(() => sourcesPage(session!)) },
    { path: /^\/definitions$/, render: guard(() => definitionsPage()) },
    { path: /^\/triggers$/, render: guard(() => triggersPage(session!)) },
    { path: /^\/workers$/, render: guard(() => workersPage()) },
    { path: /.*/, render: guard(() => soonPage()) },
  ],
  render,
);
// A cold load asks for its page's data beside /api/me (signed out, the
// answer is a 401 nobody reads).
prefetch(location.pathname + location.search);
void show();
