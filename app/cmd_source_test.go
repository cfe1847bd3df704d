package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/app"
)

type sourceJSON struct {
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Pipeline  string `json:"pipeline"`
	After     string `json:"after"`
	Ingested  int64  `json:"ingested"`
	Failed    int64  `json:"failed"`
	LastError string `json:"lastError"`
	Config    struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	} `json:"config"`
}

func (c *cli) sources() map[string]sourceJSON {
	c.t.Helper()
	var list []sourceJSON
	out := c.ok("sources", "--json")
	require.NoError(c.t, json.Unmarshal([]byte(out), &list), out)
	m := map[string]sourceJSON{}
	for _, s := range list {
		m[s.Name] = s
	}
	return m
}

func TestSourceCommands(t *testing.T) {
	c := newCLI(t)
	inbox := filepath.Join(t.TempDir(), "in box")
	require.NoError(t, os.Mkdir(inbox, 0o755))

	for _, bad := range [][]string{
		{"source", "add", "ftp", "x", "--path", inbox, "--pipeline", "noop"},
		{"source", "add", "folder", "x", "--pipeline", "noop"},
		{"source", "add", "folder", "x", "--path", filepath.Join(inbox, "nope"), "--pipeline", "noop"},
		{"source", "add", "folder", "x", "--path", inbox, "--pipeline", "nope"},
		{"source", "add", "folder", "x", "--path", inbox, "--pipeline", "noop", "--after", "burn"},
		{"source", "add", "folder", "x", "--path", inbox, "--pipeline", "noop", "--ignore", "[x"},
	} {
		code, _, errs := c.run(bad...)
		require.Equal(t, app.ExitUsage, code, "%v: %s", bad, errs)
	}
	require.Empty(t, c.sources())
	require.Contains(t, c.ok("sources"), "no sources")

	c.ok("source", "add", "folder", "inbox", "--path", inbox, "--pipeline", "noop", "--min-age", "50ms", "--recursive")
	code, _, errs := c.run("source", "add", "folder", "inbox", "--path", inbox, "--pipeline", "noop")
	require.Equal(t, app.ExitFailure, code, "a taken name")
	require.Contains(t, errs, "already exists")
	s := c.sources()["inbox"]
	require.Equal(t, "folder", s.Kind)
	require.Equal(t, inbox, s.Config.Path)
	require.True(t, s.Config.Recursive)
	require.Equal(t, "move", s.After)
	require.Contains(t, c.ok("sources"), "inbox")

	require.NoError(t, os.WriteFile(filepath.Join(inbox, "a.csv"), []byte("sku\nA1\nA2\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(inbox, "a.csv.part"), []byte("sku\nA1\n"), 0o644))
	old := time.Now().Add(-time.Minute)
	require.NoError(t, os.Chtimes(filepath.Join(inbox, "a.csv"), old, old))
	require.Contains(t, c.ok("source", "scan", "inbox"), "1 files seen, 1 ingested, 0 failed")
	require.FileExists(t, filepath.Join(inbox, "done", "a.csv"))
	require.FileExists(t, filepath.Join(inbox, "a.csv.part"))
	require.Contains(t, c.ok("source", "scan", "inbox"), "0 files seen, 0 ingested")
	require.EqualValues(t, 1, c.sources()["inbox"].Ingested)
	require.Contains(t, c.ok("jobs"), "a.csv")

	c.ok("source", "rm", "inbox")
	require.Empty(t, c.sources())
	code, _, _ = c.run("source", "rm", "inbox")
	require.Equal(t, app.ExitFailure, code)
	code, _, _ = c.run("source", "scan", "inbox")
	require.Equal(t, app.ExitFailure, code)
}

// TestWorkerRunsSources: a running `sluice worker` watches the folders,
// including one added while it runs.
func TestWorkerRunsSources(t *testing.T) {
	c := newCLI(t)
	inbox := filepath.Join(t.TempDir(), "inbox")
	require.NoError(t, os.Mkdir(inbox, 0o755))
	c.ok("source", "add", "folder", "inbox", "--path", inbox, "--pipeline", "noop", "--min-age", "50ms", "--after", "delete")

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- app.Main(ctx, []string{"--data", c.data, "--log-level", "error", "worker"}, &out, &errb)
	}()
	defer func() {
		cancel()
		require.Equal(t, 0, <-done, errb.String())
	}()
	require.NoError(t, os.WriteFile(filepath.Join(inbox, "x y.csv"), []byte("sku\nA1\n"), 0o644))
	require.Eventually(t, func() bool { return c.sources()["inbox"].Ingested == 1 }, 60*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(inbox, "x y.csv")); return os.IsNotExist(err) },
		60*time.Second, 50*time.Millisecond, "deleted after ingest")
	require.Eventually(t, func() bool { return strings.Contains(c.ok("jobs"), "DONE") }, 60*time.Second, 50*time.Millisecond,
		"the worker also processes the job")
}

