package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/postgres"
	"github.com/sluicehq/sluice/storage/sqlite"
	"github.com/sluicehq/sluice/storage/storecopy"
)

// migrateStoreOut is the --json answer of migrate-store.
type migrateStoreOut struct {
	From string `json:"from"`
	To   string `json:"to"`
	*storecopy.Result
}

func newMigrateStoreCmd(g *globals) *cobra.Command {
	var from, to string
	var batch int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "migrate-store --from DIR --to postgres://...",
		Short: "Copy an appliance's SQLite store into PostgreSQL (resumable, verified by counts)",
		Long: `Copy everything an appliance keeps in its SQLite store (the data directory
DIR) into a PostgreSQL database: accounts and API tokens, the audit log,
pipelines, jobs with their items and attempts, sources and their ledger,
command definitions, triggers, learned host rates, file records and the
stored files (images, thumbnails). Worker heartbeats and the scheduler's
lease are not copied: they belong to running processes.

Stop the appliance first: the source is read in one snapshot, and what it
writes afterwards is not copied.

Tables are copied in key order, in batches; each batch is committed in
PostgreSQL together with a progress marker, so an interrupted copy (Ctrl-C,
a lost connection) is resumed by running the same command again, and no row
is copied twice. The target must be empty (a database or schema where Sluice
has created at most its own tables) or an earlier copy of the same store.
At the end the id sequences are moved past the copied ids and every table is
counted on both sides; a difference is an error (exit 1).

Then point every machine at the new store: --store URL or SLUICE_STORE.`,
		Example: `  sluice migrate-store --from /var/lib/sluice --to postgres://sluice@db.internal/sluice
  sluice migrate-store --from ~/.local/share/sluice --to "$SLUICE_STORE" --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				from = g.data
			}
			if !postgres.IsURL(to) {
				return usagef("--to: give the target as a postgres:// URL (got %q)", redactURL(to))
			}
			if batch < 1 || batch > 10000 {
				return usagef("--batch: must be between 1 and 10000, got %d", batch)
			}
			return migrateStore(cmd.Context(), g, from, to, batch, asJSON)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "data directory of the SQLite store to copy (default: --data)")
	cmd.Flags().StringVar(&to, "to", "", "PostgreSQL URL of the target store")
	cmd.Flags().IntVar(&batch, "batch", 1000, "rows per committed batch")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the counts as JSON")
	return cmd
}

func migrateStore(ctx context.Context, g *globals, from, to string, batch int, asJSON bool) error {
	dbPath, err := filepath.Abs(filepath.Join(from, DBFile))
	if err != nil {
		return err
	}
	if _, err := os.Stat(dbPath); err != nil {
		return usagef("--from: %s holds no Sluice store (%s is missing)", from, DBFile)
	}
	src, err := sqlite.Open(ctx, dbPath, sqlite.Options{Synchronous: g.sync})
	if err != nil {
		return fmt.Errorf("open the source store in %s: %w", from, err)
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, to, postgres.Options{NoListen: true})
	if err != nil {
		return fmt.Errorf("open the target store %s: %w", redactURL(to), err)
	}
	defer dst.Close()

	// A line a second on long copies, and one when a table is through.
	var last time.Time
	var shown storecopy.Progress
	progress := func(p storecopy.Progress) {
		now := time.Now()
		if p == shown || (now.Sub(last) < time.Second && p.Copied < p.Total) {
			return
		}
		last, shown = now, p
		fmt.Fprintf(g.stderr, "copying %s: %d of %d rows\n", p.Table, p.Copied, p.Total)
	}
	res, err := storecopy.Copy(ctx, src, dst, storecopy.Options{Source: dbPath, BatchRows: batch, Progress: progress})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w (interrupted: run the same command again to continue)", err)
		}
		return err
	}
	if asJSON {
		if err := writeJSONCompact(g.stdout, migrateStoreOut{From: dbPath, To: redactURL(to), Result: res}); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TABLE\tSOURCE\tTARGET\t")
		for _, c := range res.Counts {
			mark := "ok"
			if !c.OK {
				mark = "DIFFERENT"
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", c.Table, c.Source, c.Target, mark)
		}
		tw.Flush()
		how := "copied"
		if res.Resumed {
			how = "copied (continuing an earlier run)"
		}
		fmt.Fprintf(g.stdout, "%d rows %s from %s to %s\n", res.Copied, how, dbPath, redactURL(to))
	}
	if !res.OK {
		return engine.Errorf(engine.ECONFLICT, "the row counts differ (see above): was the appliance still running? Stop it and run the command again: rows added since are copied then")
	}
	return nil
}
