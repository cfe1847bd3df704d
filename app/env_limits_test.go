package app

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTuningLimitsFromEnv(t *testing.T) {
	t.Setenv("SLUICE_MAX_INFLIGHT_PER_JOB", "20")
	t.Setenv("SLUICE_MAX_INFLIGHT_PER_USER", "50")
	t.Setenv("SLUICE_CPU_HIGH_PERCENT", "75")
	t.Setenv("SLUICE_MEMORY_SOFT_MB", "512")
	tu, err := TuningFromEnv()
	require.NoError(t, err)
	require.Equal(t, 20, tu.MaxInFlightPerJob)
	require.Equal(t, 50, tu.MaxInFlightPerUser)
	require.InDelta(t, 0.75, tu.Pressure.CPUHigh, 1e-9)
	require.Equal(t, int64(512<<20), tu.Pressure.MemorySoft)

	t.Setenv("SLUICE_MAX_INFLIGHT_PER_USER", "-1")
	_, err = TuningFromEnv()
	require.ErrorContains(t, err, "SLUICE_MAX_INFLIGHT_PER_USER")
}
