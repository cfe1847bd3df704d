package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/tabular"
	"github.com/spf13/cobra"
)

type ingestOut struct {
	File    string  `json:"file"`
	JobID   int64   `json:"jobId"`
	Items   int64   `json:"items"`
	Skipped int64   `json:"skipped"`
	State   string  `json:"state"`
	Error   string  `json:"error,omitempty"`
	Seconds float64 `json:"seconds"`
}

func newIngestCmd(g *globals) *cobra.Command {
	var pipeline, encoding, delimiter, sheet string
	var wait, asJSON bool
	var concurrency int
	cmd := &cobra.Command{
		Use:   "ingest FILE...",
		Short: "Store every row of CSV or XLSX files as a new job each",
		Long: `Store every row of each CSV or XLSX file (first sheet, or --sheet) as the
items of a new job. The job becomes
visible to workers only once every row is durable. Delimiter (, ; tab |) and
encoding (UTF-8 with or without BOM, UTF-16 with BOM, Windows-1252) are
detected; force them with --delimiter and --encoding. A row with the wrong
number of fields becomes a SKIPPED item with the reason; a file that is not CSV
fails its job with the line and the reason.

With --wait, workers run in this process until these jobs finish.`,
		Example: `  sluice ingest products.csv
  sluice ingest a.csv b.csv --pipeline lookup --wait
  sluice ingest export.txt --encoding utf-16le --delimiter tab --json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("ingest needs at least one FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := tabular.CheckEncoding(encoding); err != nil {
				return usagef("--encoding: %v", err)
			}
			opts := tabular.Options{Encoding: encoding}
			var err error
			if opts.Delimiter, err = tabular.ParseDelimiter(delimiter); err != nil {
				return usagef("--delimiter: %v", err)
			}
			files, images, err := splitInputs(args)
			if err != nil {
				return err
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				ing, err := env.Ingester()
				if err != nil {
					return err
				}
				var outs []ingestOut
				var firstErr error
				failed := 0
				for _, f := range files {
					o, err := ingestFile(ctx, ing, f, pipeline, sheet, opts)
					outs = append(outs, o)
					if err != nil {
						failed++
						if firstErr == nil {
							firstErr = err
						}
					}
					if !asJSON {
						switch {
						case o.Error == "":
							fmt.Fprintf(g.stdout, "job %d: %d items from %s (%s)\n", o.JobID, o.Items, f, o.State)
						case len(args) > 1 && o.JobID != 0:
							// With one file the error line below says it all.
							fmt.Fprintf(g.stderr, "%s: job %d FAILED: %s\n", f, o.JobID, o.Error)
						}
					}
					if engine.ErrorCode(err) == engine.EINVALID && o.JobID == 0 {
						break // e.g. no such pipeline: the next files would fail the same way
					}
				}
				if len(images) > 0 {
					imgPipeline := pipeline
					if !cmd.Flags().Changed("pipeline") {
						imgPipeline = ImagePipeline
					}
					o, err := ingestImages(ctx, ing, images, imgPipeline)
					outs = append(outs, o)
					if err != nil {
						failed++
						if firstErr == nil {
							firstErr = err
						}
					} else if !asJSON {
						fmt.Fprintf(g.stdout, "job %d: %d images (%s)\n", o.JobID, o.Items, o.State)
					}
				}
				if inputs := len(files) + min(len(images), 1); failed > 0 && inputs > 1 {
					firstErr = fmt.Errorf("%d of %d jobs failed (first: %s)", failed, inputs, engine.ErrorMessage(firstErr))
				}
				if wait && firstErr == nil {
					if err := waitForJobs(ctx, env, outs, concurrency); err != nil {
						return err
					}
				}
				if asJSON {
					for _, o := range outs {
						if err := writeJSONLine(g, o); err != nil {
							return err
						}
					}
				} else if wait {
					for _, o := range outs {
						fmt.Fprintf(g.stdout, "job %d: %s\n", o.JobID, o.State)
					}
				}
				return firstErr
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&pipeline, "pipeline", "p", engine.DefaultPipeline, "pipeline that processes the rows")
	f.BoolVar(&wait, "wait", false, "run workers in this process until these jobs finish")
	f.IntVar(&concurrency, "concurrency", 0, "workers for --wait (default SLUICE_CONCURRENCY or 8)")
	f.StringVar(&encoding, "encoding", "auto", "input encoding: auto, utf-8, utf-16le, utf-16be, windows-1252")
	f.StringVar(&delimiter, "delimiter", "", "field delimiter (default: detected among , ; tab |)")
	f.StringVar(&sheet, "sheet", "", "XLSX: the sheet to read (default: the first)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per file")
	return cmd
}

func writeJSONLine(g *globals, v any) error {
	return writeJSONCompact(g.stdout, v)
}

func ingestFile(ctx context.Context, ing *engine.Ingester, path, pipeline, sheet string, opts tabular.Options) (ingestOut, error) {
	out := ingestOut{File: path}
	f, err := os.Open(path)
	if err != nil {
		out.Error = err.Error()
		return out, err
	}
	defer f.Close()
	abs, _ := filepath.Abs(path)
	start := time.Now()
	res, err := ing.IngestCSV(ctx, engine.IngestRequest{
		Pipeline: pipeline, Name: filepath.Base(path), Source: "manual", SourceRef: abs, Input: f, CSV: opts,
		Path: path, Sheet: sheet,
	})
	out.Seconds = time.Since(start).Seconds()
	if res != nil && res.Job != nil {
		out.JobID, out.Items, out.Skipped, out.State = res.Job.ID, res.Rows, res.Skipped, string(res.Job.State)
	}
	if err != nil {
		out.Error = engine.ErrorMessage(err)
		if engine.ErrorCode(err) == engine.EINTERNAL {
			out.Error = err.Error()
		}
	}
	return out, err
}

// waitForJobs runs a runner in this process until every job is terminal
// (finished by this process or another).
func waitForJobs(ctx context.Context, env *Env, outs []ingestOut, concurrency int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer env.keepHostRates(ctx)()
	var mu sync.Mutex
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		for i := range outs {
			j, err := env.Store.GetJob(ctx, outs[i].JobID)
			if err != nil {
				return
			}
			outs[i].State = string(j.State)
			if !j.State.Terminal() && j.State != engine.JobPaused {
				return
			}
		}
		cancel()
	}
	r, err := env.Runner(concurrency, false, func(int64) { check() })
	if err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				check()
			}
		}
	}()
	check()
	_, err = r.Run(ctx)
	mu.Lock()
	defer mu.Unlock()
	for i := range outs {
		if j, gerr := env.Store.GetJob(context.WithoutCancel(ctx), outs[i].JobID); gerr == nil {
			outs[i].State = string(j.State)
		}
	}
	return err
}

func defaultCSV() tabular.Options { return tabular.Options{} }

// ingestImages makes one job of all the images given.
func ingestImages(ctx context.Context, ing *engine.Ingester, images []engine.ImageFile, pipeline string) (ingestOut, error) {
	name := fmt.Sprintf("%d images", len(images))
	if len(images) == 1 {
		name = images[0].Name
	}
	out := ingestOut{File: name}
	start := time.Now()
	res, err := ing.IngestImages(ctx, engine.IngestRequest{Pipeline: pipeline, Name: name, Source: "manual"}, images)
	out.Seconds = time.Since(start).Seconds()
	if res != nil && res.Job != nil {
		out.JobID, out.Items, out.State = res.Job.ID, res.Rows, string(res.Job.State)
	}
	if err != nil {
		out.Error = engine.ErrorMessage(err)
	}
	return out, err
}
