package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/spf13/cobra"
)

func newJobsCmd(g *globals) *cobra.Command {
	var states string
	var limit int
	var before int64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List jobs, newest first",
		Example: `  sluice jobs
  sluice jobs --state RUNNING,QUEUED --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sts []engine.JobState
			for _, s := range strings.Split(states, ",") {
				s = strings.ToUpper(strings.TrimSpace(s))
				if s == "" {
					continue
				}
				st, err := engine.ParseJobState(s)
				if err != nil {
					return usagef("--state: %s", engine.ErrorMessage(err))
				}
				sts = append(sts, st)
			}
			if limit <= 0 {
				return usagef("--limit: must be ≥ 1")
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				jobs, err := env.Store.ListJobs(ctx, &engine.ListJobsParams{States: sts, Limit: limit, BeforeID: before})
				if err != nil {
					return err
				}
				if asJSON {
					views := make([]engine.JobView, 0, len(jobs))
					for _, j := range jobs {
						views = append(views, engine.ViewJob(j, time.Now()))
					}
					var next *int64
					if len(jobs) == limit {
						next = &jobs[len(jobs)-1].ID
					}
					return writeJSON(g.stdout, map[string]any{"jobs": views, "nextBefore": next})
				}
				return printJobs(g.stdout, jobs)
			})
		},
	}
	cmd.Flags().StringVar(&states, "state", "", "only jobs in these states (comma separated)")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many jobs")
	cmd.Flags().Int64Var(&before, "before", 0, "continue a listing: jobs with ids below this")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newJobCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "job ID",
		Short: "Show one job: state, counters by item status, progress",
		Args:  exactArgs(1, "one job ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withJob(cmd, args[0], func(ctx context.Context, env *Env, id int64) error {
				j, err := env.Store.GetJob(ctx, id)
				if err != nil {
					return err
				}
				v := engine.ViewJob(j, time.Now())
				if asJSON {
					return writeJSON(g.stdout, v)
				}
				tw := table(g.stdout)
				fmt.Fprintf(tw, "job\t%d\n", j.ID)
				fmt.Fprintf(tw, "name\t%s\n", j.Name)
				fmt.Fprintf(tw, "pipeline\t%s\n", j.Pipeline)
				fmt.Fprintf(tw, "state\t%s\n", j.State)
				fmt.Fprintf(tw, "items\t%d\n", j.TotalItems)
				for _, st := range engine.ItemStatuses {
					fmt.Fprintf(tw, "  %s\t%d\n", st, j.Counts.Get(st))
				}
				fmt.Fprintf(tw, "progress\t%.1f%%\n", v.Percent)
				if j.RequestLimit > 0 {
					fmt.Fprintf(tw, "requests\t%d of %d (spending cap %d per resume)\n", j.Requests, j.RequestLimit, j.RequestCap)
				} else {
					fmt.Fprintf(tw, "requests\t%d\n", j.Requests)
				}
				if v.ItemsPerSec > 0 {
					fmt.Fprintf(tw, "rate\t%.0f items/s\n", v.ItemsPerSec)
				}
				if v.ETASeconds != nil {
					fmt.Fprintf(tw, "eta\t%s\n", time.Duration(*v.ETASeconds*float64(time.Second)).Round(time.Second))
				}
				if j.LastError != "" {
					fmt.Fprintf(tw, "error\t%s\n", j.LastError)
				}
				fmt.Fprintf(tw, "created\t%s\n", shortTime(j.CreatedAt))
				if j.FinishedAt != nil {
					fmt.Fprintf(tw, "finished\t%s\n", shortTime(*j.FinishedAt))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// itemOut is an item in listings: never the full input.
type itemOut struct {
	ID            int64           `json:"id"`
	JobID         int64           `json:"jobId"`
	Seq           int64           `json:"seq"`
	Stage         int             `json:"stage"`
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	Result        json.RawMessage `json:"result"`
	Input         json.RawMessage `json:"input,omitempty"`
	LastError     string          `json:"lastError,omitempty"`
	LastErrorCode string          `json:"lastErrorCode,omitempty"`
	LockedBy      string          `json:"lockedBy,omitempty"`
	RunAt         time.Time       `json:"runAt"`
	UpdatedAt     time.Time       `json:"updatedAt"`
}

func toItemOut(it *engine.Item) itemOut {
	res := it.Result
	if len(res) == 0 {
		res = json.RawMessage("null")
	}
	return itemOut{ID: it.ID, JobID: it.JobID, Seq: it.Seq, Stage: it.Stage, Status: string(it.Status), Attempts: it.Attempts,
		Result: res, Input: it.Input, LastError: it.LastError, LastErrorCode: it.LastErrorCode, LockedBy: it.LockedBy,
		RunAt: it.RunAt, UpdatedAt: it.UpdatedAt}
}

func newItemsCmd(g *globals) *cobra.Command {
	var statuses, after string
	var limit int
	var asJSON, withInput bool
	cmd := &cobra.Command{
		Use:   "items JOB_ID",
		Short: "List a job's items, one keyset page at a time",
		Long: `List a job's items in the order of their last change (updated_at, id), one
page at a time. The listing prints the cursor of the next page; pass it with
--after. Pages cost the same at any depth (no OFFSET).`,
		Example: `  sluice items 1 --status ERROR,NOT_FOUND
  sluice items 1 --limit 100 --json
  sluice items 1 --after MTczMjYxNTIwMDAwMHw0Mg`,
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
			cur, err := engine.DecodeCursor(after)
			if err != nil {
				return usagef("--after: %s", engine.ErrorMessage(err))
			}
			if limit <= 0 || limit > 10000 {
				return usagef("--limit: must be between 1 and 10000")
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				if _, err := env.Store.GetJob(ctx, id); err != nil {
					return err
				}
				page, err := env.Store.ListItems(ctx, &engine.ListItemsParams{JobID: id, Statuses: sts, After: cur, Limit: limit, WithInput: withInput})
				if err != nil {
					return err
				}
				var next *string
				if page.Next != nil {
					s := engine.EncodeCursor(page.Next)
					next = &s
				}
				if asJSON {
					items := make([]itemOut, 0, len(page.Items))
					for _, it := range page.Items {
						items = append(items, toItemOut(it))
					}
					return writeJSON(g.stdout, map[string]any{"items": items, "next": next})
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "ID\tSEQ\tSTATUS\tATTEMPTS\tUPDATED\tRESULT / ERROR")
				for _, it := range page.Items {
					detail := string(it.Result)
					if it.LastError != "" && it.Status != engine.ItemDone {
						detail = it.LastError
					}
					if len(detail) > 80 {
						detail = detail[:77] + "..."
					}
					fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%s\t%s\n", it.ID, it.Seq, it.Status, it.Attempts, shortTime(it.UpdatedAt), detail)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if next != nil {
					fmt.Fprintf(g.stdout, "next page: sluice items %d --after %s\n", id, *next)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&statuses, "status", "", "only these statuses, e.g. ERROR,NOT_FOUND")
	cmd.Flags().IntVar(&limit, "limit", 50, "items per page")
	cmd.Flags().StringVar(&after, "after", "", "cursor of the page to show (printed by the previous page)")
	cmd.Flags().BoolVar(&withInput, "input", false, "include each item's full input")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newItemCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "item ITEM_ID",
		Short: "Show one item: input, normalised input, result and every attempt",
		Args:  exactArgs(1, "one item ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0], "item ID")
			if err != nil {
				return err
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				it, err := env.Store.GetItem(ctx, id)
				if err != nil {
					return err
				}
				attempts, err := env.Store.ListAttempts(ctx, id)
				if err != nil {
					return err
				}
				if attempts == nil {
					attempts = []*engine.Attempt{}
				}
				return writeJSON(g.stdout, map[string]any{"item": it, "attempts": attempts})
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", true, "print JSON (the only format)")
	return cmd
}
