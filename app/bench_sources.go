package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	jftp "github.com/jlaffaye/ftp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sluice/adapters/folder"
	"github.com/sluicehq/sluice/adapters/ftp"
	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/adapters/s3"
	"github.com/sluicehq/sluice/engine"
)

// The ingest source benchmarks (issue 6): how soon a file dropped into a
// watched folder becomes a job, and many files dropped at once into a
// folder, an FTP folder and an S3 prefix: every one ingested exactly once.
// Sources run as in 'sluice worker' (runSources), with the default
// stability window.

// sourceBenchNames are the benchmarks of this file, in the order they run.
var sourceBenchNames = []string{"droplatency", "folderfiles", "ftpfiles", "s3files"}

func isSourceBench(name string) bool { return slices.Contains(sourceBenchNames, name) }

// sourceOpts are the settings of the source benchmarks (flags of bench).
type sourceOpts struct {
	drops      int
	dropGap    time.Duration
	files      int
	fileRows   int
	ftpURL     string
	ftpPassEnv string
	s3Endpoint string
	s3Bucket   string
	s3AKEnv    string
	s3SKEnv    string
}

func (o *sourceOpts) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&o.drops, "drops", 100, "droplatency: files dropped one at a time")
	f.DurationVar(&o.dropGap, "drop-gap", 300*time.Millisecond, "droplatency: time between two drops")
	f.IntVar(&o.files, "source-files", 10_000, "folderfiles, ftpfiles, s3files: files dropped at once")
	f.IntVar(&o.fileRows, "source-rows", 100, "folderfiles, ftpfiles, s3files: rows per file")
	f.StringVar(&o.ftpURL, "ftp-url", "", "ftpfiles: ftp://USER@HOST:PORT of a server to upload to (not run without)")
	f.StringVar(&o.ftpPassEnv, "ftp-password-env", "SLUICE_TEST_FTP_PASSWORD", "ftpfiles: the variable holding the password")
	f.StringVar(&o.s3Endpoint, "s3-endpoint", "", "s3files: URL of an S3-compatible server (not run without)")
	f.StringVar(&o.s3Bucket, "s3-bucket", "sluice-bench", "s3files: bucket (made when missing)")
	f.StringVar(&o.s3AKEnv, "s3-access-key-env", "SLUICE_TEST_S3_ACCESS_KEY", "s3files: the variable holding the access key")
	f.StringVar(&o.s3SKEnv, "s3-secret-key-env", "SLUICE_TEST_S3_SECRET_KEY", "s3files: the variable holding the secret key")
}

// sourceBenches returns the benchmarks of this file bound to b and o.
func (b *bench) sourceBenches(o *sourceOpts) []namedBench {
	return []namedBench{
		{"droplatency", func(ctx context.Context) (benchResult, error) { return b.dropLatency(ctx, o) }},
		{"folderfiles", func(ctx context.Context) (benchResult, error) { return b.folderFiles(ctx, o) }},
		{"ftpfiles", func(ctx context.Context) (benchResult, error) { return b.ftpFiles(ctx, o) }},
		{"s3files", func(ctx context.Context) (benchResult, error) { return b.s3Files(ctx, o) }},
	}
}

// sourceRun is a data directory with one source running in it.
type sourceRun struct {
	env  *Env
	stop func()
}

// startSource adds a source of kind with cfg to a fresh data directory and
// runs it as 'sluice worker' does.
func (b *bench) startSource(ctx context.Context, name, kind string, cfg any, after string, poll time.Duration) (*sourceRun, error) {
	env, err := b.openEnv(ctx, name)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		env.Close()
		return nil, err
	}
	if _, err := env.Store.CreateSource(ctx, &engine.SourceRecord{Name: name, Kind: kind, Config: raw, Pipeline: engine.DefaultPipeline,
		After: after, Poll: poll, Enabled: true}, time.Now()); err != nil {
		env.Close()
		return nil, err
	}
	ing, err := env.Ingester()
	if err != nil {
		env.Close()
		return nil, err
	}
	return &sourceRun{env: env, stop: env.runSources(ctx, ing)}, nil
}

func (r *sourceRun) close() { r.stop(); r.env.Close() }

