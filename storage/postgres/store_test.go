package postgres_test

import (
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/storage/postgres"
	"github.com/sluicehq/sluice/storage/postgres/pgtest"
	"github.com/sluicehq/sluice/storage/storetest"
)

// TestConformance runs the Store contract, each subtest on a fresh schema.
func TestConformance(t *testing.T) {
	pgtest.URL(t)
	storetest.Run(t, func(t *testing.T) engine.Store {
		return pgtest.Open(t, postgres.Options{MaxConns: 4})
	})
}