func TestSourceAddFTPAndS3(t *testing.T) {
	c := newCLI(t)
	pw := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(pw, []byte("hunter2\n"), 0o644))
	for _, bad := range [][]string{
		{"source", "add", "gopher", "x", "--pipeline", "noop"},
		{"source", "add", "ftp", "x", "--pipeline", "noop"},
		{"source", "add", "ftp", "x", "--url", "ftp://u:hunter2@h/in", "--pipeline", "noop"},
		{"source", "add", "ftp", "x", "--url", "ftp://u@h/in", "--password-file", pw, "--pipeline", "noop"},
		{"source", "add", "ftp", "x", "--url", "ftp://u@h/in", "--password-env", "A", "--password-file", pw, "--pipeline", "noop"},
		{"source", "add", "ftp", "x", "--url", "ftp://u@h/in", "--pipeline", "noop", "--poll", "10ms"},
		{"source", "add", "s3", "x", "--pipeline", "noop"},
		{"source", "add", "s3", "x", "--bucket", "b", "--access-key-env", "A", "--pipeline", "noop"},
		{"source", "add", "s3", "x", "--bucket", "b", "--endpoint", "127.0.0.1:7070", "--pipeline", "noop"},
	} {
		code, _, errs := c.run(bad...)
		require.Equal(t, app.ExitUsage, code, "%v: %s", bad, errs)
		require.NotContains(t, errs, "hunter2", "an error never repeats a password")
	}
	require.NoError(t, os.Chmod(pw, 0o600))
	c.ok("source", "add", "ftp", "partner", "--url", "ftp://sluice@127.0.0.1:2121/out", "--password-file", pw, "--pipeline", "noop",
		"--after", "leave", "--poll", "1m")
	code, _, errs := c.run("source", "add", "s3", "drops", "--bucket", "in", "--prefix", "orders", "--endpoint", "http://127.0.0.1:7070",
		"--path-style", "--access-key-env", "SLUICE_TEST_UNSET_AK", "--secret-key-env", "SLUICE_TEST_UNSET_SK", "--pipeline", "noop")
	require.Equal(t, 0, code, errs)
	require.Contains(t, errs, "SLUICE_TEST_UNSET_AK is not set here", "a note, not an error")
	list := c.ok("sources")
	require.Contains(t, list, "ftp://sluice@127.0.0.1:2121/out")
	require.Contains(t, list, "s3://in/orders/ at http://127.0.0.1:7070")
	out := c.ok("sources", "--json")
	require.NotContains(t, out, "hunter2")
	require.Contains(t, out, `"file": "`+pw)
	require.Contains(t, out, `"env": "SLUICE_TEST_UNSET_SK"`)
	require.Equal(t, "ftp", c.sources()["partner"].Kind)
	require.Equal(t, "s3", c.sources()["drops"].Kind)
}
