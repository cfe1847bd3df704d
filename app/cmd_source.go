package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/adapters/folder"
	"github.com/sluicehq/sluice/engine"
)

func newSourcesCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sources",
		Short: "List the ingest sources (watched folders) and how they fare",
		Long: `List the ingest sources: where files arrive, the pipeline their jobs run, what
is done with a file once ingested, when the source last looked, its last error
and how many files it ingested or could not ingest. Sources run inside
'sluice --serve' and 'sluice worker'; add them with 'sluice source add'.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				srcs, err := env.Store.ListSources(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					if srcs == nil {
						srcs = []*engine.SourceRecord{}
					}
					return writeJSON(g.stdout, srcs)
				}
				if len(srcs) == 0 {
					fmt.Fprintln(g.stdout, "no sources (add one with: sluice source add folder NAME --path DIR --pipeline P)")
					return nil
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "NAME\tKIND\tWHERE\tPIPELINE\tAFTER\tPOLL\tINGESTED\tFAILED\tLAST POLL\tLAST ERROR")
				for _, s := range srcs {
					where, last := "", "-"
					if s.Kind == engine.SourceFolder {
						if c, err := folder.ParseConfig(s.Config); err == nil {
							where = c.Path
							if c.Recursive {
								where += " (recursive)"
							}
						}
					}
					if s.LastPollAt != nil {
						last = shortTime(*s.LastPollAt)
					}
					name := s.Name
					if !s.Enabled {
						name += " (disabled)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", name, s.Kind, where, s.Pipeline, s.After,
						s.Poll, s.Ingested, s.Failed, last, oneLine(s.LastError))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newSourceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "source",
		Short: "Add, remove or scan an ingest source (see 'sluice sources')",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSourceAddCmd(g), newSourceRmCmd(g), newSourceScanCmd(g))
	return cmd
}

func newSourceAddCmd(g *globals) *cobra.Command {
	var dir, pipeline, after string
	var poll, minAge time.Duration
	var recursive, reingest bool
	var ignore []string
	cmd := &cobra.Command{
		Use:   "add folder NAME --path DIR --pipeline P",
		Short: "Add a watched folder: files dropped into it become jobs",
		Long: `Add a watched folder. Every CSV or XLSX file that arrives in DIR becomes one
job on the pipeline, exactly once: a file is taken when it has not changed for
the stability window (--min-age) across two looks; names of files still being
written (*.part, *.partial, *.tmp, *.crdownload, ~$*, dotfiles, and --ignore
globs) are never taken; symbolic links are never followed.

After ingest a file is moved to DIR/done/ (--after move, the default; a file
that could not be ingested goes to DIR/failed/), deleted (--after delete;
failed files still go to failed/) or left in place (--after leave). A file
that changes after it was ingested is left alone unless --reingest-changed.

The folder is watched by 'sluice --serve' and 'sluice worker' (file events,
and a rescan every --poll as a safety net); 'sluice source scan NAME' looks
once, now.`,
		Example: `  sluice source add folder inbox --path ./inbox --pipeline noop
  sluice source add folder orders --path /srv/drop --pipeline enrich --after leave --poll 30s --recursive`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usagef("want: source add folder NAME --path DIR --pipeline P")
			}
			if args[0] != engine.SourceFolder {
				return usagef("source kind %q: only folder is supported by this build (ftp and s3 are to come)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return usagef("--path: required")
			}
			if pipeline == "" {
				return usagef("--pipeline: required")
			}
			act, err := engine.ParseAfter(after)
			if err != nil {
				return usagef("--after: %s", engine.ErrorMessage(err))
			}
			if poll < time.Second {
				return usagef("--poll: %s is below 1s", poll)
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
				return usagef("--path: %s is not a folder", dir)
			}
			cfg := folder.Config{Path: abs, Recursive: recursive, ArrivalRule: engine.ArrivalRule{
				MinAgeMS: minAge.Milliseconds(), Ignore: ignore, ReingestChanged: reingest}}
			if err := cfg.Validate(); err != nil {
				return usagef("--ignore: %s", engine.ErrorMessage(err))
			}
			raw, err := json.Marshal(cfg)
			if err != nil {
				return err
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				if _, err := env.Store.GetPipeline(ctx, pipeline); engine.IsNotFound(err) {
					return usagef("--pipeline: %q does not exist (see 'sluice pipelines')", pipeline)
				} else if err != nil {
					return err
				}
				src, err := env.Store.CreateSource(ctx, &engine.SourceRecord{Name: args[1], Kind: engine.SourceFolder, Config: raw,
					Pipeline: pipeline, After: act, Poll: poll, Enabled: true}, time.Now())
				if err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "source %s added: %s → pipeline %s (after: %s, rescan every %s)\n", src.Name, abs, src.Pipeline, src.After, src.Poll)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "path", "", "the folder to watch")
	f.StringVar(&pipeline, "pipeline", "", "the pipeline of the jobs")
	f.StringVar(&after, "after", engine.AfterMove, "after ingest: move (to done/ or failed/), delete or leave")
	f.DurationVar(&poll, "poll", folder.DefaultPoll, "rescan period (file events are the fast path)")
	f.BoolVar(&recursive, "recursive", false, "watch subfolders too")
	f.DurationVar(&minAge, "min-age", engine.DefaultMinAge, "stability window: a file unchanged this long is taken")
	f.StringSliceVar(&ignore, "ignore", nil, "more name globs to ignore (repeatable)")
	f.BoolVar(&reingest, "reingest-changed", false, "a file changed after its ingest becomes a new job")
	return cmd
}

func newSourceRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a source and its ledger (its jobs are kept; its folder is not touched)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				if err := env.Store.DeleteSource(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "source %s removed\n", args[0])
				return nil
			})
		},
	}
}

func newSourceScanCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scan NAME",
		Short: "Look at a source now and ingest every stable file (also while servers watch it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				ing, err := env.Ingester()
				if err != nil {
					return err
				}
				res, err := env.scanSource(ctx, ing, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, res)
				}
				fmt.Fprintf(g.stdout, "source %s: %d files seen, %d ingested, %d failed\n", args[0], res.Seen, res.Ingested, res.Failed)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
