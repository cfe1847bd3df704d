// Package e2e drives the embedded UI in a real browser (Chromium, through
// the DevTools protocol with chromedp) against a real server: the API of
// app/api on SQLite in a temporary directory, with workers, serving the
// frontend exactly as `sluice --serve` does.
//
// The test needs a Chromium binary: SLUICE_CHROMIUM, or chromium,
// chromium-browser, google-chrome on PATH (Debian: apt-get install
// chromium). Without one it is skipped, saying so. SLUICE_E2E_SHOTS=DIR
// saves a screenshot of each step there.
package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/sluicehq/sluice/app/api"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/frontend"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// bigRows is the size of the job scrolled to its end: 100,000, or
// SLUICE_E2E_BIG_ROWS (e.g. 1000000 to measure by hand).
func bigRows() int {
	if v, err := strconv.Atoi(os.Getenv("SLUICE_E2E_BIG_ROWS")); err == nil && v > 0 {
		return v
	}
	return 100_000
}

// thousands writes n as the page does (en-US grouping).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func chromium(t *testing.T) string {
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no Chromium binary found (set SLUICE_CHROMIUM or install Debian's chromium package): the browser test cannot run"
	if os.Getenv("SLUICE_CI") != "" {
		t.Fatal(msg) // CI installs Chromium: a skip there would hide a missing step
	}
	t.Skip(msg)
	return ""
}

// server is a real Sluice server with the embedded UI.
type server struct {
	url   string
	st    *sqlite.Store
	user  *engine.User
	bigID int64
}

func startServer(t *testing.T) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	data := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(data, "sluice.db"), sqlite.Options{Synchronous: "NORMAL"})
	must(t, err)
	t.Cleanup(func() { st.Close() })
	notif := engine.NewNotifier()
	reg := engine.NewRegistry()
	ing, err := engine.NewIngester(engine.IngesterConfig{Store: st, Notifier: notif})
	must(t, err)
	u, _, err := api.CreateUser(ctx, st, "alice", true, "alice-password-1", time.Now())
	must(t, err)

	// The big job is stored before any worker runs and paused, so its rows
	// stay PENDING in the order they were stored: the last row is the last seq.
	res, err := ing.IngestCSV(ctx, engine.IngestRequest{UserID: u.ID, Name: "big.csv", Source: "upload", Input: bigCSV(bigRows())})
	must(t, err)
	_, err = st.SetJobState(ctx, &engine.SetJobStateParams{JobID: res.Job.ID, From: []engine.JobState{engine.JobQueued}, To: engine.JobPaused, Now: time.Now()})
	must(t, err)

	runner, err := engine.NewRunner(engine.RunnerConfig{Store: st, Registry: reg, Notifier: notif, Concurrency: 4})
	must(t, err)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_, _ = runner.Run(ctx)
	}()
	srv, err := api.New(api.Config{
		Store: st, Ingester: ing, Runner: runner, Notifier: notif, Registry: reg, DataDir: data, PendingView: true,
		PoolStats: func() map[string]sql.DBStats { return st.PoolStats() },
		NewRunner: func(c engine.RunnerConfig) (*engine.Runner, error) {
			c.Store, c.Registry, c.Notifier = st, reg, notif
			return engine.NewRunner(c)
		},
		UI: frontend.Handler(),
	})
	must(t, err)
	srv.Start(ctx)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		ts.Close()
		cancel()
		<-runDone
	})
	return &server{url: ts.URL, st: st, user: u, bigID: res.Job.ID}
}

func bigCSV(n int) io.Reader {
	var b strings.Builder
	b.WriteString("sku,name,price\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "S-%06d,Item %d,%d.%02d\n", i, i, i%97, i%100)
	}
	return strings.NewReader(b.String())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// act is a browser step that returns nothing.
type act = chromedp.Action[chromedp.Void]

// browser starts a headless Chromium; it never downloads anything.
func browser(t *testing.T, exe string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		acancel()
	})
	// The first call starts the browser; it lives as long as ctx.
	must(t, chromedp.Do(ctx))
	tctx, tcancel := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(tcancel)
	return tctx
}

// step runs actions, failing the test with the step's name.
func step(t *testing.T, ctx context.Context, name string, actions ...act) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		shot(t, ctx, "failed-"+name)
		body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
		if len(body) > 1500 {
			body = body[:1500]
		}
		t.Fatalf("%s: %v\npage text: %s", name, err, body)
	}
	shot(t, ctx, name)
}

func shot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("SLUICE_E2E_SHOTS")
	if dir == "" || ctx.Err() != nil {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	_ = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
}

