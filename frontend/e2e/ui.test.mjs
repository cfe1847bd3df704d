// The UI end to end: a real server (the fixture) and Debian's Chromium,
// through every screen, as a person would use them. One browser, one page,
// steps in order; SLUICE_E2E_SHOTS=DIR saves a screenshot after each step.
// SLUICE_E2E_BIG_ROWS sets the size of the job scrolled to its end
// (default 100,000).

import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { launch, needBrowser, startFixture, thousands } from "./lib.mjs";

const BIG = Number(process.env.SLUICE_E2E_BIG_ROWS) || 100_000;

test("the UI, end to end", { timeout: 8 * 60_000 }, async (t) => {
  const exe = needBrowser(t);
  if (!exe) return;
  const srv = await startFixture(["--big", String(BIG)]);
  const browser = await launch(exe);
  const tmp = await mkdtemp(path.join(tmpdir(), "sluice-e2e-"));
  t.after(async () => {
    await browser.close();
    await srv.stop();
    await rm(tmp, { recursive: true, force: true });
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  const page = await context.newPage();
  const shots = process.env.SLUICE_E2E_SHOTS;
  // until waits for a JavaScript expression to be true in the page. It is
  // sent as a function: the page's CSP forbids evaluating strings.
  const until = (expr, timeout = 30_000) =>
    page.waitForFunction(new Function(`return (${expr});`), undefined, { timeout, polling: 50 });
  let failed = false;
  const step = async (name, fn) => {
    await t.test(name, { skip: failed && "an earlier step failed" }, async () => {
      try {
        await fn();
      } catch (e) {
        failed = true;
        const text = (await page.locator("body").innerText().catch(() => "")).slice(0, 1500);
        if (shots) await page.screenshot({ path: path.join(shots, `failed-${name}.png`) }).catch(() => {});
        throw new Error(`${e.message}\npage text: ${text}`);
      }
      if (shots) await page.screenshot({ path: path.join(shots, `${name}.png`) });
    });
  };

  await step("01 a one-time sign-in link lands on the jobs page, signed in", async () => {
    await page.goto(srv.signin);
    await until(`location.pathname === "/" && !!document.querySelector("table.jobs tr[data-job]")`, 40_000);
    await until(`document.querySelector(".who").textContent === "alice"`);
  });

  await step("02 sign out; a wrong password is refused; the right one signs in", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.locator("#login-name").fill("alice");
    await page.locator("#login-password").fill("wrong-password");
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await until(`(document.querySelector(".login .notice.error")?.textContent ?? "").includes("wrong name or password")`);
    await page.locator("#login-password").fill(srv.password);
    await page.getByRole("button", { name: "Sign in", exact: true }).click();
    await until(`!!document.querySelector("table.jobs tr[data-job]")`);
  });

  const csv = path.join(tmp, "products.csv");
  await writeFile(csv, "sku,name,price\nA-1,Bottle,12.90\nA-2,Cup,3.50\nA-3,Bad row\nA-4,Pan,29.00\nA-5,Lid,4.25\n");
  await step("03 a CSV chosen with the file picker becomes a job", async () => {
    await page.locator("#new-files").setInputFiles(csv);
    await until(`!!document.querySelector(".uploads a[href^='/jobs/']")`, 40_000);
    await page.locator(".uploads a[href^='/jobs/']").first().click();
  });

  await step("04 the grid fills live and the job reaches DONE", async () => {
    await until(`document.querySelector(".jobmeta .chip")?.textContent === "done"`);
    await until(`document.querySelectorAll(".row[data-seq]:not([hidden])").length === 5`);
    await until(`document.querySelectorAll(".row[data-status=DONE]:not([hidden])").length === 4`);
    await until(`document.querySelector(".facet[data-status=SKIPPED] .count").textContent === "1"`);
    await until(`document.querySelector(".facet[data-status=DONE] .count").textContent === "4"`);
    await until(`[...document.querySelectorAll(".grid-head .cell")].map(c => c.textContent).join() === ",Seq,Status,Attempts,Error,sku,name,price"`);
  });

  await step("05 a status facet filters the grid and the address", async () => {
    await page.locator(".facet[data-status=SKIPPED]").click();
    await until(`document.querySelectorAll(".row[data-seq]:not([hidden])").length === 1 && document.querySelector(".row[data-seq]:not([hidden])").dataset.status === "SKIPPED"`);
    await until(`location.search === "?statuses=SKIPPED"`);
  });

  // exported clicks an export button and returns the downloaded file.
  const exported = async (format) => {
    const [download] = await Promise.all([
      page.waitForEvent("download", { timeout: 30_000 }),
      page.locator(`button[aria-label^='Export the grid'][data-href*='format=${format}']`).click(),
    ]);
    assert.match(download.suggestedFilename(), new RegExp(`^job-\\d+\\.${format}$`));
    const file = path.join(tmp, "export." + format);
    await download.saveAs(file);
    return readFile(file);
  };

  await step("06 Export CSV downloads exactly the filtered grid", async () => {
    const lines = (await exported("csv")).toString("utf8").trim().split(/\r?\n/);
    assert.equal(lines.length, 2, lines.join("\n"));
    // The columns are the grid's, as it shows them for this filter.
    const head = await page.evaluate(() => [...document.querySelectorAll(".grid-head .cell")].map((c) => c.textContent).filter(Boolean).join());
    assert.equal(lines[0], head);
    assert.match(lines[1], /^3,SKIPPED,/);
    await until(`!document.querySelector(".notice.error:not([hidden])")`);
  });

  await step("07 Export XLSX downloads a workbook", async () => {
    const head = (await exported("xlsx")).subarray(0, 4);
    assert.deepEqual([...head], [0x50, 0x4b, 0x03, 0x04], "an XLSX file is a zip archive");
  });

  await step("08 the item drawer shows the input, the result and the attempts", async () => {
    await page.locator(".row[data-status=SKIPPED] .cell:nth-child(3)").click();
    await page.locator(".drawer").waitFor({ state: "visible" });
    await until(`document.querySelector(".drawer").textContent.includes("Attempt history")`);
    await until(`document.querySelector(".drawer").textContent.includes("Bad row")`);
    await until(`document.querySelector("#drawer-title").textContent.startsWith("Row 3")`);
    await page.keyboard.press("Escape");
    await until(`document.querySelector(".drawer").hidden`);
  });

  await step("09 reprocessing the selected row runs it again, live", async () => {
    await page.locator(".row[data-status=SKIPPED] .cell.sel input").click();
    await until(`document.querySelector(".selinfo").textContent === "1 selected"`);
    await page.getByRole("button", { name: "Reprocess selected" }).click();
    await until(`(document.querySelector(".notice.info")?.textContent ?? "") === "1 item back in the queue."`);
    await until(`document.querySelector(".facet[data-status=SKIPPED] .count").textContent === "0" && document.querySelector(".jobmeta .chip")?.textContent === "done"`);
    await until(`document.querySelectorAll(".row[data-seq]:not([hidden])").length === 0`);
  });

  await step(`10 a ${thousands(BIG)}-row job: the first rows at once, the last row at the bottom`, async () => {
    await page.goto(`${srv.url}/jobs/${srv.bigId}`);
    await until(`document.querySelector(".row[data-seq]:not([hidden])")?.dataset.seq === "1"`, 40_000);
    await until(`document.querySelector(".facet[aria-pressed=true] .count")?.textContent === "${thousands(BIG)}"`);
    await until(`document.querySelector(".grid-scroll").getAttribute("aria-rowcount") === "${BIG + 1}"`);
    await page.evaluate(() => {
      const g = document.querySelector(".grid-scroll");
      g.scrollTop = g.scrollHeight;
    });
    await until(`!!document.querySelector(".row[data-seq='${BIG}']:not([hidden])")`, 90_000 * Math.max(1, BIG / 100_000));
    const inside = await page.evaluate((n) => {
      const g = document.querySelector(".grid-scroll").getBoundingClientRect();
      const r = document.querySelector(`.row[data-seq='${n}']`).getBoundingClientRect();
      return r.top >= g.top && r.bottom <= g.bottom + 1;
    }, BIG);
    assert.ok(inside, "the last row is inside the scroller");
  });

  await step("10b a jump deep into the grid: one request, the rows of that position", async () => {
    await page.evaluate(() => performance.clearResourceTimings());
    // Where a dragged scrollbar lets go: 37% of the way down.
    await page.evaluate(() => {
      const g = document.querySelector(".grid-scroll");
      g.scrollTop = (g.scrollHeight - g.clientHeight) * 0.37;
    });
    // Wait for the rows of the new position: until the grid has drawn it,
    // the rows of the bottom (the step before) are still on screen.
    const want = Math.round((BIG - 1) * 0.37);
    await until(`(() => { const rs = [...document.querySelectorAll(".grid-scroll .row:not([hidden])")];
      return rs.length > 5 && Math.abs(Number(rs[0].dataset.index) - ${want}) < 40 && rs.every((r) => r.dataset.seq) })()`, 40_000);
    const shown = await page.evaluate(() =>
      [...document.querySelectorAll(".grid-scroll .row:not([hidden])")].map((r) => ({ index: Number(r.dataset.index), seq: Number(r.dataset.seq), aria: Number(r.getAttribute("aria-rowindex")) })),
    );
    // The big job's rows were ingested in order and are all PENDING: row
    // index i (0-based) is the item of seq i+1, and aria-rowindex counts
    // the header row.
    assert.ok(Math.abs(shown[0].index - want) < 40, `the first row on screen is near row ${want}: ${shown[0].index}`);
    for (const r of shown) {
      assert.equal(r.seq, r.index + 1, `row ${r.index} shows seq ${r.seq}`);
      assert.equal(r.aria, r.index + 2);
    }
    const reqs = await page.evaluate(() => performance.getEntriesByType("resource").filter((e) => e.name.includes("/items?")).map((e) => e.name));
    assert.ok(reqs.length <= 4, `a jump is a request or two by position, not a walk: ${reqs.length} requests`);
    assert.ok(reqs.every((u) => /[?&]at=\d+/.test(u)), `pages by position: ${reqs.join(" ")}`);
  });

  await step("11 the keyboard: Home goes back to row 1", async () => {
    await page.locator(".grid-scroll").focus();
    await page.keyboard.press("Home");
    await until(`document.querySelector(".row[data-seq]:not([hidden])")?.dataset.seq === "1"`, 40_000);
  });

  await step("12 the grid filtered to PENDING, then to nothing", async () => {
    await page.locator(".facet[data-status=PENDING]").click();
    await until(`location.search === "?statuses=PENDING" && document.querySelector(".row[data-seq]:not([hidden])")?.dataset.status === "PENDING"`);
    await page.locator(".facet[data-status=DONE]").click();
    await page.locator(".facet[data-status=PENDING]").click();
    await until(`location.search === "?statuses=DONE" && document.querySelectorAll(".row[data-seq]:not([hidden])").length === 0`);
  });

  await step("13 Pending across jobs links each row to its job", async () => {
    await page.locator(`nav a[href="/pending"]`).click();
    await until(`document.querySelectorAll("table.pending tbody tr").length === 200`, 40_000);
    await until(`document.querySelector("table.pending tbody a").getAttribute("href") === "/jobs/${srv.bigId}"`);
  });

  await step("14 a pipeline's validation error is shown at its line", async () => {
    await page.locator(`nav a[href="/pipelines"]`).click();
    await page.locator(`.plist a[href="/pipelines/new"]`).click();
    await page.locator("#pipeline-name").fill("broken");
    await page.locator("#pipeline-text").fill("name: broken\nstages:\n  - processor: noop\n  - processor: nope\n");
    await page.getByRole("button", { name: "Save", exact: true }).click();
    await until(`(document.querySelector("#pipeline-error")?.textContent ?? "").includes("stages[1]") && document.querySelector("#pipeline-error").textContent.includes("(line 4)")`);
    await until(`document.querySelector(".gutter .bad")?.textContent.trim() === "4"`);
  });

  await step("15 Health draws its charts from the server's series", async () => {
    await page.locator(`nav a[href="/health"]`).click();
    await until(`document.querySelectorAll("svg.chart").length === 8`);
    await until(`document.querySelectorAll("svg.chart polyline").length >= 3`);
  });

  await step("16 Sources shows where each source looks and its last error", async () => {
    await page.locator(`nav a[href="/sources"]`).click();
    await until(`(document.querySelector("table.sources tr[data-source=inbox]")?.textContent ?? "").includes("folder not found")`);
    const text = (name) => `(document.querySelector("table.sources tr[data-source=${name}]")?.textContent ?? "")`;
    await until(`${text("partner")}.includes("ftp://sluice@127.0.0.1:2121/out") && ${text("partner")}.includes("connection refused")`);
    await until(`${text("drops")}.includes("s3://drops/in/ at http://127.0.0.1:7070")`);
  });

  await step("16b Triggers show the next fire time in the trigger's own zone", async () => {
    await page.locator(`nav a[href="/triggers"]`).click();
    await until(`/ 02:30:00 E[SD]T$/.test(document.querySelector("table.triggers tr[data-trigger=nightly] .next-fire")?.textContent ?? "")`);
  });

  await step("16b2 an admin disables and enables a trigger with its toggle", async () => {
    const cell = `(document.querySelector("table.triggers tr[data-trigger=nightly] .next-fire")?.textContent ?? "")`;
    const toggle = page.getByRole("checkbox", { name: "Trigger nightly enabled" });
    await toggle.uncheck();
    await until(`${cell} === "disabled" && document.querySelector("table.triggers tr[data-trigger=nightly] input.enabled")?.checked === false`);
    await toggle.check();
    await until(`/ 02:30:00 E[SD]T$/.test(${cell}) && document.querySelector("table.triggers tr[data-trigger=nightly] input.enabled")?.checked === true`);
  });

  await step("16c Workers flag a worker whose heartbeat stopped", async () => {
    await page.locator(`nav a[href="/workers"]`).click();
    await until(`(document.querySelector('table.workers tr[data-worker="old:1:gone"]')?.textContent ?? "").includes("STALE")`);
  });

  await step("17 the theme toggle goes auto, light, dark", async () => {
    await page.locator(`nav a[href="/"]`).click();
    await until(`!!document.querySelector("table.jobs tr[data-job]")`);
    const toggle = page.getByRole("button", { name: /^Colour theme/ });
    await toggle.click();
    await toggle.click();
    await until(`document.documentElement.dataset.theme === "dark" && getComputedStyle(document.body).backgroundColor === "rgb(21, 24, 28)"`);
  });
});