// waitIngested waits until n objects of the source are finished and none
// is being taken, or until timeout.
func (r *sourceRun) waitIngested(ctx context.Context, source string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		src, err := r.env.Store.GetSource(ctx, source)
		if err != nil {
			return err
		}
		if int(src.Ingested+src.Failed) >= n {
			open, err := r.env.Store.ListSourceObjects(ctx, &engine.ListSourceObjectsParams{Source: source,
				States: []engine.SourceObjectState{engine.ObjectSeen, engine.ObjectIngesting}})
			if err != nil {
				return err
			}
			if len(open) == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d files ingested after %s (last error: %q)", src.Ingested+src.Failed, n, timeout, src.LastError)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// exactlyOnce checks the jobs against the names dropped: each one job,
// with all its rows, no other job.
func (r *sourceRun) exactlyOnce(ctx context.Context, names []string, rows int) (missing, twice int, err error) {
	jobs, err := r.env.Store.ListJobs(ctx, &engine.ListJobsParams{Limit: len(names) * 2})
	if err != nil {
		return 0, 0, err
	}
	seen := map[string]int{}
	for _, j := range jobs {
		seen[j.Name]++
		if j.TotalItems != int64(rows) {
			return 0, 0, fmt.Errorf("job %d (%s) has %d rows, want %d", j.ID, j.Name, j.TotalItems, rows)
		}
	}
	for _, n := range names {
		switch c := seen[path.Base(n)]; {
		case c == 0:
			missing++
		case c > 1:
			twice++
		}
		delete(seen, path.Base(n))
	}
	if len(seen) > 0 {
		return missing, twice, fmt.Errorf("%d jobs of files not dropped", len(seen))
	}
	return missing, twice, nil
}

// benchNames are the file names of a many-files benchmark: spaces and
// unicode among them.
func benchNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("drop %05d ünï.csv", i)
	}
	return out
}

// manyResult is the figures of a many-files benchmark.
func manyResult(name string, n, rows int, upload, ingest time.Duration, missing, twice int) benchResult {
	return benchResult{Name: name,
		Figures: map[string]float64{"files": float64(n), "rows_per_file": float64(rows), "upload_s": upload.Seconds(),
			"ingest_s": ingest.Seconds(), "files_per_s": float64(n) / ingest.Seconds(), "missing": float64(missing), "twice": float64(twice)},
		Target: "every file ingested exactly once", Pass: boolp(missing == 0 && twice == 0),
		Note: "ingest_s: from the source's start (files already there) to the last file in the ledger, stability window included"}
}

// ingestMany runs a source over files already dropped (upload is how long
// that took) and checks each became exactly one job.
func (b *bench) ingestMany(ctx context.Context, name, kind string, cfg any, poll time.Duration, names []string, rows int, upload time.Duration) (benchResult, error) {
	t0 := time.Now()
	r, err := b.startSource(ctx, name, kind, cfg, engine.AfterMove, poll)
	if err != nil {
		return benchResult{}, err
	}
	defer r.close()
	if err := r.waitIngested(ctx, name, len(names), 30*time.Minute); err != nil {
		return benchResult{}, err
	}
	took := time.Since(t0)
	missing, twice, err := r.exactlyOnce(ctx, names, rows)
	if err != nil {
		return benchResult{}, err
	}
	return manyResult(name, len(names), rows, upload, took, missing, twice), nil
}

// dropLatency: files dropped one at a time into a watched folder; from the
// file's write to its job's creation.
func (b *bench) dropLatency(ctx context.Context, o *sourceOpts) (benchResult, error) {
	dir := filepath.Join(b.dir, "drop-inbox")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return benchResult{}, err
	}
	r, err := b.startSource(ctx, "droplatency", engine.SourceFolder, folder.Config{Path: dir}, engine.AfterDelete, folder.DefaultPoll)
	if err != nil {
		return benchResult{}, err
	}
	defer r.close()
	time.Sleep(time.Second) // the watch is set up
	data := benchCSVBytes(10)
	dropped := map[string]time.Time{}
	for i := range o.drops {
		name := fmt.Sprintf("drop-%04d.csv", i)
		dropped[name] = time.Now()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return benchResult{}, err
		}
		time.Sleep(o.dropGap)
	}
	if err := r.waitIngested(ctx, "droplatency", o.drops, 2*time.Minute); err != nil {
		return benchResult{}, err
	}
	jobs, err := r.env.Store.ListJobs(ctx, &engine.ListJobsParams{Limit: o.drops * 2})
	if err != nil {
		return benchResult{}, err
	}
	var lat []time.Duration
	for _, j := range jobs {
		if at, ok := dropped[j.Name]; ok {
			lat = append(lat, j.CreatedAt.Sub(at))
		}
	}
	if len(lat) != o.drops || len(jobs) != o.drops {
		return benchResult{}, fmt.Errorf("%d jobs for %d drops", len(jobs), o.drops)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	p95 := pct(0.95)
	return benchResult{Name: "droplatency",
		Figures: map[string]float64{"drops": float64(o.drops), "p50_ms": pct(0.5), "p95_ms": p95, "max_ms": pct(1),
			"min_age_ms": float64(engine.DefaultMinAge.Milliseconds())},
		Target: "p95 ≤ 1000 ms (stability window included)", Pass: boolp(p95 <= 1000),
		Note: "file written → job created, one file at a time, default stability window"}, nil
}

