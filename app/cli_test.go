package app_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/app"
	"github.com/stretchr/testify/require"
)

// cli runs the CLI in-process against one data directory.
type cli struct {
	t    *testing.T
	data string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	return &cli{t: t, data: filepath.Join(t.TempDir(), "data")}
}

// run returns exit code, stdout and stderr.
func (c *cli) run(args ...string) (int, string, string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	code := app.Main(context.Background(), append([]string{"--data", c.data, "--log-level", "error"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// ok runs a command that must succeed and returns its stdout.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	code, out, errs := c.run(args...)
	require.Equal(c.t, 0, code, "sluice %s: %s", strings.Join(args, " "), errs)
	return out
}

func (c *cli) file(name, content string) string {
	c.t.Helper()
	p := filepath.Join(c.t.TempDir(), name)
	require.NoError(c.t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

const sampleCSV = "SKU,Product Name,Price\nA1, Kettle ,12.50\nA2,Toaster,20\nA3,broken row\nA4,\"Mug, large\",4\n"

func TestCLIIngestWaitJSONShapes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	path := c.file("products.csv", sampleCSV)

	var ing struct {
		JobID int64 `json:"jobId"`
		Items int64 `json:"items"`
		State string
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("ingest", path, "--wait", "--json")), &ing))
	require.Equal(t, int64(4), ing.Items)
	require.Equal(t, "DONE", ing.State)

	var job struct {
		ID         int64            `json:"id"`
		Pipeline   string           `json:"pipeline"`
		State      string           `json:"state"`
		TotalItems int64            `json:"totalItems"`
		Counts     map[string]int64 `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("job", "1", "--json")), &job))
	require.Equal(t, ing.JobID, job.ID)
	require.Equal(t, "noop", job.Pipeline)
	require.Equal(t, "DONE", job.State)
	require.Equal(t, int64(4), job.TotalItems)
	require.Equal(t, int64(3), job.Counts["DONE"])
	require.Equal(t, int64(1), job.Counts["SKIPPED"])
	require.Contains(t, job.Counts, "NOT_FOUND", "every status is a key")

	var page struct {
		Items []struct {
			ID       int64           `json:"id"`
			Seq      int64           `json:"seq"`
			Status   string          `json:"status"`
			Attempts int             `json:"attempts"`
			Result   json.RawMessage `json:"result"`
		} `json:"items"`
		Next *string `json:"next"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("items", "1", "--status", "DONE", "--limit", "2", "--json")), &page))
	require.Len(t, page.Items, 2)
	require.NotNil(t, page.Next)
	seen := map[int64]bool{}
	for _, it := range page.Items {
		seen[it.Seq] = true
	}
	var page2 struct {
		Items []struct {
			Seq    int64           `json:"seq"`
			Result json.RawMessage `json:"result"`
		} `json:"items"`
		Next *string `json:"next"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("items", "1", "--status", "DONE", "--limit", "2", "--after", *page.Next, "--json")), &page2))
	require.Len(t, page2.Items, 1)
	require.Nil(t, page2.Next)
	require.False(t, seen[page2.Items[0].Seq], "no item twice across pages")
	seen[page2.Items[0].Seq] = true
	require.Equal(t, map[int64]bool{1: true, 2: true, 4: true}, seen, "the DONE items, each once")
	var one struct {
		Item struct {
			Result json.RawMessage `json:"result"`
		} `json:"item"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("item", "4")), &one))
	require.JSONEq(t, `{"sku":"A4","product_name":"Mug, large","price":"4"}`, string(one.Item.Result))

	var jobs struct {
		Jobs []struct {
			ID    int64  `json:"id"`
			State string `json:"state"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("jobs", "--json")), &jobs))
	require.Len(t, jobs.Jobs, 1)
}

func TestCLIExportMatchesResults(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("ingest", c.file("p.csv", sampleCSV), "--wait")
	out := filepath.Join(t.TempDir(), "out.csv")
	c.ok("export", "1", "--format", "csv", "-o", out)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	rows, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	require.NoError(t, err)
	require.Equal(t, []string{"Seq", "Status", "Attempts", "Error", "sku", "product_name", "price"}, rows[0])
	require.Len(t, rows, 5)
	bySeq := map[string][]string{}
	var order []string
	for _, r := range rows[1:] {
		bySeq[r[0]] = r
		order = append(order, r[0])
	}
	require.Equal(t, []string{"1", "DONE", "1", "", "A1", "Kettle", "12.50"}, bySeq["1"])
	require.Equal(t, "SKIPPED", bySeq["3"][1])
	require.Contains(t, bySeq["3"][3], "has 2 fields, header has 3")
	// The rows come in the grid's order: the order of 'sluice items'.
	var page struct {
		Items []struct {
			Seq int64 `json:"seq"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("items", "1", "--json")), &page))
	var listed []string
	for _, it := range page.Items {
		listed = append(listed, strconv.FormatInt(it.Seq, 10))
	}
	require.Equal(t, listed, order)
	// -o - writes the same bytes to stdout.
	require.Equal(t, string(raw), c.ok("export", "1", "-o", "-"))
}

