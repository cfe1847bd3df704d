package storecopy

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

// tableState is the progress marker of one table.
type tableState struct {
	lastKey []any // nil before the first batch
	copied  int64
	done    bool
}

// begin makes sure the target may receive this source, and returns the
// progress of an earlier run (empty for a fresh copy).
func (c *copier) begin() (map[string]tableState, error) {
	if _, err := c.dst.Exec(c.ctx, `CREATE TABLE IF NOT EXISTS `+stateTable+` (
		tbl      TEXT PRIMARY KEY,
		source   TEXT NOT NULL,
		last_key TEXT,
		copied   BIGINT NOT NULL DEFAULT 0,
		done     BOOLEAN NOT NULL DEFAULT FALSE)`); err != nil {
		return nil, fmt.Errorf("prepare the target: %w", err)
	}
	rows, err := c.dst.Query(c.ctx, `SELECT tbl, source, last_key, copied, done FROM `+stateTable)
	if err != nil {
		return nil, fmt.Errorf("read the copy's progress: %w", err)
	}
	state := map[string]tableState{}
	for rows.Next() {
		var tbl, source string
		var last *string
		var st tableState
		if err := rows.Scan(&tbl, &source, &last, &st.copied, &st.done); err != nil {
			rows.Close()
			return nil, err
		}
		if source != c.source {
			rows.Close()
			return nil, engine.Errorf(engine.ECONFLICT,
				"the target holds a copy of another store (%s), not of %s: use an empty database or schema", source, c.source)
		}
		if last != nil {
			if st.lastKey, err = decodeKey(*last); err != nil {
				rows.Close()
				return nil, fmt.Errorf("progress of %s: %w", tbl, err)
			}
		}
		state[tbl] = st
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(state) > 0 {
		return state, nil
	}
	if what, err := c.targetData(); err != nil {
		return nil, err
	} else if what != "" {
		return nil, engine.Errorf(engine.ECONFLICT,
			"the target is not empty (it holds %s) and is not an earlier copy of this store: use an empty database or schema", what)
	}
	return state, nil
}

// targetData names what the target holds beyond what a fresh store has
// (the local user, the built-in pipelines), or "" when it holds nothing.
func (c *copier) targetData() (string, error) {
	checks := []struct{ what, q string }{
		{"accounts", `SELECT EXISTS (SELECT 1 FROM users WHERE name <> 'local')`},
		{"pipelines", `SELECT EXISTS (SELECT 1 FROM pipelines WHERE name NOT IN ('noop', 'image'))`},
	}
	for _, t := range Tables {
		if t.Name != "users" && t.Name != "pipelines" {
			checks = append(checks, struct{ what, q string }{t.Name, `SELECT EXISTS (SELECT 1 FROM ` + quote(t.Name) + `)`})
		}
	}
	for _, ch := range checks {
		var found bool
		if err := c.dst.QueryRow(c.ctx, ch.q).Scan(&found); err != nil {
			return "", fmt.Errorf("look into the target: %w", err)
		}
		if found {
			return ch.what, nil
		}
	}
	return "", nil
}

// column is one copied column with the target's type.
type column struct {
	name   string
	pgType string
}

// columns returns the columns of t that both stores have, in the source's
// order, and fails when the source has one the target lacks (its data
// would be lost).
func (c *copier) columns(t Table) ([]column, error) {
	rows, err := c.src.QueryContext(c.ctx, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, t.Name)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	types := map[string]string{}
	prow, err := c.dst.Query(c.ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1`, t.Name)
	if err != nil {
		return nil, err
	}
	for prow.Next() {
		var n, typ string
		if err := prow.Scan(&n, &typ); err != nil {
			prow.Close()
			return nil, err
		}
		types[n] = typ
	}
	prow.Close()
	if len(names) == 0 || len(types) == 0 {
		return nil, fmt.Errorf("table %s is missing (source has %d columns, target %d)", t.Name, len(names), len(types))
	}
	var cols []column
	for _, n := range names {
		typ, ok := types[n]
		if !ok {
			return nil, fmt.Errorf("the target has no column %s.%s: its schema is older than the source's", t.Name, n)
		}
		cols = append(cols, column{name: n, pgType: typ})
	}
	return cols, nil
}

// copyTable copies the rows of t after st's last key, batch by batch, and
// returns how many it inserted.
func (c *copier) copyTable(t Table, st tableState) (int64, error) {
	cols, err := c.columns(t)
	if err != nil {
		return 0, err
	}
	var total int64
	if err := c.src.QueryRowContext(c.ctx, `SELECT count(*) FROM `+quote(t.Name)).Scan(&total); err != nil {
		return 0, err
	}
	names := make([]string, len(cols))
	reads := make([]string, len(cols))
	for i, col := range cols {
		names[i] = quote(col.name)
		reads[i] = cmp.Or(t.Read[col.name], names[i])
	}
	keyIdx := make([]int, len(t.Key))
	for i, k := range t.Key {
		keyIdx[i] = slices.IndexFunc(cols, func(col column) bool { return col.name == k })
		if keyIdx[i] < 0 {
			return 0, fmt.Errorf("key column %s missing", k)
		}
	}
	keyList := quoteAll(t.Key)
	batch := cmp.Or(t.Batch, c.opts.BatchRows)
	sel := `SELECT ` + strings.Join(reads, ", ") + ` FROM ` + quote(t.Name)
	var inserted int64
	for {
		q, args := sel, []any{}
		if st.lastKey != nil {
			q += ` WHERE (` + keyList + `) > (` + strings.TrimSuffix(strings.Repeat("?, ", len(t.Key)), ", ") + `)`
			args = st.lastKey
		}
		q += ` ORDER BY ` + keyList + ` LIMIT ` + strconv.Itoa(batch)
		rows, err := c.readRows(q, args, len(cols))
		if err != nil {
			return inserted, fmt.Errorf("read: %w", err)
		}
		last := st.lastKey
		if len(rows) > 0 {
			last = make([]any, len(keyIdx))
			for i, k := range keyIdx {
				last[i] = rows[len(rows)-1][k]
			}
		}
		lastJSON, err := json.Marshal(last)
		if err != nil {
			return inserted, err
		}
		done := len(rows) < batch
		err = pgx.BeginFunc(c.ctx, c.dst, func(tx pgx.Tx) error {
			if len(rows) > 0 {
				if err := insertRows(c, tx, t, cols, names, rows); err != nil {
					return err
				}
			}
			_, err := tx.Exec(c.ctx, `INSERT INTO `+stateTable+` (tbl, source, last_key, copied, done) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (tbl) DO UPDATE SET last_key = EXCLUDED.last_key, copied = EXCLUDED.copied, done = EXCLUDED.done`,
				t.Name, c.source, string(lastJSON), st.copied+int64(len(rows)), done)
			return err
		})
		if err != nil {
			return inserted, err
		}
		st.lastKey, st.copied = last, st.copied+int64(len(rows))
		inserted += int64(len(rows))
		if c.opts.Progress != nil {
			c.opts.Progress(Progress{Table: t.Name, Copied: st.copied, Total: total})
		}
		if done {
			return inserted, nil
		}
	}
}

// readRows reads the rows of one batch from the source.
func (c *copier) readRows(q string, args []any, ncols int) ([][]any, error) {
	rows, err := c.src.QueryContext(c.ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals := make([]any, ncols)
		ptrs := make([]any, ncols)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rows.Err()
}

// insertRows inserts one batch in one statement. A row already in the
// target (the local user and built-in pipelines of a fresh store) takes
// the source's values.
func insertRows(c *copier, tx pgx.Tx, t Table, cols []column, names []string, rows [][]any) error {
	var b strings.Builder
	b.WriteString(`INSERT INTO ` + quote(t.Name) + ` (` + strings.Join(names, ", ") + `) VALUES `)
	args := make([]any, 0, len(rows)*len(cols))
	for r, row := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for i, v := range row {
			if i > 0 {
				b.WriteString(", ")
			}
			args = append(args, convert(v, cols[i].pgType))
			b.WriteString("$" + strconv.Itoa(len(args)))
		}
		b.WriteByte(')')
	}
	b.WriteString(` ON CONFLICT (` + quoteAll(t.Key) + `) DO `)
	var sets []string
	for _, col := range cols {
		if !slices.Contains(t.Key, col.name) {
			sets = append(sets, quote(col.name)+` = EXCLUDED.`+quote(col.name))
		}
	}
	if len(sets) == 0 {
		b.WriteString("NOTHING")
	} else {
		b.WriteString("UPDATE SET " + strings.Join(sets, ", "))
	}
	_, err := tx.Exec(c.ctx, b.String(), args...)
	return err
}

// convert turns a value read from SQLite into what the target column of
// type pgType takes.
func convert(v any, pgType string) any {
	switch pgType {
	case "boolean":
		switch x := v.(type) {
		case int64:
			return x != 0
		case float64:
			return x != 0
		}
	case "bytea":
		if s, ok := v.(string); ok {
			return []byte(s)
		}
	case "text":
		if b, ok := v.([]byte); ok {
			return string(b)
		}
	case "double precision", "real":
		if i, ok := v.(int64); ok {
			return float64(i)
		}
	}
	return v
}

// fixSequences moves each identity past the largest id copied, or past
// SQLite's AUTOINCREMENT high-water mark when that is larger (ids of
// deleted rows are never handed out again, on either store).
func (c *copier) fixSequences() error {
	high := map[string]int64{}
	rows, err := c.src.QueryContext(c.ctx, `SELECT name, seq FROM sqlite_sequence`)
	if err != nil {
		return fmt.Errorf("read the source's sequences: %w", err)
	}
	for rows.Next() {
		var n string
		var v int64
		if err := rows.Scan(&n, &v); err != nil {
			rows.Close()
			return err
		}
		high[n] = v
	}
	rows.Close()
	for _, t := range Tables {
		if t.Identity == "" {
			continue
		}
		_, err := c.dst.Exec(c.ctx, `SELECT setval(pg_get_serial_sequence($1, $2),
			GREATEST((SELECT max(`+quote(t.Identity)+`) FROM `+quote(t.Name)+`), $3, 1))`, t.Name, t.Identity, high[t.Name])
		if err != nil {
			return fmt.Errorf("move the id sequence of %s: %w", t.Name, err)
		}
	}
	// The claim line's tickets too: PostgreSQL hands them out from a
	// sequence, and a copied job whose ticket is above it would wait
	// behind every job claimed on the new store until the sequence got
	// there.
	if _, err := c.dst.Exec(c.ctx, `SELECT setval('claim_tickets', GREATEST((SELECT max(claim_ticket) FROM jobs), 1))`); err != nil {
		return fmt.Errorf("move the claim tickets' sequence: %w", err)
	}
	return nil
}

// decodeKey reads a stored last key: integers stay integers.
func decodeKey(s string) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var raw []any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	for i, v := range raw {
		if n, ok := v.(json.Number); ok {
			iv, err := n.Int64()
			if err != nil {
				return nil, errors.New("a key is not an integer: " + n.String())
			}
			raw[i] = iv
		}
	}
	return raw, nil
}

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quote(n)
	}
	return strings.Join(q, ", ")
}
