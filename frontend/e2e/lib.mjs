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

// thousands writes n as the page does (en-US grouping).
export function thousands(n) {
  return n.toLocaleString("en-US");
}