// waitJS evaluates a JavaScript expression every 50 ms until it is true.
// Errors count as false (a page being replaced cannot answer), the last
// one is reported if time runs out.
func waitJS(expr string) act {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		var last error
		for {
			ok, err := chromedp.Evaluate[bool](expr)(ctx, tg)
			if err == nil && ok {
				return nil
			}
			if err != nil && ctx.Err() == nil {
				last = err
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w (last error: %v)", expr, ctx.Err(), last)
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
}

// within bounds a step's time.
func within(d time.Duration, a act) act {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		c, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_, err := a(c, tg)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("not within %v: %w", d, err)
		}
		return err
	})
}

func TestUI(t *testing.T) {
	exe := chromium(t)
	s := startServer(t)
	ctx := browser(t, exe)

	// A one-time sign-in link (what `sluice --serve` prints) lands on the
	// jobs page, signed in.
	link, err := api.CreateSignInLink(context.Background(), s.st, s.user.ID, s.url, time.Now())
	must(t, err)
	step(t, ctx, "01-signin-link",
		chromedp.Navigate(link),
		within(40*time.Second, waitJS(`location.pathname === "/" && !!document.querySelector("table.jobs tr[data-job]")`)),
		waitJS(`document.querySelector(".who").textContent === "alice"`),
	)

	// Signing out leads to the login page; the password signs in again.
	step(t, ctx, "02-login",
		chromedp.Click(chromedp.Search(`//button[text()="Sign out"]`)),
		chromedp.WaitVisible(chromedp.CSS("#login-name")),
		chromedp.SendKeys(chromedp.CSS("#login-name"), "alice"),
		chromedp.SendKeys(chromedp.CSS("#login-password"), "wrong-password"),
		chromedp.Click(chromedp.CSS("form.login button[type=submit]")),
		within(30*time.Second, waitJS(`(document.querySelector(".login .notice.error")?.textContent ?? "").includes("wrong name or password")`)),
		waitJS(`(document.querySelector("#login-password").value = "") === ""`),
		chromedp.SendKeys(chromedp.CSS("#login-password"), "alice-password-1"),
		chromedp.Click(chromedp.CSS("form.login button[type=submit]")),
		within(30*time.Second, waitJS(`!!document.querySelector("table.jobs tr[data-job]")`)),
	)

	// A CSV uploaded through the page's file picker becomes a job.
	csv := filepath.Join(t.TempDir(), "products.csv")
	must(t, os.WriteFile(csv, []byte("sku,name,price\nA-1,Bottle,12.90\nA-2,Cup,3.50\nA-3,Bad row\nA-4,Pan,29.00\nA-5,Lid,4.25\n"), 0o644))
	step(t, ctx, "03-upload",
		chromedp.SetUploadFiles(chromedp.CSS("#new-files"), []string{csv}),
		within(40*time.Second, waitJS(`!!document.querySelector(".uploads a[href^='/jobs/']")`)),
	)
	step(t, ctx, "03b-open-job", chromedp.Click(chromedp.CSS(".uploads a[href^='/jobs/']")))

	// The grid fills and the job finishes (live, through the event stream):
	// four rows DONE, the short one SKIPPED.
	step(t, ctx, "04-grid",
		within(30*time.Second, waitJS(`document.querySelector(".jobmeta .chip")?.textContent === "done"`)),
		within(30*time.Second, waitJS(`document.querySelectorAll(".row[data-seq]:not([hidden])").length === 5`)),
		within(30*time.Second, waitJS(`document.querySelectorAll(".row[data-status=DONE]:not([hidden])").length === 4`)),
		waitJS(`document.querySelector(".facet[data-status=SKIPPED] .count").textContent === "1"`),
		waitJS(`document.querySelector(".facet[data-status=DONE] .count").textContent === "4"`),
		within(30*time.Second, waitJS(`[...document.querySelectorAll(".grid-head .cell")].map(c => c.textContent).join() === ",Seq,Status,Attempts,Error,sku,name,price"`)),
	)

	// The SKIPPED facet filters the grid, the address and the exports.
	step(t, ctx, "05-facet",
		chromedp.Click(chromedp.CSS(".facet[data-status=SKIPPED]")),
		within(30*time.Second, waitJS(`document.querySelectorAll(".row[data-seq]:not([hidden])").length === 1 && document.querySelector(".row[data-seq]:not([hidden])").dataset.status === "SKIPPED"`)),
		waitJS(`location.search === "?statuses=SKIPPED"`),
	)
	csvOut, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(document.querySelector("button[aria-label^='Export the grid'][data-href*='format=csv']").dataset.href).then(r => r.text())`,
		chromedp.EvalAwaitPromise))
	must(t, err)
	step(t, ctx, "05b-export-button",
		chromedp.Click(chromedp.CSS("button[aria-label^='Export the grid'][data-href*='format=csv']")),
		within(30*time.Second, waitJS(`document.querySelector("button[data-href*='format=csv']").textContent === "Export CSV"`)),
		waitJS(`!document.querySelector(".notice.error:not([hidden])")`),
	)
	if lines := strings.Split(strings.TrimSpace(csvOut), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "3,SKIPPED") {
		t.Errorf("the CSV export of the SKIPPED filter is not the grid's one row:\n%s", csvOut)
	}

	// The item drawer shows the full input, the result and the attempts.
	step(t, ctx, "06-drawer",
		chromedp.Click(chromedp.CSS(".row[data-status=SKIPPED] .cell:nth-child(3)")),
		chromedp.WaitVisible(chromedp.CSS(".drawer")),
		within(30*time.Second, waitJS(`document.querySelector(".drawer").textContent.includes("Attempt history")`)),
		waitJS(`document.querySelector(".drawer").textContent.includes("Bad row")`),
		waitJS(`document.querySelector("#drawer-title").textContent.startsWith("Row 3")`),
	)
	step(t, ctx, "06b-drawer-closed",
		chromedp.KeyEvent(kb.Escape),
		waitJS(`document.querySelector(".drawer").hidden`),
	)

	// Selecting the row and reprocessing it puts it back in the queue; the
	// workers run it again and the facets follow, live.
	step(t, ctx, "06c-reprocess",
		chromedp.Click(chromedp.CSS(".row[data-status=SKIPPED] .cell.sel input")),
		waitJS(`document.querySelector(".selinfo").textContent === "1 selected"`),
		chromedp.Click(chromedp.Search(`//button[text()="Reprocess selected"]`)),
		within(30*time.Second, waitJS(`(document.querySelector(".notice.info")?.textContent ?? "") === "1 item back in the queue."`)),
		within(30*time.Second, waitJS(`document.querySelector(".facet[data-status=SKIPPED] .count").textContent === "0" && document.querySelector(".jobmeta .chip")?.textContent === "done"`)),
		within(30*time.Second, waitJS(`document.querySelectorAll(".row[data-seq]:not([hidden])").length === 0`)),
	)

	// A 100,000-row job: the first rows come at once, and scrolling to the
	// bottom of the grid shows the last row.
	n := bigRows()
	step(t, ctx, "07-big-top",
		chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", s.url, s.bigID)),
		within(40*time.Second, waitJS(`document.querySelector(".row[data-seq]:not([hidden])")?.dataset.seq === "1"`)),
		waitJS(`document.querySelector(".facet[aria-pressed=true] .count")?.textContent === "`+thousands(n)+`"`),
		waitJS(`document.querySelector(".grid-scroll").getAttribute("aria-rowcount") === "`+strconv.Itoa(n+1)+`"`),
	)
	start := time.Now()
	step(t, ctx, "08-big-bottom",
		waitJS(`(() => { const g = document.querySelector(".grid-scroll"); g.scrollTop = g.scrollHeight; return true })()`),
		within(90*time.Second*time.Duration(max(1, n/100_000)), waitJS(`!!document.querySelector(".row[data-seq='`+strconv.Itoa(n)+`']:not([hidden])")`)),
		// The last row is on screen, inside the scroller.
		waitJS(`(() => { const g = document.querySelector(".grid-scroll").getBoundingClientRect();
			const r = document.querySelector(".row[data-seq='`+strconv.Itoa(n)+`']").getBoundingClientRect();
			return r.top >= g.top && r.bottom <= g.bottom + 1 })()`),
	)
	t.Logf("scrolled to row %s in %v", thousands(n), time.Since(start).Round(time.Millisecond))

	// The keyboard: Home goes back to the first row.
	step(t, ctx, "09-big-home",
		chromedp.Focus(chromedp.CSS(".grid-scroll")),
		chromedp.KeyEvent(kb.Home),
		within(40*time.Second, waitJS(`document.querySelector(".row[data-seq]:not([hidden])")?.dataset.seq === "1"`)),
	)

	// Pending across jobs: the big job's rows, each with a way to its job.
	step(t, ctx, "10-pending",
		chromedp.Click(chromedp.CSS(`nav a[href="/pending"]`)),
		within(40*time.Second, waitJS(`document.querySelectorAll("table.pending tbody tr").length === 200`)),
		waitJS(`document.querySelector("table.pending tbody a").getAttribute("href") === "/jobs/`+fmt.Sprint(s.bigID)+`"`),
	)

	// Pipelines: a validation error is shown at its field's line.
	step(t, ctx, "11-pipeline-error",
		chromedp.Click(chromedp.CSS(`nav a[href="/pipelines"]`)),
		within(30*time.Second, waitJS(`!!document.querySelector('.plist a[href="/pipelines/new"]')`)),
		chromedp.Click(chromedp.CSS(`.plist a[href="/pipelines/new"]`)),
		chromedp.WaitVisible(chromedp.CSS("#pipeline-text")),
		waitJS(`(document.querySelector("#pipeline-name").value = "broken") === "broken"`),
		waitJS(`(document.querySelector("#pipeline-text").value = "name: broken\nstages:\n  - processor: noop\n  - processor: nope\n") !== ""`),
		chromedp.Click(chromedp.Search(`//button[text()="Save"]`)),
		within(30*time.Second, waitJS(`(document.querySelector("#pipeline-error")?.textContent ?? "").includes("stages[1]") &&
			document.querySelector("#pipeline-error").textContent.includes("(line 4)")`)),
		waitJS(`document.querySelector(".gutter .bad")?.textContent.trim() === "4"`),
	)

	// Health draws its charts from /api/stats.
	step(t, ctx, "12-health",
		chromedp.Click(chromedp.CSS(`nav a[href="/health"]`)),
		within(30*time.Second, waitJS(`document.querySelectorAll("svg.chart").length === 7`)),
		within(30*time.Second, waitJS(`document.querySelectorAll("svg.chart polyline").length >= 3`)),
	)

	// Sources lists the watched folders with their last error.
	_, err = s.st.CreateSource(context.Background(), &engine.SourceRecord{Name: "inbox", Kind: engine.SourceFolder,
		Config: json.RawMessage(`{"path":"/srv/inbox"}`), Pipeline: engine.DefaultPipeline, After: "move",
		Poll: time.Minute, Enabled: true}, time.Now())
	must(t, err)
	must(t, s.st.RecordSourcePoll(context.Background(), "inbox", "folder not found", time.Now()))
	// An FTP and an S3 source: where they look, and a server's error.
	for _, r := range []*engine.SourceRecord{
		{Name: "partner", Kind: engine.SourceFTP, Config: json.RawMessage(`{"url":"ftp://sluice@127.0.0.1:2121/out","password":{"env":"FTP_PASS"}}`)},
		{Name: "drops", Kind: engine.SourceS3, Config: json.RawMessage(`{"bucket":"drops","prefix":"in/","endpoint":"http://127.0.0.1:7070"}`)},
	} {
		r.Pipeline, r.After, r.Poll, r.Enabled = engine.DefaultPipeline, "move", time.Minute, true
		_, err = s.st.CreateSource(context.Background(), r, time.Now())
		must(t, err)
	}
	must(t, s.st.RecordSourcePoll(context.Background(), "partner", "connect to 127.0.0.1:2121: connection refused", time.Now()))
	step(t, ctx, "12b-sources",
		chromedp.Click(chromedp.CSS(`nav a[href="/sources"]`)),
		within(30*time.Second, waitJS(`(document.querySelector("table.sources tr[data-source=inbox]")?.textContent ?? "").includes("folder not found")`)),
		waitJS(`(document.querySelector("table.sources tr[data-source=partner]")?.textContent ?? "").includes("ftp://sluice@127.0.0.1:2121/out")`),
		waitJS(`(document.querySelector("table.sources tr[data-source=partner]")?.textContent ?? "").includes("connection refused")`),
		waitJS(`(document.querySelector("table.sources tr[data-source=drops]")?.textContent ?? "").includes("s3://drops/in/ at http://127.0.0.1:7070")`),
	)

	// The theme toggle: auto, light, dark.
	step(t, ctx, "13-dark",
		chromedp.Click(chromedp.CSS(`nav a[href="/"]`)),
		within(30*time.Second, waitJS(`!!document.querySelector("table.jobs tr[data-job]")`)),
		chromedp.Click(chromedp.Search(`//button[starts-with(text(), "Theme")]`)),
		chromedp.Click(chromedp.Search(`//button[starts-with(text(), "Theme")]`)),
		waitJS(`document.documentElement.dataset.theme === "dark" && getComputedStyle(document.body).backgroundColor === "rgb(21, 24, 28)"`),
	)
}
