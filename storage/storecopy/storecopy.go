// Package storecopy copies an appliance's SQLite store into PostgreSQL
// (`sluice migrate-store`): every table of lasting data, table by table in
// key order, in batches. Each batch is inserted in one PostgreSQL
// transaction together with a progress marker (the last key copied), so a
// copy that is interrupted resumes where it stopped and never inserts a row
// twice. At the end the identity sequences are moved past the copied ids
// and every table's rows are counted on both sides.
//
// The two schemas hold the same columns with the same meanings (times are
// milliseconds on both), so rows are copied column by column; only SQLite's
// 0/1 integers become PostgreSQL booleans where the target says so.
package storecopy

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice/storage/postgres"
	"github.com/sluicehq/sluice/storage/sqlite"
)

// Table is one table copied, with the columns of its primary key (the copy
// order) and how many rows one batch carries.
type Table struct {
	Name  string
	Key   []string
	Batch int
	// Identity names the column whose sequence is moved past the copied
	// ids ("" = none).
	Identity string
	// Read gives, for a column stored differently on the two sides, the
	// SQLite expression that reads it in PostgreSQL's form.
	Read map[string]string
}

// Tables are the tables copied, parents before children. The heartbeats of
// running workers (job_workers) and the scheduler's lease (leader_leases)
// are not copied: they describe processes, which start afresh on the new
// store.
var Tables = []Table{
	{Name: "users", Key: []string{"id"}, Identity: "id"},
	{Name: "api_tokens", Key: []string{"id"}, Identity: "id"},
	{Name: "audit_log", Key: []string{"id"}, Identity: "id"},
	{Name: "files", Key: []string{"id"}, Identity: "id"},
	{Name: "pipelines", Key: []string{"name"}},
	{Name: "jobs", Key: []string{"id"}, Identity: "id"},
	// SQLite stores item statuses as codes, PostgreSQL as their names.
	{Name: "job_items", Key: []string{"id"}, Identity: "id", Read: map[string]string{"status": sqlite.StatusNameSQL("status")}},
	// Keyed by (item_id, id) on PostgreSQL (migration 6).
	{Name: "item_attempts", Key: []string{"item_id", "id"}, Identity: "id"},
	{Name: "host_rates", Key: []string{"host"}},
	{Name: "sources", Key: []string{"name"}},
	{Name: "source_objects", Key: []string{"id"}, Identity: "id"},
	{Name: "job_definitions", Key: []string{"key"}},
	{Name: "job_triggers", Key: []string{"name"}},
	{Name: "blobs", Key: []string{"id"}, Identity: "id"},
	// 1 MiB each: a few per transaction.
	{Name: "blob_chunks", Key: []string{"blob_id", "n"}, Batch: 8},
	// Events not yet fired (and handled ones not yet pruned): the new
	// store's scheduler fires what the appliance had not.
	{Name: "event_outbox", Key: []string{"id"}, Identity: "id"},
}

// stateTable records the progress of a copy in the target.
const stateTable = "sluice_store_copy"

// Options configure Copy.
type Options struct {
	// Source names the source store (its database file's absolute path);
	// with the creation time of its local user it identifies the source,
	// so that a resumed copy is known to come from the same store.
	Source string
	// BatchRows is how many rows one batch carries; default 1000.
	BatchRows int
	// Progress, when set, is called after every committed batch.
	Progress func(Progress)
}

// Progress reports how far the copy of one table is.
type Progress struct {
	Table string `json:"table"`
	// Copied counts the rows of the table copied so far (also by earlier
	// runs); Total is the source's row count.
	Copied int64 `json:"copied"`
	Total  int64 `json:"total"`
}

// Count compares a table's rows in the source and the target.
type Count struct {
	Table  string `json:"table"`
	Source int64  `json:"source"`
	Target int64  `json:"target"`
	OK     bool   `json:"ok"`
}

// Result is what Copy did.
type Result struct {
	// Resumed tells that an earlier, interrupted copy was continued.
	Resumed bool `json:"resumed"`
	// Copied counts the rows this run inserted.
	Copied int64   `json:"copied"`
	Counts []Count `json:"counts"`
	// OK is true when every table has as many rows in the target as in
	// the source.
	OK bool `json:"ok"`
}

// Copy copies src into dst (both open and migrated). It refuses a target
// that holds data unless it is an earlier copy of the same source, which
// it continues. The source is read in one snapshot; the appliance should
// be stopped while it runs.
func Copy(ctx context.Context, src *sqlite.Store, dst *postgres.Store, opts Options) (*Result, error) {
	if opts.BatchRows <= 0 {
		opts.BatchRows = 1000
	}
	stx, err := src.ReadDB().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	defer stx.Rollback() //nolint:errcheck // read-only
	var born int64
	if err := stx.QueryRowContext(ctx, `SELECT created_at FROM users WHERE id = 1`).Scan(&born); err != nil {
		return nil, fmt.Errorf("read source: the local user: %w", err)
	}
	c := &copier{ctx: ctx, src: stx, dst: dst.Pool(), opts: opts, source: fmt.Sprintf("%s#%d", opts.Source, born)}
	state, err := c.begin()
	if err != nil {
		return nil, err
	}
	res := &Result{Resumed: len(state) > 0, OK: true}
	for _, t := range Tables {
		// A table copied to its end by an earlier run is read again from
		// its last key: rows added since are copied, the rest costs one
		// query.
		n, err := c.copyTable(t, state[t.Name])
		res.Copied += n
		if err != nil {
			return res, fmt.Errorf("copy %s: %w", t.Name, err)
		}
	}
	if err := c.fixSequences(); err != nil {
		return res, err
	}
	for _, t := range Tables {
		var cnt Count
		cnt.Table = t.Name
		if err := stx.QueryRowContext(ctx, `SELECT count(*) FROM `+quote(t.Name)).Scan(&cnt.Source); err != nil {
			return res, fmt.Errorf("count %s in the source: %w", t.Name, err)
		}
		if err := c.dst.QueryRow(ctx, `SELECT count(*) FROM `+quote(t.Name)).Scan(&cnt.Target); err != nil {
			return res, fmt.Errorf("count %s in the target: %w", t.Name, err)
		}
		cnt.OK = cnt.Source == cnt.Target
		res.OK = res.OK && cnt.OK
		res.Counts = append(res.Counts, cnt)
	}
	return res, nil
}

// copier holds one run of Copy.
type copier struct {
	ctx    context.Context
	src    *sql.Tx
	dst    *pgxpool.Pool
	opts   Options
	source string
}
