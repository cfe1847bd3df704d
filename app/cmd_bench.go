package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// benchResult is one benchmark's figures.
type benchResult struct {
	Name    string             `json:"name"`
	Figures map[string]float64 `json:"figures"`
	Target  string             `json:"target,omitempty"`
	Pass    *bool              `json:"pass,omitempty"`
	Note    string             `json:"note,omitempty"`
}

func newBenchCmd(g *globals) *cobra.Command {
	var only string
	var asJSON bool
	var rows, items, latencyN int
	var popts procOpts
	var sopts sourceOpts
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the performance benchmarks and print their figures",
		Long: `Run Sluice's benchmarks on fresh databases in a temporary directory (the
--data directory is not touched) with the default durability settings:

  ingest      a generated CSV (--rows, default 1,000,000 rows, 6 columns, ~100 MB)
              through 'sluice ingest' in a child process (wall time, peak RSS),
              next to the sqlite3 shell's .import of the same file when sqlite3
              is installed
  throughput  --items (default 100,000) items through the noop pipeline, first
              claim to last completion, with CPU and the write connection's
              busy time per item (claims and outcomes apart)
  latency     --latency-n single-item jobs enqueued in-process 5 ms apart with an
              idle worker: enqueue call to processing start
  keyset      a 100-item page at random depths of the ingest benchmark's job
  apipages    the same pages through GET /api/jobs/{id}/items of a 'sluice --serve'
              child process, 4 concurrent clients
  upload      the ingest benchmark's CSV uploaded to a 'sluice --serve' child
              process (POST /api/jobs), against the CLI ingest time
  hostlimit   http items against the vendor simulator limited to --host-rate
              req/s: sustained rate and 429 share, then after a restart
  latencyjump the simulator's latency jumps (--jump-from to --jump-to): how the
              claim size and leases follow
  stages      --stage-items through a 3-stage noop pipeline vs the 1-stage one
  images      --images JPEGs of --image-size through 'sluice ingest DIR --wait'
              in a child process (wall time, peak RSS)
  pgthroughput (PostgreSQL, --store postgres://... or SLUICE_BENCH_POSTGRES; not
              in the default set) --items noop items drained by 4 'sluice worker'
              processes, then as many no-op River jobs (riverpgxv5) on the same server
  pglatency   (PostgreSQL, as above) --latency-n single-item jobs enqueued through
              another connection pool, an idle worker woken by LISTEN/NOTIFY
  export      a job of --rows DONE items with 10 result fields (built once:
              ingest, then the noop pipeline) exported to CSV and to XLSX by
              'sluice export' in child processes (wall time, peak RSS)
  schedule    one @every 1s trigger under the scheduler for 10 s: job created
              minus due time
  event       200 job.finished events with one event trigger: publish to the
              job committed
  schedulercpu 1,000 @every 1s triggers for 20 s: the process's CPU share
  droplatency --drops files dropped one at a time into a watched folder (as
              'sluice worker' runs it, default stability window): file
              written to job created
  folderfiles --source-files files of --source-rows rows dropped at once into a
              watched folder: every one ingested exactly once, and how long
  ftpfiles    the same uploaded to the FTP server of --ftp-url, then polled
              (not run without --ftp-url)
  s3files     the same put under a fresh prefix of --s3-endpoint's bucket, then
              polled (not run without --s3-endpoint)

Run one or some with --only ingest,keyset.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			want := map[string]bool{}
			for _, s := range strings.Split(only, ",") {
				if s = strings.TrimSpace(s); s != "" {
					switch s {
					case "ingest", "throughput", "latency", "keyset", "apipages", "upload", "export", "pgthroughput", "pglatency":
						want[s] = true
					default:
						if !isProcessorBench(s) && !isAutomationBench(s) && !isSourceBench(s) {
							return usagef("--only: unknown benchmark %q (ingest, throughput, latency, keyset, apipages, upload, export, pgthroughput, pglatency, %s, %s, %s)", s,
								strings.Join(processorBenchNames, ", "), strings.Join(automationBenchNames, ", "), strings.Join(sourceBenchNames, ", "))
						}
						want[s] = true
					}
				}
			}
			all := len(want) == 0

			dir, err := os.MkdirTemp("", "sluice-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			ctx := cmd.Context()
			b := &bench{g: g, dir: dir, rows: rows, items: items, latencyN: latencyN}
			var results []benchResult
			run := func(name string, fn func(context.Context) (benchResult, error)) error {
				if !all && !want[name] {
					return nil
				}
				if !asJSON {
					fmt.Fprintf(g.stderr, "bench %s ...\n", name)
				}
				r, err := fn(ctx)
				if err != nil {
					return fmt.Errorf("bench %s: %w", name, err)
				}
				results = append(results, r)
				if !asJSON {
					printBench(g, r)
				}
				return nil
			}
			if err := run("throughput", b.throughput); err != nil {
				return err
			}
			if err := run("latency", b.latency); err != nil {
				return err
			}
			if err := run("ingest", b.ingest); err != nil {
				return err
			}
			if (want["keyset"] || want["apipages"] || want["upload"]) && !want["ingest"] && !all {
				// keyset needs the ingest benchmark's database.
				if _, err := b.ingest(ctx); err != nil {
					return err
				}
			}
			if err := run("keyset", b.keyset); err != nil {
				return err
			}
			if err := run("apipages", b.apiPages); err != nil {
				return err
			}
			if err := run("upload", b.upload); err != nil {
				return err
			}
			for _, pb := range b.processorBenches(&popts) {
				if err := run(pb.name, pb.fn); err != nil {
					return err
				}
			}
			if err := run("export", b.export); err != nil {
				return err
			}
			for _, ab := range b.automationBenches() {
				if err := run(ab.name, ab.fn); err != nil {
					return err
				}
			}
			for _, sb := range b.sourceBenches(&sopts) {
				if err := run(sb.name, sb.fn); err != nil {
					return err
				}
			}
			// The PostgreSQL benchmarks need a server: only when asked for.
			for _, pg := range []struct {
				name string
				fn   func(context.Context) (benchResult, error)
			}{{"pgthroughput", b.pgThroughput}, {"pglatency", b.pgLatency}} {
				if want[pg.name] {
					if err := run(pg.name, pg.fn); err != nil {
						return err
					}
				}
			}
			if asJSON {
				return writeJSON(g.stdout, map[string]any{"results": results, "at": time.Now().UTC()})
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&only, "only", "", "run only these benchmarks (comma separated)")
	f.IntVar(&rows, "rows", 1_000_000, "rows of the ingest benchmark's CSV and of the export benchmark's job")
	f.IntVar(&items, "items", 100_000, "items of the throughput benchmark")
	f.IntVar(&latencyN, "latency-n", 500, "jobs of the latency benchmark")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	popts.addFlags(cmd)
	sopts.addFlags(cmd)
	return cmd
}

func printBench(g *globals, r benchResult) {
	js, _ := json.Marshal(r.Figures)
	verdict := ""
	if r.Pass != nil {
		verdict = " FAIL"
		if *r.Pass {
			verdict = " ok"
		}
	}
	fmt.Fprintf(g.stdout, "%-10s %s", r.Name, js)
	if r.Target != "" {
		fmt.Fprintf(g.stdout, "  target: %s%s", r.Target, verdict)
	}
	fmt.Fprintln(g.stdout)
	if r.Note != "" {
		fmt.Fprintf(g.stdout, "%-10s %s\n", "", r.Note)
	}
}

func boolp(b bool) *bool { return &b }
