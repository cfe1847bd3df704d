// Package pgtest gives tests a PostgreSQL store of their own: a fresh
// schema of the server named by SLUICE_TEST_POSTGRES, dropped at the end.
// Without the variable, tests skip, except under SLUICE_CI, where a
// missing server is a failure: there it must run.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/sluicehq/sluice/storage/postgres"
)

// EnvVar names the server: a postgres:// URL.
const EnvVar = "SLUICE_TEST_POSTGRES"

// URL returns the test server's URL, skipping (or, under SLUICE_CI,
// failing) the test when none is configured.
func URL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv(EnvVar)
	if url == "" {
		if os.Getenv("SLUICE_CI") != "" {
			tb.Fatalf("%s is not set: CI must run the PostgreSQL tests (.ci/run starts the server)", EnvVar)
		}
		tb.Skipf("%s is not set: no PostgreSQL server to test against", EnvVar)
	}
	return url
}

// Schema makes a fresh schema name and drops the schema when the test ends.
func Schema(tb testing.TB) string {
	tb.Helper()
	url := URL(tb)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		if err := postgres.DropSchema(context.Background(), url, schema); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// Open opens a store in a fresh schema; it is closed and dropped when the
// test ends.
func Open(tb testing.TB, opts postgres.Options) *postgres.Store {
	tb.Helper()
	opts.Schema = Schema(tb)
	s, err := postgres.Open(context.Background(), URL(tb), opts)
	if err != nil {
		tb.Fatalf("open postgres store: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
