package sqlite

import (
	"fmt"

	"github.com/sluicehq/sluice/engine"
)

// Item statuses are stored as small integers (migration 00012), not as
// their names: the status leads both keyset indexes, and every claim and
// completion moves an item's entries in them, so a one-byte key instead
// of a word of up to ten letters makes each of those index writes and
// comparisons cheaper (docs/BENCHMARKS.md). SQL in this package writes the
// codes as literals with the name beside them, `status = 1 /* PROCESSING
// */`; values cross the package boundary as engine.ItemStatus names, so
// nothing above the store sees the codes. The codes are part of the file
// format: never renumber them.
var statusNames = [...]engine.ItemStatus{
	0: engine.ItemPending,
	1: engine.ItemProcessing,
	2: engine.ItemDone,
	3: engine.ItemError,
	4: engine.ItemNotFound,
	5: engine.ItemSkipped,
}

// statusCode returns the stored code of st, or -1 (which no row holds)
// for a name that is not an item status.
func statusCode(st engine.ItemStatus) int64 {
	for code, name := range statusNames {
		if name == st {
			return int64(code)
		}
	}
	return -1
}

// StatusCode is statusCode for the tests of other packages that read the
// database file directly.
func StatusCode(st engine.ItemStatus) int64 { return statusCode(st) }

// statusName returns the name of a stored code.
func statusName(code int64) (engine.ItemStatus, error) {
	if code < 0 || code >= int64(len(statusNames)) {
		return "", fmt.Errorf("item status code %d is not known to this binary", code)
	}
	return statusNames[code], nil
}

// StatusNameSQL is an SQL expression naming the stored status of column
// col (for the copy to PostgreSQL, which stores the names).
func StatusNameSQL(col string) string {
	expr := "CASE " + col
	for code, name := range statusNames {
		expr += fmt.Sprintf(" WHEN %d THEN '%s'", code, name)
	}
	return expr + " END"
}

// statusCol scans a stored status code into an engine.ItemStatus.
type statusCol struct{ dst *engine.ItemStatus }

func (c statusCol) Scan(v any) error {
	code, ok := v.(int64)
	if !ok {
		return fmt.Errorf("item status: stored as %T, want an integer code", v)
	}
	name, err := statusName(code)
	if err != nil {
		return err
	}
	*c.dst = name
	return nil
}
