package app

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// serveChild is `sluice --serve` in a child process (so that its memory and
// CPU are its own), with an API token.
type serveChild struct {
	cmd   *exec.Cmd
	base  string
	token string
}

func (b *bench) startServe(ctx context.Context, data string) (*serveChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	out, err := exec.CommandContext(ctx, exe, "--data", data, "--log-level", "error", "user", "add", "bench", "--admin", "--json").Output()
	if err != nil {
		return nil, fmt.Errorf("sluice user add: %w", err)
	}
	var created struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(out, &created); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "--data", data, "--log-level", "error", "--sqlite-sync", b.g.sync,
		"--serve", "--addr", "127.0.0.1:0", "--no-workers")
	cmd.Stderr = b.g.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(stdout)
	c := &serveChild{cmd: cmd, token: created.Token}
	for sc.Scan() {
		if i := strings.Index(sc.Text(), "serving http://"); i >= 0 {
			c.base = strings.Fields(sc.Text()[i+len("serving "):])[0]
			break
		}
	}
	if c.base == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("sluice --serve did not start")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return c, nil
}

// stop ends the server and returns its peak RSS in MB: its own VmHWM,
// read before it exits (a child's ru_maxrss carries this process's
// high-water mark; see runMeasured).
func (c *serveChild) stop() float64 {
	peakKB := vmHWMKB(c.cmd.Process.Pid)
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	_ = c.cmd.Wait()
	return float64(peakKB) / 1024
}

func (c *serveChild) get(ctx context.Context, client *http.Client, path string) error {
	req, err := http.NewRequestWithContext(ctx, "GET", c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return nil
}

// apiPages: GET /api/jobs/{id}/items?pageSize=100 at random depths of the
// ingest benchmark's 1,000,000-item job, 4 clients at once, over HTTP to a
// server in a child process.
func (b *bench) apiPages(ctx context.Context) (benchResult, error) {
	if b.ingestDB == "" {
		return benchResult{}, fmt.Errorf("needs the ingest benchmark's database")
	}
	// Cursors at random depths, taken from the store directly (a cursor is
	// an item's (updated_at, id)).
	s, err := sqlite.Open(ctx, b.ingestDB, sqlite.Options{})
	if err != nil {
		return benchResult{}, err
	}
	var cursors []string
	var cur *engine.Cursor
	for {
		p, err := s.ListItems(ctx, &engine.ListItemsParams{JobID: b.ingestJob, After: cur, Limit: 5000})
		if err != nil {
			s.Close()
			return benchResult{}, err
		}
		if p.Next == nil {
			break
		}
		cursors = append(cursors, engine.EncodeCursor(p.Next))
		cur = p.Next
	}
	s.Close()
	srv, err := b.startServe(ctx, filepath.Dir(b.ingestDB))
	if err != nil {
		return benchResult{}, err
	}
	const clients, perClient = 4, 250
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	path := func(c string) string {
		return fmt.Sprintf("/api/jobs/%d/items?pageSize=100&after=%s", b.ingestJob, c)
	}
	// Warm up: connections and the page cache.
	for i := range 20 {
		if err := srv.get(ctx, client, path(cursors[i*len(cursors)/20])); err != nil {
			srv.stop()
			return benchResult{}, err
		}
	}
	var mu sync.Mutex
	var times []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for w := range clients {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 99))
			for range perClient {
				c := cursors[rnd.IntN(len(cursors))]
				t0 := time.Now()
				err := srv.get(ctx, client, path(c))
				d := time.Since(t0)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				times = append(times, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	rss := srv.stop()
	if firstErr != nil {
		return benchResult{}, firstErr
	}
	slices.Sort(times)
	ms := func(p float64) float64 {
		return float64(times[min(len(times)-1, int(p*float64(len(times))))].Microseconds()) / 1000
	}
	p95 := ms(0.95)
	return benchResult{
		Name: "apipages",
		Figures: map[string]float64{"requests": float64(len(times)), "clients": clients, "depthItems": float64(len(cursors) * 5000),
			"p50ms": ms(0.5), "p95ms": p95, "p99ms": ms(0.99), "requestsPerSec": float64(len(times)) / elapsed.Seconds(), "serverPeakRssMB": rss},
		Target: "p95 ≤ 15 ms with 4 concurrent clients", Pass: boolp(p95 <= 15),
		Note: "100-item pages (JSON with input summaries) at random depths of a 1,000,000-item job; server in a child process",
	}, nil
}

// upload: POST /api/jobs with the ingest benchmark's CSV as a streamed
// multipart body; the answer comes once every row is durable. Compared
// with `sluice ingest` of the same file.
func (b *bench) upload(ctx context.Context) (benchResult, error) {
	if b.ingestSeconds == 0 {
		return benchResult{}, fmt.Errorf("needs the ingest benchmark's time")
	}
	path := filepath.Join(b.dir, "ingest.csv")
	st, err := os.Stat(path)
	if err != nil {
		return benchResult{}, err
	}
	syscall.Sync()
	srv, err := b.startServe(ctx, filepath.Join(b.dir, "upload"))
	if err != nil {
		return benchResult{}, err
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := func() error {
			if err := mw.WriteField("pipeline", engine.DefaultPipeline); err != nil {
				return err
			}
			fw, err := mw.CreateFormFile("file", "bench.csv")
			if err != nil {
				return err
			}
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(fw, f); err != nil {
				return err
			}
			return mw.Close()
		}()
		pw.CloseWithError(err)
	}()
	req, err := http.NewRequestWithContext(ctx, "POST", srv.base+"/api/jobs", pr)
	if err != nil {
		srv.stop()
		return benchResult{}, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+srv.token)
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		srv.stop()
		return benchResult{}, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	secs := time.Since(t0).Seconds()
	rss := srv.stop()
	if resp.StatusCode != http.StatusCreated {
		return benchResult{}, fmt.Errorf("upload: %s: %s", resp.Status, body)
	}
	var out struct {
		Jobs []struct {
			Items int64 `json:"items"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(body, &out); err != nil || len(out.Jobs) != 1 || out.Jobs[0].Items != int64(b.rows) {
		return benchResult{}, fmt.Errorf("upload stored %s, want %d rows", body, b.rows)
	}
	ratio := secs / b.ingestSeconds
	return benchResult{
		Name: "upload",
		Figures: map[string]float64{"mb": float64(st.Size()) / 1e6, "rows": float64(b.rows), "seconds": secs, "cliSeconds": b.ingestSeconds,
			"ratio": ratio, "serverPeakRssMB": rss},
		Target: "≤ 1.5 × CLI ingest of the same file, server peak RSS ≤ 200 MB", Pass: boolp(ratio <= 1.5 && rss <= 200),
		Note: "multipart upload streamed from this process; the answer (201) comes when every row is durable",
	}, nil
}
