package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// bench holds the state shared by the benchmarks of one run.
type bench struct {
	g        *globals
	dir      string
	rows     int
	items    int
	latencyN int
	// ingestDB and ingestJob are left by the ingest benchmark for keyset.
	ingestDB  string
	ingestJob int64
	// ingestSeconds is the CLI ingest's wall time, for upload.
	ingestSeconds float64
}

func (b *bench) openEnv(ctx context.Context, name string) (*Env, error) {
	g := *b.g
	g.data = filepath.Join(b.dir, name)
	g.logLevel = "error"
	g.store = "" // the SQLite benchmarks, whatever --store says
	return g.open(ctx)
}

// throughput: N noop items, first claim to last durable completion.
func (b *bench) throughput(ctx context.Context) (benchResult, error) {
	env, err := b.openEnv(ctx, "throughput")
	if err != nil {
		return benchResult{}, err
	}
	defer env.Close()
	path := filepath.Join(b.dir, "throughput.csv")
	if err := writeBenchCSV(path, b.items); err != nil {
		return benchResult{}, err
	}
	ing, err := env.Ingester()
	if err != nil {
		return benchResult{}, err
	}
	if _, err := ingestFile(ctx, ing, path, engine.DefaultPipeline, "", defaultCSV()); err != nil {
		return benchResult{}, err
	}
	r, err := env.Runner(0, true, nil)
	if err != nil {
		return benchResult{}, err
	}
	// The one write connection is serial: its busy time per item bounds
	// the rate (claims and completions; the ingest before is left out).
	busy, _ := env.Store.(interface {
		WriteBusy() (light, durable time.Duration)
	})
	var light0, durable0 time.Duration
	if busy != nil {
		light0, durable0 = busy.WriteBusy()
	}
	cpu0 := processCPU()
	sum, err := r.Run(ctx)
	if err != nil {
		return benchResult{}, err
	}
	// CPU time per item is steadier than the rate on a shared machine
	// (it includes the checkpointer and the runtime, not the ingest).
	cpuPerItem := float64((processCPU() - cpu0).Microseconds()) / float64(max(sum.Completed, 1))
	if sum.Completed != int64(b.items) {
		return benchResult{}, fmt.Errorf("completed %d of %d items", sum.Completed, b.items)
	}
	rate := sum.ItemsPerSec
	figures := map[string]float64{"items": float64(sum.Completed), "seconds": sum.Busy.Seconds(), "itemsPerSec": rate,
		"claims": float64(sum.Claims), "commits": float64(sum.Commits), "cpuUsPerItem": cpuPerItem}
	if busy != nil {
		// Claims run in light transactions, outcomes in durable ones.
		light, durable := busy.WriteBusy()
		perItem := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(sum.Completed, 1)) }
		figures["claimWriterUsPerItem"] = perItem(light - light0)
		figures["completeWriterUsPerItem"] = perItem(durable - durable0)
	}
	return benchResult{
		Name: "throughput", Figures: figures,
		Target: "≥ 40,000 items/s", Pass: boolp(rate >= 40000),
	}, nil
}

// latencyProc records, for each item, the time from its enqueue call (in
// its input) to the start of processing.
type latencyProc struct {
	mu  sync.Mutex
	lat []time.Duration
	got chan struct{}
}

func (p *latencyProc) Process(_ context.Context, t *engine.Task) (json.RawMessage, error) {
	now := time.Now()
	var in struct {
		T string `json:"t"`
	}
	if err := json.Unmarshal(t.Input, &in); err != nil {
		return nil, engine.Permanent(err)
	}
	ns, _ := strconv.ParseInt(in.T, 10, 64)
	p.mu.Lock()
	p.lat = append(p.lat, now.Sub(time.Unix(0, ns)))
	p.mu.Unlock()
	p.got <- struct{}{}
	return json.RawMessage(`{}`), nil
}

func (b *bench) latency(ctx context.Context) (benchResult, error) {
	env, err := b.openEnv(ctx, "latency")
	if err != nil {
		return benchResult{}, err
	}
	defer env.Close()
	ing, err := env.Ingester()
	if err != nil {
		return benchResult{}, err
	}
	r, err := measureLatency(ctx, env, b.latencyN, func(ctx context.Context, row json.RawMessage) error {
		_, err := ing.Enqueue(ctx, engine.EnqueueRequest{Pipeline: "bench-latency", Rows: []json.RawMessage{row}})
		return err
	})
	if err != nil {
		return benchResult{}, err
	}
	p50, p99 := r.Figures["p50ms"], r.Figures["p99ms"]
	r.Target, r.Pass = "p50 ≤ 1 ms, p99 ≤ 5 ms", boolp(p50 <= 1 && p99 <= 5)
	r.Note = "p50/p99: enqueue call (one durable transaction) to processing start, idle worker; " +
		"pickup: from the enqueue's return (row durable) to processing start"
	return r, nil
}

