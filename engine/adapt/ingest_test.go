package adapt_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine/adapt"
)

// full stands for a batch of exactly the controller's current size.
const full = -1

var errBusy = errors.New("database is locked")

type commit struct {
	rows int // full, or an explicit row count
	took time.Duration
	err  error
	want int // Rows() after the commit
}

func TestIngestSequences(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name  string
		cfg   adapt.IngestConfig
		steps []commit
	}{
		{
			name: "doubles while fast",
			steps: []commit{
				{rows: full, took: 5 * ms, want: 128},
				{rows: full, took: 5 * ms, want: 256},
				{rows: full, took: 8 * ms, want: 512},
			},
		},
		{
			name: "never above MaxRows",
			cfg:  adapt.IngestConfig{MaxRows: 300},
			steps: []commit{
				{rows: full, took: ms, want: 128},
				{rows: full, took: ms, want: 256},
				{rows: full, took: ms, want: 300},
				{rows: full, took: ms, want: 300},
			},
		},
		{
			name: "short final batches do not grow it",
			steps: []commit{
				{rows: 10, took: ms, want: 64},
				{rows: 63, took: ms, want: 64},
				{rows: 64, took: ms, want: 128},
				{rows: 100, took: ms, want: 128},
			},
		},
		{
			name: "keeps the size between the targets",
			steps: []commit{
				{rows: full, took: 100 * ms, want: 64},
				{rows: full, took: 200 * ms, want: 64},
				{rows: full, took: 60 * ms, want: 64},
			},
		},
		{
			name: "halves when the average is above P95",
			cfg:  adapt.IngestConfig{StartRows: 1024},
			steps: []commit{
				{rows: full, took: 300 * ms, want: 512}, // average 300ms
				{rows: full, took: 100 * ms, want: 512}, // average 240ms: keep
				{rows: full, took: 300 * ms, want: 256}, // average 258ms
			},
		},
		{
			name: "halves on a single commit above 2×P95",
			cfg:  adapt.IngestConfig{StartRows: 1024, MaxRows: 1024},
			steps: []commit{
				{rows: full, took: 10 * ms, want: 1024},
				{rows: full, took: 501 * ms, want: 512}, // average only 157ms
				{rows: full, took: 100 * ms, want: 512},
			},
		},
		{
			name: "a slow short batch still shrinks it",
			cfg:  adapt.IngestConfig{StartRows: 1024},
			steps: []commit{
				{rows: 3, took: time.Second, want: 512},
			},
		},
		{
			name: "quarters on errors and never goes below MinRows",
			cfg:  adapt.IngestConfig{StartRows: 1024},
			steps: []commit{
				{rows: full, took: 5 * time.Second, err: errBusy, want: 256},
				{rows: full, took: time.Second, err: errBusy, want: 64},
				{rows: full, took: time.Second, err: errBusy, want: 16},
				{rows: full, took: time.Second, err: errBusy, want: 16},
			},
		},
		{
			name: "halving never goes below MinRows",
			cfg:  adapt.IngestConfig{StartRows: 40, MinRows: 30},
			steps: []commit{
				{rows: full, took: time.Second, want: 30},
				{rows: full, took: time.Second, want: 30},
			},
		},
		{
			name: "recovers after errors",
			steps: []commit{
				{rows: full, took: 0, err: errBusy, want: 16},
				{rows: full, took: 2 * ms, want: 32},
				{rows: full, took: 2 * ms, want: 64},
			},
		},
		{
			name: "stops growing once commits get long",
			cfg:  adapt.IngestConfig{StartRows: 1000},
			steps: []commit{
				{rows: full, took: 20 * ms, want: 2000},
				{rows: full, took: 40 * ms, want: 4000}, // average 26ms
				{rows: full, took: 80 * ms, want: 8000}, // average 42.2ms
				{rows: full, took: 160 * ms, want: 8000},
				{rows: full, took: 160 * ms, want: 8000},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := adapt.NewIngest(tt.cfg)
			for i, s := range tt.steps {
				rows := s.rows
				if rows == full {
					rows = g.Rows()
				}
				g.Observe(rows, rows*100, s.took, s.err)
				require.Equal(t, s.want, g.Rows(), "after step %d", i)
			}
		})
	}
}

func TestIngestDefaults(t *testing.T) {
	t.Parallel()
	g := adapt.NewIngest(adapt.IngestConfig{})
	require.Equal(t, 64, g.Rows())
	require.Equal(t, 4<<20, g.MaxBytes())
	s := g.Snapshot()
	require.Equal(t, 16, s.MinRows)
	require.Equal(t, 20000, s.MaxRows)
}

func TestIngestSnapshot(t *testing.T) {
	t.Parallel()
	g := adapt.NewIngest(adapt.IngestConfig{})
	g.Observe(64, 6400, 10*time.Millisecond, nil) // 64 → 128
	g.Observe(128, 12800, 20*time.Millisecond, nil)
	g.Observe(256, 0, 40*time.Millisecond, errBusy) // 256 → 64; latency not averaged

	s := g.Snapshot()
	require.Equal(t, 64, s.Rows)
	require.InDelta(t, 13, s.CommitEwmaMs, 1e-9) // 0.3×20 + 0.7×10
	require.InDelta(t, 40, s.LastCommitMs, 1e-9)
	require.EqualValues(t, 2, s.Commits)
	require.EqualValues(t, 1, s.Failures)
	require.EqualValues(t, 2, s.Grows)
	require.EqualValues(t, 1, s.Shrinks)
	require.EqualValues(t, 192, s.RowsCommitted)
	require.EqualValues(t, 19200, s.BytesCommitted)

	b, err := json.Marshal(s)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"rows", "minRows", "maxRows", "maxBytes", "commitEwmaMs", "lastCommitMs",
		"commits", "failures", "shrinks", "grows", "rowsCommitted", "bytesCommitted"} {
		require.Contains(t, m, k)
	}
}

func TestIngestRepairsInvalidConfig(t *testing.T) {
	t.Parallel()
	g := adapt.NewIngest(adapt.IngestConfig{StartRows: 5, MinRows: -1, MaxRows: 3, MaxBatchBytes: -1})
	s := g.Snapshot()
	require.Equal(t, 1, s.MinRows)
	require.Equal(t, 3, s.MaxRows)
	require.Equal(t, 3, s.Rows)
	require.Equal(t, adapt.DefaultIngestMaxBatchBytes, s.MaxBytes)
}
