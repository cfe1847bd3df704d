package app

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newWorkerCmd(g *globals) *cobra.Command {
	var drain, asJSON bool
	var concurrency int
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Process items until stopped (or, with --drain, until nothing is left)",
		Long: `Run workers on the data directory: claim due items of runnable jobs, process
them through their pipelines, write the outcomes. Any number of workers (in
this or other processes) can share one data directory. SIGINT or SIGTERM stops
claiming, lets in-flight items finish and exits.

With --drain the worker exits once no item is PROCESSING and none is PENDING
(retries scheduled for later keep it waiting), then prints a summary.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if concurrency < 0 {
				return usagef("--concurrency: must be ≥ 1")
			}
			g.defaultLevel = "info"
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				defer env.keepHostRates(ctx)()
				r, err := env.Runner(concurrency, drain, nil)
				if err != nil {
					return err
				}
				if ing, err := env.Ingester(); err == nil && !drain {
					defer env.runSources(ctx, ing)()  // watched folders: files dropped become jobs
					defer env.runAutomation(ctx, r)() // triggers, scheduler, heartbeat
				}
				env.Log.Info("worker started", "worker_id", r.WorkerID(), "data", env.Data, "drain", drain)
				sum, err := r.Run(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, sum)
				}
				fmt.Fprintf(g.stdout, "worker %s: %d items completed in %s (%.0f items/s while busy)", sum.WorkerID,
					sum.Completed, sum.Elapsed.Round(time.Millisecond), sum.ItemsPerSec)
				for _, st := range []string{"DONE", "ERROR", "NOT_FOUND", "SKIPPED", "PENDING"} {
					if n := sum.ByStatus[st]; n > 0 {
						label := st
						if st == "PENDING" {
							label = "retry scheduled"
						}
						fmt.Fprintf(g.stdout, ", %s %d", label, n)
					}
				}
				if sum.Stale > 0 {
					fmt.Fprintf(g.stdout, ", %d outcomes dropped (lease lost)", sum.Stale)
				}
				fmt.Fprintln(g.stdout)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&drain, "drain", false, "exit once nothing is left to do")
	cmd.Flags().IntVar(&concurrency, "concurrency", 0, "items processed at once (default SLUICE_CONCURRENCY or 8)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the summary as JSON")
	return cmd
}
