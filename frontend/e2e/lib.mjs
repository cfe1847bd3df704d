// Shared by the browser tests and the UI benchmarks: the fixture server
// (frontend/e2e/fixture, a real Sluice API with workers on SQLite) and a
// headless Chromium driven by playwright-core. Debian's chromium is used;
// nothing is ever downloaded.

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { chromium } from "playwright-core";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

// The flags every run uses: no sandbox (CI runs as root), no GPU, and no
// traffic of Chromium's own.
export const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

// chromiumPath finds a Chromium: SLUICE_CHROMIUM, else Debian's. Missing,
// it returns a reason; the caller skips, or fails under SLUICE_CI.
export function chromiumPath() {
  const candidates = [process.env.SLUICE_CHROMIUM, "/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"].filter(Boolean);
  const found = candidates.find((p) => existsSync(p));
  return found ? { path: found } : { reason: `no Chromium at ${candidates.join(", ")} (Debian: apt-get install chromium; or set SLUICE_CHROMIUM)` };
}

// needBrowser returns the Chromium path, or skips the test (t.skip) saying
// why; with SLUICE_CI set a missing browser fails instead.
export function needBrowser(t) {
  const c = chromiumPath();
  if (c.path) return c.path;
  if (process.env.SLUICE_CI) throw new Error(c.reason + ": the browser tests cannot run, and CI must run them");
  t.skip(c.reason);
  return null;
}

export async function launch(executablePath) {
  return chromium.launch({ executablePath, headless: true, args: CHROMIUM_ARGS, chromiumSandbox: false });
}

// startFixture runs the fixture server (built by make into build/bin) and
// returns what it printed and a stop function.
export async function startFixture(args = []) {
  const bin = process.env.SLUICE_E2E_FIXTURE ?? path.join(root, "build/bin/e2e-fixture");
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run make e2e (it builds the fixture server)`);
  const child = spawn(bin, args, { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  const lines = createInterface({ input: child.stdout });
  const first = await new Promise((resolve, reject) => {
    lines.once("line", resolve);
    child.once("exit", (code) => reject(new Error(`the fixture server exited (${code}) before it was ready`)));
  });
  const info = JSON.parse(first);
  return {
    ...info,
    async stop() {
      child.stdin.end();
      child.kill("SIGTERM");
      await exited;
    },
  };
}

// until polls an expression in the page until it is true, once per
// animation frame (sent as a function: the page's CSP forbids eval).
export const until = (page, expr, timeout = 60_000) =>
  page.waitForFunction(new Function(`return (${expr});`), undefined, { timeout, polling: "raf" });

// ROWS_SHOWN: the grid shows rows, none of them still loading.
export const ROWS_SHOWN = `(() => { const rs = [...document.querySelectorAll(".grid-scroll .row:not([hidden])")];
  return rs.length > 0 && rs.every((r) => !r.classList.contains("loading")) })()`;

// FIRST_ROWS_SHOWN: the grid shows its first rows (row 1 at the top).
export const FIRST_ROWS_SHOWN = `document.querySelector(".grid-scroll .row[data-seq]:not([hidden])")?.dataset.seq === "1" && ${ROWS_SHOWN}`;

// signedIn returns a browser context signed in to the fixture server
// through its one-time link.
export async function signedIn(browser, srv) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const p = await context.newPage();
  await p.goto(srv.signin);
  await until(p, `!!document.querySelector("table.jobs tr[data-job]")`);
  await p.close();
  return context;
}

// dragLeg drags the grid's scroll bar thumb through leg s (1-based) of
// legs: 20 positions, 16 ms apart, as a dragged thumb sets the scroll
// position once per frame, each in a task of its own. It is set from
// outside the page: headless Chromium's scroll bars cannot be grabbed
// with the mouse.
export async function dragLeg(page, s, legs) {
  for (let k = 1; k <= 20; k++) {
    await page.evaluate(
      ({ f }) => {
        const g = document.querySelector(".grid-scroll");
        g.scrollTop = (g.scrollHeight - g.clientHeight) * f;
      },
      { f: (s - 1 + k / 20) / legs },
    );
    await page.waitForTimeout(16);
  }
}

// thousands writes n as the page does (en-US grouping).
export function thousands(n) {
  return n.toLocaleString("en-US");
}
