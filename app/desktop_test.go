package app

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/app/api"
	"github.com/sluicehq/sluice/engine"
)

// desktopSetup is a Desktop on a fresh data directory, wired as the
// window wires it but with recording Funcs in place of Wails' runtime.
type desktopSetup struct {
	d      *Desktop
	env    *Env
	mu     sync.Mutex
	events []any
	notes  []string
}

func newDesktopSetup(t *testing.T) *desktopSetup {
	t.Helper()
	g := &globals{data: t.TempDir(), sync: "NORMAL", logFormat: "text", stdout: io.Discard, stderr: io.Discard}
	env, err := g.open(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { env.Close() })
	p, err := startParts(t.Context(), env, &serveFlags{maxUploadMB: 16, noWorkers: true}, nil)
	require.NoError(t, err)
	t.Cleanup(p.stop)
	u, err := api.DesktopUser(t.Context(), env.Store)
	require.NoError(t, err)
	s := &desktopSetup{env: env}
	s.d = &Desktop{local: p.srv.LocalHandler(u), env: env, ing: p.ing, log: env.Log}
	s.d.EmitFunc = func(name string, data any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.events = append(s.events, name, data)
	}
	s.d.NotifyFunc = func(title, body string) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.notes = append(s.notes, title+" | "+body)
		return nil
	}
	return s
}

func writeFile(t *testing.T, path, body string) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

// TestDesktopDropMakesJobs: files dropped on the window become jobs as
// `sluice ingest` makes them (a CSV a job, the images one job), the window
// hears of each, and a file that cannot be read is reported by name
// without stopping the others.
func TestDesktopDropMakesJobs(t *testing.T) {
	t.Parallel()
	s := newDesktopSetup(t)
	dir := t.TempDir()
	csv := writeFile(t, filepath.Join(dir, "a.csv"), "sku,name\nA,1\nB,2\nC,3\n")
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 8, 6))))
	img := writeFile(t, filepath.Join(dir, "p.png"), b.String())

	outs := s.d.dropped(t.Context(), []string{csv, img})
	require.Len(t, outs, 2)
	require.Empty(t, outs[0].Error)
	require.Equal(t, int64(3), outs[0].Items)
	j, err := s.env.Store.GetJob(t.Context(), outs[0].JobID)
	require.NoError(t, err)
	require.Equal(t, "a.csv", j.Name)
	require.Equal(t, engine.DefaultPipeline, j.Pipeline)
	require.Empty(t, outs[1].Error)
	ij, err := s.env.Store.GetJob(t.Context(), outs[1].JobID)
	require.NoError(t, err)
	require.Equal(t, ImagePipeline, ij.Pipeline)
	require.Equal(t, int64(1), ij.TotalItems)
	require.Equal(t, []any{droppedEvent, outs}, s.events)

	bad := s.d.dropped(t.Context(), []string{filepath.Join(dir, "gone.csv")})
	require.Len(t, bad, 1)
	require.Zero(t, bad[0].JobID)
	require.Contains(t, bad[0].Error, "gone.csv")
	notCSV := s.d.dropped(t.Context(), []string{writeFile(t, filepath.Join(dir, "b.csv"), "a,\"b\n")})
	require.Len(t, notCSV, 1)
	require.NotEmpty(t, notCSV[0].Error, "a broken CSV is reported")
}

// TestDesktopSaveExport: the Save dialog's answer receives exactly the
// export the browser would download; cancelling writes nothing; an error of
// the API is the error, and leaves no file behind.
func TestDesktopSaveExport(t *testing.T) {
	t.Parallel()
	s := newDesktopSetup(t)
	outs := s.d.dropped(t.Context(), []string{writeFile(t, filepath.Join(t.TempDir(), "a.csv"), "sku,name\nA,1\nB,2\n")})
	require.Empty(t, outs[0].Error)
	dir := t.TempDir()
	target := filepath.Join(dir, "out.csv")
	var asked []string
	s.d.SaveDialogFunc = func(suggested, ext string) (string, error) {
		asked = append(asked, suggested+" "+ext)
		return target, nil
	}
	link := "/api/jobs/" + itoa(outs[0].JobID) + "/export?format=csv&statuses=PENDING"
	got, err := s.d.SaveExport(link)
	require.NoError(t, err)
	require.Equal(t, target, got)
	require.Equal(t, []string{"job-" + itoa(outs[0].JobID) + ".csv csv"}, asked)
	b, err := os.ReadFile(target)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(b), "\r\n", "\n")), "\n")
	require.Len(t, lines, 3, string(b))
	require.True(t, strings.HasPrefix(lines[0], "Seq,Status"), lines[0])
	require.True(t, strings.HasPrefix(lines[1], "1,PENDING"), lines[1])
	require.True(t, strings.HasPrefix(lines[2], "2,PENDING"), lines[2])

	// Cancelled: nothing written, no error.
	s.d.SaveDialogFunc = func(string, string) (string, error) { return "", nil }
	got, err = s.d.SaveExport(link)
	require.NoError(t, err)
	require.Empty(t, got)

	// The API's refusal is the error; no file, no leftover part file.
	missing := filepath.Join(dir, "missing.csv")
	s.d.SaveDialogFunc = func(string, string) (string, error) { return missing, nil }
	_, err = s.d.SaveExport("/api/jobs/999/export?format=csv")
	require.ErrorContains(t, err, "999")
	_, err = s.d.SaveExport("/api/jobs/1/export?format=pdf")
	require.ErrorContains(t, err, "pdf")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "only out.csv")

	// Only the export link of a job.
	for _, bad := range []string{"/api/users", "http://example.com/api/jobs/1/export", "/api/jobs/1/export/../../users"} {
		_, err = s.d.SaveExport(bad)
		require.ErrorContains(t, err, "not an export link", bad)
	}
}

// TestDesktopNotifiesFinishedJobs: a finished job is announced with its
// counts.
func TestDesktopNotifiesFinishedJobs(t *testing.T) {
	t.Parallel()
	s := newDesktopSetup(t)
	outs := s.d.dropped(t.Context(), []string{writeFile(t, filepath.Join(t.TempDir(), "n.csv"), "sku\nA\nB\n")})
	id := outs[0].JobID
	r, err := s.env.Runner(2, true, func(jid int64) { s.d.jobFinished(context.Background(), jid) })
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = r.Run(ctx)
	require.NoError(t, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Equal(t, []string{"Job " + itoa(id) + " done | n.csv: 2 of 2 items done"}, s.notes)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
