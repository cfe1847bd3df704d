package adapt_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine/adapt"
)

// requireConfigErrors checks that err lists exactly the messages want.
func requireConfigErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		require.NoError(t, err)
		return
	}
	require.Error(t, err)
	require.ErrorIs(t, err, adapt.ErrInvalidConfig)
	var ce *adapt.ConfigError
	require.ErrorAs(t, err, &ce)
	require.Contains(t, ce.Message, ce.Field)
	var got []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			got = append(got, e.Error())
		}
	} else {
		got = []string{err.Error()}
	}
	require.Equal(t, want, got)
}

func TestIngestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  adapt.IngestConfig
		want []string
	}{
		{name: "zero value is valid", cfg: adapt.IngestConfig{}},
		{name: "explicit valid", cfg: adapt.IngestConfig{StartRows: 10, MinRows: 1, MaxRows: 10, MaxBatchBytes: 1, TargetP50: time.Millisecond, TargetP95: time.Millisecond}},
		{name: "small MaxRows pulls the unset defaults down", cfg: adapt.IngestConfig{MaxRows: 8}},
		{name: "large MinRows pushes the unset defaults up", cfg: adapt.IngestConfig{MinRows: 50000}},
		{name: "small P95 pulls the unset P50 down", cfg: adapt.IngestConfig{TargetP95: 10 * time.Millisecond}},
		{name: "min above max", cfg: adapt.IngestConfig{MinRows: 100, MaxRows: 50},
			want: []string{"INGEST_MIN_ROWS (100) must be ≤ INGEST_MAX_ROWS (50)"}},
		{name: "start outside bounds", cfg: adapt.IngestConfig{StartRows: 5},
			want: []string{"INGEST_START_ROWS (5) must be between INGEST_MIN_ROWS (16) and INGEST_MAX_ROWS (20000)"}},
		{name: "negatives", cfg: adapt.IngestConfig{MinRows: -1, MaxRows: -2, MaxBatchBytes: -3, TargetP50: -time.Second, TargetP95: -time.Second},
			want: []string{
				"INGEST_MIN_ROWS must be ≥ 1 (got -1)",
				"INGEST_MAX_ROWS must be ≥ 1 (got -2)",
				"INGEST_MAX_BATCH_BYTES must be ≥ 1 (got -3)",
				"INGEST_TARGET_P50 must be > 0 (got -1s)",
				"INGEST_TARGET_P95 must be > 0 (got -1s)",
			}},
		{name: "p50 above p95", cfg: adapt.IngestConfig{TargetP50: 300 * time.Millisecond, TargetP95: 250 * time.Millisecond},
			want: []string{"INGEST_TARGET_P50 (300ms) must be ≤ INGEST_TARGET_P95 (250ms)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireConfigErrors(t, tt.cfg.Validate(), tt.want)
		})
	}
}

func TestIngestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, adapt.IngestConfig{
		StartRows: 64, MinRows: 16, MaxRows: 20000, MaxBatchBytes: 4 << 20,
		TargetP50: 50 * time.Millisecond, TargetP95: 250 * time.Millisecond,
	}, adapt.IngestConfig{}.WithDefaults())

	c := adapt.IngestConfig{MaxRows: 8, TargetP95: 10 * time.Millisecond}.WithDefaults()
	require.Equal(t, 8, c.MinRows)
	require.Equal(t, 8, c.StartRows)
	require.Equal(t, 10*time.Millisecond, c.TargetP50)

	c = adapt.IngestConfig{MinRows: 50000, TargetP50: time.Second}.WithDefaults()
	require.Equal(t, 50000, c.MaxRows)
	require.Equal(t, 50000, c.StartRows)
	require.Equal(t, time.Second, c.TargetP95)

	set := adapt.IngestConfig{StartRows: 1, MinRows: 1, MaxRows: 2, MaxBatchBytes: 3, TargetP50: 4, TargetP95: 5}
	require.Equal(t, set, set.WithDefaults(), "set values are kept")
}

func TestClaimConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  adapt.ClaimConfig
		want []string
	}{
		{name: "zero value is valid", cfg: adapt.ClaimConfig{}},
		{name: "large Min pushes the unset Max up", cfg: adapt.ClaimConfig{Min: 5000}},
		{name: "safety one is valid", cfg: adapt.ClaimConfig{Safety: 1}},
		{name: "min above max", cfg: adapt.ClaimConfig{Min: 10, Max: 5},
			want: []string{"CLAIM_MIN (10) must be ≤ CLAIM_MAX (5)"}},
		{name: "safety above one", cfg: adapt.ClaimConfig{Safety: 1.5},
			want: []string{"CLAIM_SAFETY must be in (0, 1] (got 1.5)"}},
		{name: "negatives", cfg: adapt.ClaimConfig{TargetSlice: -time.Second, Min: -1, Max: -1, Safety: -0.5, Concurrency: -2},
			want: []string{
				"CLAIM_TARGET_SLICE must be > 0 (got -1s)",
				"CLAIM_MIN must be ≥ 1 (got -1)",
				"CLAIM_MAX must be ≥ 1 (got -1)",
				"CLAIM_SAFETY must be in (0, 1] (got -0.5)",
				"CLAIM_CONCURRENCY must be ≥ 1 (got -2)",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireConfigErrors(t, tt.cfg.Validate(), tt.want)
		})
	}
}

func TestClaimConfigWithDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, adapt.ClaimConfig{TargetSlice: 5 * time.Second, Min: 1, Max: 1000, Safety: 0.7, Concurrency: 1},
		adapt.ClaimConfig{}.WithDefaults())
	require.Equal(t, 5000, adapt.ClaimConfig{Min: 5000}.WithDefaults().Max)
}

func TestLeaseConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  adapt.LeaseConfig
		want []string
	}{
		{name: "zero value is valid", cfg: adapt.LeaseConfig{}},
		{name: "small cap pulls the unset floor down", cfg: adapt.LeaseConfig{Cap: 10 * time.Second}},
		{name: "large floor pushes the unset cap up", cfg: adapt.LeaseConfig{Floor: time.Hour}},
		{name: "floor above cap", cfg: adapt.LeaseConfig{Floor: time.Minute, Cap: time.Second},
			want: []string{"LEASE_FLOOR (1m0s) must be ≤ LEASE_CAP (1s)"}},
		{name: "negatives", cfg: adapt.LeaseConfig{Floor: -time.Second, Cap: -time.Second},
			want: []string{"LEASE_FLOOR must be > 0 (got -1s)", "LEASE_CAP must be > 0 (got -1s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireConfigErrors(t, tt.cfg.Validate(), tt.want)
		})
	}
}

func TestLeaseConfigWithDefaults(t *testing.T) {
	t.Parallel()
	require.Equal(t, adapt.LeaseConfig{Floor: 30 * time.Second, Cap: 10 * time.Minute}, adapt.LeaseConfig{}.WithDefaults())
	require.Equal(t, 10*time.Second, adapt.LeaseConfig{Cap: 10 * time.Second}.WithDefaults().Floor)
	require.Equal(t, time.Hour, adapt.LeaseConfig{Floor: time.Hour}.WithDefaults().Cap)
}

func TestConfigErrorIs(t *testing.T) {
	t.Parallel()
	err := adapt.ClaimConfig{Safety: 2}.Validate()
	require.True(t, errors.Is(err, adapt.ErrInvalidConfig))
	var ce *adapt.ConfigError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, adapt.FieldClaimSafety, ce.Field)
	require.False(t, errors.Is(errors.New("other"), adapt.ErrInvalidConfig))
}