// measureLatency runs an idle runner of env on the pipeline bench-latency
// and enqueues n single-item jobs 5 ms apart with enqueue, one at a time:
// the figures are the time from each enqueue call, and from its return, to
// the start of processing.
func measureLatency(ctx context.Context, env *Env, n int, enqueue func(context.Context, json.RawMessage) error) (benchResult, error) {
	proc := &latencyProc{got: make(chan struct{}, n)}
	env.Registry.Register("bench-latency", func(json.RawMessage) (engine.Processor, error) { return proc, nil })
	if _, err := env.Store.PutPipeline(ctx, &engine.PutPipelineParams{Pipeline: &engine.Pipeline{
		Name: "bench-latency", Stages: []engine.Stage{{Processor: "bench-latency"}}}, Now: time.Now()}); err != nil {
		return benchResult{}, err
	}
	r, err := env.Runner(0, false, nil)
	if err != nil {
		return benchResult{}, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := r.Run(rctx); done <- err }()
	time.Sleep(500 * time.Millisecond) // let the worker go idle
	var enq []time.Duration
	var enqDone []time.Time
	for i := 0; i < n; i++ {
		t0 := time.Now()
		row := json.RawMessage(fmt.Sprintf(`{"t":"%d"}`, t0.UnixNano()))
		if err := enqueue(ctx, row); err != nil {
			cancel()
			return benchResult{}, err
		}
		enq = append(enq, time.Since(t0))
		enqDone = append(enqDone, time.Now())
		select {
		case <-proc.got:
		case <-time.After(10 * time.Second):
			cancel()
			return benchResult{}, fmt.Errorf("item %d was not picked up within 10s", i)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		return benchResult{}, err
	}
	// Items are processed in enqueue order (one at a time): pickup is the
	// time from the enqueue call's return (row durable) to processing start.
	var pickup []time.Duration
	for i, l := range proc.lat {
		start := enqDone[i].Add(-enq[i])
		pickup = append(pickup, start.Add(l).Sub(enqDone[i]))
	}
	slices.Sort(pickup)
	lat := slices.Clone(proc.lat)
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	slices.Sort(enq)
	enqP50 := float64(enq[len(enq)/2].Microseconds()) / 1000
	return benchResult{
		Name: "latency",
		Figures: map[string]float64{"jobs": float64(len(lat)), "p50ms": pct(0.50), "p95ms": pct(0.95), "p99ms": pct(0.99), "maxms": pct(1),
			"enqueueP50ms": enqP50, "pickupP50ms": float64(pickup[len(pickup)/2].Microseconds()) / 1000,
			"pickupP99ms": float64(pickup[len(pickup)*99/100].Microseconds()) / 1000},
	}, nil
}

// ingest: the real binary ingests the generated file in a child process,
// so wall time and peak RSS are its own; the sqlite3 shell imports the same
// file into a plain table for comparison.
func (b *bench) ingest(ctx context.Context) (benchResult, error) {
	path := filepath.Join(b.dir, "ingest.csv")
	if err := writeBenchCSV(path, b.rows); err != nil {
		return benchResult{}, err
	}
	st, _ := os.Stat(path)
	figures := map[string]float64{"rows": float64(b.rows), "mb": float64(st.Size()) / 1e6}
	note := ""
	// Each timed run starts with no dirty pages of earlier steps still
	// being written back (which would slow its fsyncs).
	syscall.Sync()
	if sq, err := exec.LookPath("sqlite3"); err == nil {
		db := filepath.Join(b.dir, "shell.db")
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, sq, db, ".import --csv "+path+" items")
		if out, err := cmd.CombinedOutput(); err != nil {
			return benchResult{}, fmt.Errorf("sqlite3 .import: %v: %s", err, out)
		}
		figures["sqlite3Seconds"] = time.Since(t0).Seconds()
		syscall.Sync()
	} else {
		note = "sqlite3 shell not installed (apt-get install sqlite3): no comparison"
	}
	exe, err := os.Executable()
	if err != nil {
		return benchResult{}, err
	}
	data := filepath.Join(b.dir, "ingest")
	t0 := time.Now()
	cmd := exec.CommandContext(ctx, exe, "--data", data, "--log-level", "error", "--sqlite-sync", b.g.sync, "ingest", path, "--json")
	cmd.Stderr = b.g.stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	peak, err := runMeasured(cmd)
	if err != nil {
		return benchResult{}, fmt.Errorf("sluice ingest: %w", err)
	}
	secs := time.Since(t0).Seconds()
	var o ingestOut
	if err := json.Unmarshal(out.Bytes(), &o); err != nil {
		return benchResult{}, fmt.Errorf("sluice ingest output: %w", err)
	}
	if o.Items != int64(b.rows) {
		return benchResult{}, fmt.Errorf("ingested %d of %d rows", o.Items, b.rows)
	}
	b.ingestDB, b.ingestJob = filepath.Join(data, DBFile), o.JobID
	figures["seconds"] = secs
	b.ingestSeconds = secs
	figures["rowsPerSec"] = float64(b.rows) / secs
	figures["peakRssMB"] = peak
	figures["cpuSeconds"] = cpuSeconds(cmd)
	r := benchResult{Name: "ingest", Figures: figures, Note: note, Target: "≤ 3.5 × sqlite3 .import, peak RSS ≤ 150 MB"}
	if s, ok := figures["sqlite3Seconds"]; ok {
		figures["ratio"] = secs / s
		r.Pass = boolp(secs <= 3.5*s && figures["peakRssMB"] <= 150)
	}
	return r, nil
}