func TestCLIReprocessAndStates(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	pl := c.file("nf.json", `{"name":"nf","stages":[{"processor":"noop","config":{"notFoundEvery":2}}]}`)
	require.Contains(t, c.ok("pipeline", "apply", pl), "pipeline nf: version 1")
	c.ok("ingest", c.file("p.csv", "sku\na\nb\nc\nd\n"), "--pipeline", "nf", "--wait")
	var job struct {
		Counts map[string]int64 `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("job", "1", "--json")), &job))
	require.Equal(t, int64(2), job.Counts["NOT_FOUND"])

	require.Contains(t, c.ok("reprocess", "1"), "2 items back in the queue")
	require.Contains(t, c.ok("pause", "1"), "PAUSED")
	code, _, errs := c.run("pause", "1")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "PAUSED")
	require.Contains(t, c.ok("resume", "1"), "QUEUED")
	c.ok("worker", "--drain")
	require.NoError(t, json.Unmarshal([]byte(c.ok("job", "1", "--json")), &job))
	require.Equal(t, int64(2), job.Counts["NOT_FOUND"], "still not found: noop has no variants")
	require.Contains(t, c.ok("delete", "1"), "deleted")
	code, _, errs = c.run("job", "1")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "not found")
}

func TestCLIExitCodes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"jobs", "--nope"}, 2, "unknown flag"},
		{[]string{"job"}, 2, "expected one job ID"},
		{[]string{"job", "x"}, 2, "not a valid id"},
		{[]string{"items", "1", "--status", "DONEISH"}, 2, "unknown item status"},
		{[]string{"items", "1", "--after", "!!"}, 2, "invalid cursor"},
		{[]string{"ingest"}, 2, "at least one FILE"},
		{[]string{"ingest", "/does/not/exist.csv"}, 1, "no such file"},
		{[]string{"job", "99"}, 1, "job 99 not found"},
		{[]string{"export", "1", "--format", "pdf", "-o", "-"}, 2, "not supported"},
		{[]string{"ingest", c.file("x.csv", "a\n1\n"), "--pipeline", "missing"}, 1, `pipeline "missing" does not exist`},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"--sqlite-sync", "OFF", "jobs"}, 2, "not FULL or NORMAL"},
		{[]string{"--store", "mysql://u:secret@h/db", "jobs"}, 2, "neither sqlite nor a postgres:// URL"},
		{[]string{"ingest", c.file("y.csv", "a\n1\n"), "--encoding", "klingon"}, 2, "unknown encoding"},
		{[]string{"export", "1", "-o", t.TempDir()}, 2, "is a directory"},
	}
	for _, tc := range cases {
		code, _, errs := c.run(tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, errs)
		require.Contains(t, errs, tc.msg, "%v", tc.args)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "%v: one line on stderr: %q", tc.args, errs)
	}
	// Refused before any work: no job was created by the bad calls.
	code, out, _ := c.run("jobs", "--json")
	require.Equal(t, 0, code)
	require.Contains(t, out, `"jobs": []`)
}

// TestCLIBinaryInputFailsJob: a file that is not CSV fails its job with the
// line and the reason; the store stays usable.
func TestCLIBinaryInputFailsJob(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	code, _, errs := c.run("ingest", c.file("img.csv", "a,b\n1,2\n\x00\x01\x02binary"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "line 3")
	var job struct {
		State     string `json:"state"`
		LastError string `json:"lastError"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.ok("job", "1", "--json")), &job))
	require.Equal(t, "FAILED", job.State)
	require.Contains(t, job.LastError, "img.csv: line 3")
	c.ok("ingest", c.file("ok.csv", "a\n1\n"), "--wait")
}

// TestCLIWhileWorkerRuns: commands work while a worker process holds the
// same data directory.
func TestCLIWhileWorkerRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the real binary; not in -short")
	}
	bin := buildBinary(t)
	c := newCLI(t)
	pl := c.file("slow.json", `{"name":"slow","stages":[{"processor":"noop","config":{"delayMs":2}}]}`)
	c.ok("pipeline", "apply", pl)
	worker := sluiceCmd(bin, c.data, nil, "worker", "--concurrency", "4")
	require.NoError(t, worker.Start())
	t.Cleanup(func() { _ = worker.Process.Kill(); _ = worker.Wait() })
	var rows strings.Builder
	rows.WriteString("sku\n")
	for i := 0; i < 2000; i++ {
		rows.WriteString("s\n")
	}
	c.ok("ingest", c.file("a.csv", rows.String()), "--pipeline", "slow")
	for i := 0; i < 20; i++ {
		c.ok("jobs", "--json")
		c.ok("items", "1", "--limit", "50", "--json")
		c.ok("export", "1", "-o", "-")
	}
	c.ok("ingest", c.file("b.csv", "sku\nx\n"), "--wait")
}