// benchCSVBytes is a CSV file of rows rows.
func benchCSVBytes(rows int) []byte {
	var buf bytes.Buffer
	buf.WriteString("sku,name,price\n")
	for i := range rows {
		fmt.Fprintf(&buf, "SKU%06d,item %d,%d.%02d\n", i, i, i%1000, i%100)
	}
	return buf.Bytes()
}

// folderFiles: --source-files files dropped at once into a watched folder.
func (b *bench) folderFiles(ctx context.Context, o *sourceOpts) (benchResult, error) {
	dir := filepath.Join(b.dir, "many-inbox")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return benchResult{}, err
	}
	names, data := benchNames(o.files), benchCSVBytes(o.fileRows)
	t0 := time.Now()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o644); err != nil {
			return benchResult{}, err
		}
	}
	return b.ingestMany(ctx, "folderfiles", engine.SourceFolder, folder.Config{Path: dir}, folder.DefaultPoll, names, o.fileRows, time.Since(t0))
}

// ftpFiles: --source-files files uploaded to an FTP server, then polled.
func (b *bench) ftpFiles(ctx context.Context, o *sourceOpts) (benchResult, error) {
	if o.ftpURL == "" {
		return benchResult{Name: "ftpfiles", Note: "not run: no --ftp-url"}, nil
	}
	u, err := url.Parse(o.ftpURL)
	if err != nil {
		return benchResult{}, usagef("--ftp-url: %v", err)
	}
	pass := os.Getenv(o.ftpPassEnv)
	dir := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	names, data := benchNames(o.files), benchCSVBytes(o.fileRows)
	t0 := time.Now()
	// Two connections upload at once, as several clients would.
	g, gctx := errgroup.WithContext(ctx)
	var mk sync.Once
	const conns = 2
	for w := range conns {
		g.Go(func() error {
			c, err := jftp.Dial(u.Host, jftp.DialWithContext(gctx))
			if err != nil {
				return err
			}
			defer c.Quit()
			if err := c.Login(u.User.Username(), pass); err != nil {
				return err
			}
			var mkErr error
			mk.Do(func() { mkErr = c.MakeDir(dir) })
			if mkErr != nil {
				return mkErr
			}
			for i := w; i < len(names); i += conns {
				// A server with a small passive port range (pure-ftpd's
				// -p here) answers 425 when a port is still taken: again.
				var err error
				for try := 0; try < 20; try++ {
					if err = c.Stor(path.Join(dir, names[i]), bytes.NewReader(data)); err == nil || !strings.HasPrefix(err.Error(), "425") {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if err != nil {
					return fmt.Errorf("upload %s: %w", names[i], err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return benchResult{}, err
	}
	cfg := ftp.Config{URL: "ftp://" + u.User.Username() + "@" + u.Host + "/" + dir, Password: remote.Secret{Env: o.ftpPassEnv}}
	return b.ingestMany(ctx, "ftpfiles", engine.SourceFTP, cfg, 2*time.Second, names, o.fileRows, time.Since(t0))
}

// s3Files: --source-files objects put under a fresh prefix, then polled.
func (b *bench) s3Files(ctx context.Context, o *sourceOpts) (benchResult, error) {
	if o.s3Endpoint == "" {
		return benchResult{Name: "s3files", Note: "not run: no --s3-endpoint"}, nil
	}
	c := awss3.New(awss3.Options{Region: s3.DefaultRegion, BaseEndpoint: aws.String(o.s3Endpoint), UsePathStyle: true,
		Credentials:                credentials.NewStaticCredentialsProvider(os.Getenv(o.s3AKEnv), os.Getenv(o.s3SKEnv), ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired})
	if _, err := c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: aws.String(o.s3Bucket)}); err != nil {
		if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(o.s3Bucket)}); err != nil {
			return benchResult{}, fmt.Errorf("create bucket %s: %w", o.s3Bucket, err)
		}
	}
	prefix := fmt.Sprintf("bench-%d/", time.Now().UnixNano())
	names, data := benchNames(o.files), benchCSVBytes(o.fileRows)
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, n := range names {
		g.Go(func() error {
			_, err := c.PutObject(gctx, &awss3.PutObjectInput{Bucket: aws.String(o.s3Bucket), Key: aws.String(prefix + n),
				Body: bytes.NewReader(data)})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return benchResult{}, err
	}
	cfg := s3.Config{Bucket: o.s3Bucket, Prefix: prefix, Endpoint: o.s3Endpoint, PathStyle: true,
		AccessKey: remote.Secret{Env: o.s3AKEnv}, SecretKey: remote.Secret{Env: o.s3SKEnv}}
	return b.ingestMany(ctx, "s3files", engine.SourceS3, cfg, 2*time.Second, names, o.fileRows, time.Since(t0))
}