// keyset: pages of 100 items at random depths of the ingested job.
func (b *bench) keyset(ctx context.Context) (benchResult, error) {
	if b.ingestDB == "" {
		return benchResult{}, fmt.Errorf("needs the ingest benchmark's database")
	}
	s, err := sqlite.Open(ctx, b.ingestDB, sqlite.Options{})
	if err != nil {
		return benchResult{}, err
	}
	defer s.Close()
	// Cursors at random depths: walk once with large pages, keep every
	// page boundary, then time 100-item pages from random boundaries.
	var cursors []*engine.Cursor
	var cur *engine.Cursor
	for {
		p, err := s.ListItems(ctx, &engine.ListItemsParams{JobID: b.ingestJob, After: cur, Limit: 5000})
		if err != nil {
			return benchResult{}, err
		}
		if p.Next == nil {
			break
		}
		cursors = append(cursors, p.Next)
		cur = p.Next
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	var times []time.Duration
	for range 200 {
		c := cursors[rnd.IntN(len(cursors))]
		t0 := time.Now()
		p, err := s.ListItems(ctx, &engine.ListItemsParams{JobID: b.ingestJob, After: c, Limit: 100})
		if err != nil {
			return benchResult{}, err
		}
		times = append(times, time.Since(t0))
		if len(p.Items) != 100 {
			return benchResult{}, fmt.Errorf("page of %d items", len(p.Items))
		}
	}
	slices.Sort(times)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	p50 := ms(times[len(times)/2])
	return benchResult{
		Name:    "keyset",
		Figures: map[string]float64{"pages": float64(len(times)), "depthItems": float64(len(cursors) * 5000), "p50ms": p50, "p99ms": ms(times[len(times)*99/100])},
		Target:  "p50 ≤ 5 ms", Pass: boolp(p50 <= 5),
		Note: "all statuses (six index ranges merged), no input",
	}, nil
}

// writeBenchCSV writes n rows of 6 columns, about 100 bytes a row.
func writeBenchCSV(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, "sku,title,brand,price,quantity,description")
	rnd := rand.New(rand.NewPCG(7, 11))
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, "SKU-%08d,Product title number %d,Brand %d,%d.%02d,%d,\"A plain description, with a comma, of item %d\"\n",
			i, i, rnd.IntN(500), rnd.IntN(1000), rnd.IntN(100), rnd.IntN(10000), i)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// export: a job of --rows DONE items, each with a 10-field result, built
