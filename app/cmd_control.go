package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/export"
	"github.com/spf13/cobra"
)

func newExportCmd(g *globals) *cobra.Command {
	var format, output, statuses string
	cmd := &cobra.Command{
		Use:   "export JOB_ID -o FILE [--format csv|xlsx]",
		Short: "Write a job's results as the grid shows them (CSV or XLSX)",
		Long: `Write a job's items in the grid's order (that of 'sluice items': by last
change) with the grid's columns: seq, status, attempts, error, then every
result field (first-seen order). Cells that a spreadsheet would run as
formulas are neutralised with a leading quote.

--format is csv or xlsx; without it the -o file's extension decides (.xlsx
writes a workbook, anything else CSV). In an XLSX workbook plain numbers are
number cells; a job of more than 1,048,575 items continues on further sheets.
-o - writes to standard output (an XLSX workbook only when that is not a
terminal).`,
		Example: `  sluice export 1 -o results.csv
  sluice export 1 -o results.xlsx --status DONE
  sluice export 1 --format xlsx -o - > results.xlsx
  sluice export 1 -o - --status ERROR,NOT_FOUND`,
		Args: exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0], "job ID")
			if err != nil {
				return err
			}
			if output == "" {
				return usagef("-o: name the output file (- for standard output)")
			}
			f := export.FormatOf(output)
			if cmd.Flags().Changed("format") {
				if f, err = export.ParseFormat(format); err != nil {
					return usagef("--format: %q is not supported (csv, xlsx)", format)
				}
			}
			if output == "-" && f == export.FormatXLSX && isTerminal(g.stdout) {
				return usagef("-o -: an XLSX workbook is binary and standard output is a terminal; " +
					"redirect it to a file or name one with -o FILE.xlsx")
			}
			if st, err := os.Stat(output); err == nil && st.IsDir() {
				return usagef("-o: %s is a directory; name a file", output)
			}
			sts, err := statusFlag(statuses)
			if err != nil {
				return err
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				if _, err := env.Store.GetJob(ctx, id); err != nil {
					return err
				}
				var w io.Writer = g.stdout
				var tmp *os.File
				if output != "-" {
					dir := filepath.Dir(output)
					if st, err := os.Stat(dir); err != nil || !st.IsDir() {
						return fmt.Errorf("cannot write %s: directory %s does not exist", output, dir)
					}
					// Write next to the target and rename at the end, so a
					// failed export never leaves a half file under its name.
					tmp, err = os.CreateTemp(dir, ".sluice-export-*")
					if err != nil {
						return fmt.Errorf("cannot write %s: %w", output, err)
					}
					defer os.Remove(tmp.Name())
					w = tmp
				}
				// The export's live heap is small and bounded (a few batches of
				// items, the spool's buffer, excelize's 16 MiB chunk) while it
				// allocates about a kilobyte per row: a heap allowed to grow to
				// three times the live data halves the collections, for a few
				// tens of MB.
				if os.Getenv("GOGC") == "" {
					debug.SetGCPercent(200)
				}
				bw := bufio.NewWriterSize(w, 256<<10)
				n, err := export.Write(ctx, env.Store, id, sts, f, bw)
				if err == nil {
					err = bw.Flush()
				}
				if err != nil {
					return fmt.Errorf("export job %d: %w", id, err)
				}
				if tmp != nil {
					if err := tmp.Close(); err != nil {
						return fmt.Errorf("write %s: %w", output, err)
					}
					// CreateTemp makes 0600 files; an export is an ordinary file.
					if err := os.Chmod(tmp.Name(), 0o644); err != nil {
						return fmt.Errorf("write %s: %w", output, err)
					}
					if err := os.Rename(tmp.Name(), output); err != nil {
						return fmt.Errorf("write %s: %w", output, err)
					}
					fmt.Fprintf(g.stderr, "exported %d rows of job %d to %s (%s)\n", n, id, output, f)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "file format: csv or xlsx (default: from the -o file's extension; csv for -)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output file, - for standard output")
	cmd.Flags().StringVar(&statuses, "status", "", "only items in these statuses (as the grid's filter)")
	return cmd
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

func newReprocessCmd(g *globals) *cobra.Command {
	var statuses, items string
	var reset, asJSON bool
	cmd := &cobra.Command{
		Use:   "reprocess JOB_ID",
		Short: "Put failed (or chosen) items back in the queue",
		Long: `Put a job's items back to PENDING so that workers process them again:
by default every ERROR and NOT_FOUND item; --status picks other terminal
statuses, --items picks items by id. PENDING and PROCESSING items are never
touched. The job goes back to QUEUED.`,
		Example: `  sluice reprocess 1
  sluice reprocess 1 --status NOT_FOUND --reset-attempts
  sluice reprocess 1 --items 17,18,40`,
		Args: exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0], "job ID")
			if err != nil {
				return err
			}
			sts, err := statusFlag(statuses)
			if err != nil {
				return err
			}
			var ids []int64
			for _, s := range strings.Split(items, ",") {
				if s = strings.TrimSpace(s); s == "" {
					continue
				}
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil || n <= 0 {
					return usagef("--items: %q is not an item id", s)
				}
				ids = append(ids, n)
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				n, err := env.Store.ReprocessItems(ctx, &engine.ReprocessParams{JobID: id, ItemIDs: ids, Statuses: sts, ResetAttempts: reset, Now: time.Now()})
				if err != nil {
					return err
				}
				env.Log.Debug("items reprocessed", "job_id", id, "items", n, "statuses", statuses, "reset_attempts", reset)
				if asJSON {
					return writeJSONCompact(g.stdout, map[string]any{"jobId": id, "reprocessed": n})
				}
				fmt.Fprintf(g.stdout, "job %d: %d items back in the queue\n", id, n)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&statuses, "status", "", "statuses to reprocess (default ERROR,NOT_FOUND)")
	cmd.Flags().StringVar(&items, "items", "", "item ids to reprocess (comma separated)")
	cmd.Flags().BoolVar(&reset, "reset-attempts", false, "start the attempt count again from zero")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newStateCmd(g *globals, verb string) *cobra.Command {
	ch := engine.JobControls[verb]
	var asJSON bool
	cmd := &cobra.Command{
		Use:   verb + " JOB_ID",
		Short: ch.Short,
		Args:  exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withJob(cmd, args[0], func(ctx context.Context, env *Env, id int64) error {
				j, err := env.Store.SetJobState(ctx, &engine.SetJobStateParams{JobID: id, From: ch.From, To: ch.To, Now: time.Now()})
				if err != nil {
					return err
				}
				env.Log.Debug("job state changed", "job_id", j.ID, "state", j.State, "by", verb)
				if ch.To == engine.JobQueued {
					env.Notifier.Notify()
				}
				if asJSON {
					return writeJSON(g.stdout, engine.ViewJob(j, time.Now()))
				}
				fmt.Fprintf(g.stdout, "job %d: %s\n", j.ID, j.State)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the job as JSON")
	return cmd
}

func newDeleteCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete JOB_ID",
		Short: "Delete a job with its items, attempts and stored file",
		Args:  exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withJob(cmd, args[0], func(ctx context.Context, env *Env, id int64) error {
				f, err := env.Store.DeleteJob(ctx, id)
				if err != nil {
					return err
				}
				if f != nil && f.StoredPath != "" {
					p := f.StoredPath
					if !strings.HasPrefix(p, "/") {
						p = env.Data + string(os.PathSeparator) + p
					}
					if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
						env.Log.Warn("could not remove stored file", "path", p, "err", err)
					}
				}
				env.Log.Debug("job deleted", "job_id", id)
				fmt.Fprintf(g.stdout, "job %d deleted\n", id)
				return nil
			})
		},
	}
}
