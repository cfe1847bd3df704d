package app

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
)

func newKickoffCmd(g *globals) *cobra.Command {
	var duration time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "kickoff JOB_ID",
		Short: "Process one time slice of a job now and report what it did",
		Long: `Run workers in this process on one job only, for --duration (seed 000's
"Process Now"), then give back what they had not started and print the job's
progress. Repeatable; other workers go on as before. The job must be QUEUED
or RUNNING (resume a paused one first).`,
		Example: `  sluice kickoff 3 --duration 10s`,
		Args:    exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if duration < 100*time.Millisecond || duration > time.Hour {
				return usagef("--duration: must be between 100ms and 1h")
			}
			return g.withJob(cmd, args[0], func(ctx context.Context, env *Env, id int64) error {
				j, err := env.Store.GetJob(ctx, id)
				if err != nil {
					return err
				}
				if j.State != engine.JobQueued && j.State != engine.JobRunning {
					return engine.Errorf(engine.ECONFLICT, "job %d is %s: only a QUEUED or RUNNING job can be kicked off (resume it first)", id, j.State)
				}
				r, err := env.KickoffRunner(engine.RunnerConfig{JobID: id, ShutdownGrace: time.Second,
					WorkerID: fmt.Sprintf("kickoff-%d-%s", id, strconv.FormatInt(time.Now().UnixNano(), 36))})
				if err != nil {
					return err
				}
				sctx, cancel := context.WithTimeout(ctx, duration)
				defer cancel()
				sum, err := r.Run(sctx)
				if err != nil {
					return err
				}
				if j, err = env.Store.GetJob(context.WithoutCancel(ctx), id); err != nil {
					return err
				}
				v := engine.ViewJob(j, time.Now())
				if asJSON {
					return writeJSON(g.stdout, map[string]any{"jobId": id, "processed": sum.Completed, "byStatus": sum.ByStatus, "job": v})
				}
				fmt.Fprintf(g.stdout, "job %d: %d outcomes in this slice; now %s, %.1f%% done (%d of %d)\n",
					id, sum.Completed, j.State, v.Percent, v.Processed, j.TotalItems)
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 5*time.Second, "how long the slice lasts")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newDeadCmd(g *globals) *cobra.Command {
	var limit int
	var replay, reset, asJSON bool
	cmd := &cobra.Command{
		Use:   "dead",
		Short: "The dead letters: items of every job that ended in ERROR (attempts spent or permanent); --replay puts them back",
		Long: `List the items of every job that ended in ERROR: their retries are spent, the
error was permanent, or they crashed their worker too often (poison). With
--replay they go back in the queue (their jobs too); --reset-attempts gives
them a whole retry budget again.`,
		Example: `  sluice dead
  sluice dead --json
  sluice dead --replay --reset-attempts`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit <= 0 || limit > 100000 {
				return usagef("--limit: must be between 1 and 100000")
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				page, err := env.Store.ListItems(ctx, &engine.ListItemsParams{Statuses: []engine.ItemStatus{engine.ItemError}, Limit: limit})
				if err != nil {
					return err
				}
				if replay {
					byJob := map[int64][]int64{}
					for _, it := range page.Items {
						byJob[it.JobID] = append(byJob[it.JobID], it.ID)
					}
					var n int64
					for job, ids := range byJob {
						m, err := env.Store.ReprocessItems(ctx, &engine.ReprocessParams{JobID: job, ItemIDs: ids, ResetAttempts: reset, Now: time.Now()})
						if err != nil {
							return fmt.Errorf("job %d: %w", job, err)
						}
						n += m
					}
					auditCLI(ctx, env, "dead.replay", fmt.Sprintf("%d jobs", len(byJob)), fmt.Sprintf("%d items", n))
					if asJSON {
						return writeJSONCompact(g.stdout, map[string]any{"replayed": n, "jobs": len(byJob), "more": page.Next != nil})
					}
					fmt.Fprintf(g.stdout, "%d items of %d jobs back in the queue\n", n, len(byJob))
					if page.Next != nil {
						fmt.Fprintf(g.stdout, "more remain: run it again (or raise --limit)\n")
					}
					return nil
				}
				if asJSON {
					items := make([]itemOut, 0, len(page.Items))
					for _, it := range page.Items {
						items = append(items, toItemOut(it))
					}
					return writeJSON(g.stdout, map[string]any{"items": items, "more": page.Next != nil})
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "JOB\tITEM\tSEQ\tATTEMPTS\tCLASS\tUPDATED\tERROR")
				for _, it := range page.Items {
					e := it.LastError
					if len(e) > 80 {
						e = e[:77] + "..."
					}
					fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\n", it.JobID, it.ID, it.Seq, it.Attempts, it.LastErrorCode, shortTime(it.UpdatedAt), e)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if page.Next != nil {
					fmt.Fprintf(g.stdout, "(more: raise --limit, or use sluice items JOB_ID --status ERROR)\n")
				}
				return nil
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 200, "at most this many items")
	cmd.Flags().BoolVar(&replay, "replay", false, "put the listed items back in the queue")
	cmd.Flags().BoolVar(&reset, "reset-attempts", false, "with --replay: start their attempt counts again")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