// once through the real store (the generated CSV ingested, then drained
// through the noop pipeline, whose result is the row), then exported to CSV
// and to XLSX by 'sluice export' in child processes, so that wall time and
// peak RSS are the export's own.
func (b *bench) export(ctx context.Context) (benchResult, error) {
	path := filepath.Join(b.dir, "export-input.csv")
	if err := writeExportCSV(path, b.rows); err != nil {
		return benchResult{}, err
	}
	env, err := b.openEnv(ctx, "export")
	if err != nil {
		return benchResult{}, err
	}
	data := env.Data
	t0 := time.Now()
	job, err := func() (int64, error) {
		defer env.Close()
		ing, err := env.Ingester()
		if err != nil {
			return 0, err
		}
		out, err := ingestFile(ctx, ing, path, engine.DefaultPipeline, "", defaultCSV())
		if err != nil {
			return 0, err
		}
		r, err := env.Runner(0, true, nil)
		if err != nil {
			return 0, err
		}
		sum, err := r.Run(ctx)
		if err != nil {
			return 0, err
		}
		if sum.ByStatus["DONE"] != int64(b.rows) {
			return 0, fmt.Errorf("%d of %d items DONE", sum.ByStatus["DONE"], b.rows)
		}
		return out.JobID, nil
	}()
	if err != nil {
		return benchResult{}, err
	}
	figures := map[string]float64{"rows": float64(b.rows), "buildSeconds": time.Since(t0).Seconds()}
	os.Remove(path)
	exe, err := os.Executable()
	if err != nil {
		return benchResult{}, err
	}
	for _, format := range []string{"csv", "xlsx"} {
		out := filepath.Join(b.dir, "export."+format)
		syscall.Sync() // no write-back of earlier steps during the run
		t0 := time.Now()
		cmd := exec.CommandContext(ctx, exe, "--data", data, "--log-level", "error", "--sqlite-sync", b.g.sync,
			"export", strconv.FormatInt(job, 10), "-o", out)
		var msg bytes.Buffer
		cmd.Stdout, cmd.Stderr = &msg, &msg
		peak, err := runMeasured(cmd)
		if err != nil {
			return benchResult{}, fmt.Errorf("sluice export --format %s: %v: %s", format, err, msg.Bytes())
		}
		figures[format+"Seconds"] = time.Since(t0).Seconds()
		figures[format+"PeakRssMB"] = peak
		figures[format+"CpuSeconds"] = cpuSeconds(cmd)
		if st, err := os.Stat(out); err == nil {
			figures[format+"MB"] = float64(st.Size()) / 1e6
		}
		os.Remove(out)
	}
	pass := figures["csvSeconds"] <= 3 && figures["csvPeakRssMB"] <= 100 &&
		figures["xlsxSeconds"] <= 15 && figures["xlsxPeakRssMB"] <= 250
	return benchResult{
		Name: "export", Figures: figures,
		Target: "CSV ≤ 3 s, RSS ≤ 100 MB; XLSX ≤ 15 s, peak RSS ≤ 250 MB",
		Pass:   boolp(pass),
		Note: "a finished job of DONE items with 10 result fields, exported by a child 'sluice export'; " +
			"peak RSS is the child's VmHWM, sampled every 5 ms",
	}, nil
}

// writeExportCSV writes n rows of 10 columns (text, prices, counts,
// decimals, a quoted description), about 130 bytes a row.
func writeExportCSV(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintln(w, "sku,title,brand,price,quantity,weight,color,category,rating,description")
	rnd := rand.New(rand.NewPCG(3, 5))
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, "SKU-%08d,Product title number %d,Brand %d,%d.%02d,%d,%d.%03d,color %d,cat/%d,%d,\"A plain description, with a comma, of item %d\"\n",
			i, i, rnd.IntN(500), rnd.IntN(1000), rnd.IntN(100), rnd.IntN(10000), rnd.IntN(10), rnd.IntN(1000),
			i%17, i%113, 1+rnd.IntN(5), i)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runMeasured runs cmd to its end and returns its peak RSS in MB: the
// largest VmHWM of /proc/PID/status sampled every 5 ms while it runs (0
// where there is no /proc). VmHWM is the high-water mark of the child's own
// memory since its exec. getrusage's ru_maxrss of a child is not: Linux
// carries the high-water mark of the memory the child was started from
// (this process's, since Go starts children with vfork) across the exec.
func runMeasured(cmd *exec.Cmd) (float64, error) {
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	var peakKB int64
	sample := func() { peakKB = max(peakKB, vmHWMKB(cmd.Process.Pid)) }
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		sample()
		select {
		case err := <-done:
			return float64(peakKB) / 1024, err
		case <-tick.C:
		}
	}
}

// vmHWMKB returns the high-water mark of a process's resident memory in
// KiB (VmHWM of /proc/PID/status), or 0 where it cannot be read.
func vmHWMKB(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}

// cpuSeconds is the user and system CPU time of a finished child.
func cpuSeconds(cmd *exec.Cmd) float64 {
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	return 0
}
