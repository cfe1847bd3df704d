package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine/adapt"
)

// TestPressureGauge: a loaded process shrinks the multiplier at once, an
// idle one lets it recover step by step; unknown readings are no pressure.
func TestPressureGauge(t *testing.T) {
	g := newPressureGauge(PressureConfig{})
	require.Equal(t, 1.0, g.update(pressureReading{CPU: -1, Mem: -1}), "nothing known")
	require.Equal(t, 1.0, g.update(pressureReading{CPU: 0.5, Mem: 0.5}), "under the thresholds")
	require.InDelta(t, 0.25, g.update(pressureReading{CPU: 1, Mem: -1}), 1e-9, "CPU full")
	require.InDelta(t, 0.35, g.update(pressureReading{CPU: 0.2, Mem: 0.2}), 1e-9, "recovers gradually")
	require.InDelta(t, 0.45, g.update(pressureReading{CPU: 0.2, Mem: 0.2}), 1e-9)
	require.InDelta(t, 0.25, g.update(pressureReading{CPU: 0.2, Mem: 1}), 1e-9, "memory at the soft limit")
	require.InDelta(t, 0.1, g.update(pressureReading{CPU: 0.2, Mem: 3}), 1e-9, "never below the floor")
	for range 20 {
		g.update(pressureReading{CPU: 0.1, Mem: 0.1})
	}
	require.Equal(t, 1.0, g.level, "back to none")
	require.InDelta(t, 0.625, g.update(pressureReading{CPU: 0.95, Mem: 0.1}), 1e-9, "halfway between threshold and full")

	off := newPressureGauge(PressureConfig{CPUHigh: -1})
	require.Equal(t, 1.0, off.update(pressureReading{CPU: 1, Mem: -1}), "CPU ignored")
}

// TestPressureShrinksClaims: the gauge's multiplier shrinks the claim size.
func TestPressureShrinksClaims(t *testing.T) {
	c := adapt.NewClaim(adapt.ClaimConfig{Concurrency: 8, Max: 1000})
	for range 50 {
		c.ObserveItem(50 * time.Millisecond)
	}
	full := c.Size()
	g := newPressureGauge(PressureConfig{})
	c.SetPressure(g.update(pressureReading{CPU: 1, Mem: -1}))
	require.Less(t, c.Size(), full/2)
	for range 10 {
		c.SetPressure(g.update(pressureReading{CPU: 0, Mem: 0}))
	}
	require.Equal(t, full, c.Size())
}

func TestParseProcStat(t *testing.T) {
	line := []byte("4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 123 456 789\n")
	d, err := parseProcStat(line)
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, d, "300 ticks of 10 ms")
	_, err = parseProcStat([]byte("4242 (x) S 1"))
	require.Error(t, err)
}

// TestProcessMeterMemory: memory is read against the soft limit; CPU is
// known from the second reading on (where /proc exists).
func TestProcessMeterMemory(t *testing.T) {
	m := newProcessMeter(1 << 50)
	now := time.Now()
	r := m.read(now)
	require.Greater(t, r.Mem, 0.0)
	require.Less(t, r.Mem, 0.01)
	require.Equal(t, -1.0, r.CPU, "no CPU share from one reading")
}
