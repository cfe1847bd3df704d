package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/sqlite"
	"github.com/sluicehq/sluice/storage/storetest"
	"github.com/stretchr/testify/require"
)

func newStore(t *testing.T) engine.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "sluice.db"), sqlite.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, newStore)
}
