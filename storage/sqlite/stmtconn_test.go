package sqlite

import (
	"context"
	"database/sql/driver"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// TestStmtConnDiscarded: a write connection that database/sql discards
// takes its prepared statements with it, finalized before it closes (kept
// past the close, they crashed the process when finalized), and the next
// enqueue prepares them again on the new connection.
func TestStmtConnDiscarded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := open(t)
	enqueue := func() { enqueueOneClaimed(t, s) }
	writeConn := func(discard bool) *stmtConn {
		t.Helper()
		c, err := s.w.Conn(ctx)
		require.NoError(t, err)
		defer c.Close()
		var wc *stmtConn
		err = c.Raw(func(dc any) error {
			wc = dc.(*stmtConn)
			if discard {
				return driver.ErrBadConn
			}
			return nil
		})
		if !discard {
			require.NoError(t, err)
		}
		return wc
	}

	enqueue()
	first := writeConn(false)
	require.NotEmpty(t, first.stmts, "the enqueue's statements are kept on the connection")
	require.Same(t, first, writeConn(true), "still the one connection")
	require.Nil(t, first.stmts, "discarded: its statements were finalized as it closed")

	enqueue()
	second := writeConn(false)
	require.NotSame(t, first, second)
	require.NotEmpty(t, second.stmts)
	jobs, err := s.ListJobs(ctx, &engine.ListJobsParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
}
