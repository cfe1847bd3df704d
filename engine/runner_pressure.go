package engine

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"time"
)

// PressureConfig makes a runner shrink its claims while the process is
// short of CPU or memory (RunnerConfig.Pressure).
type PressureConfig struct {
	// CPUHigh is the busy share of GOMAXPROCS above which claims shrink;
	// default 0.9. A negative value ignores CPU.
	CPUHigh float64
	// MemorySoft is the memory (bytes the Go runtime holds, less what it
	// released) that counts as full; 0 = GOMEMLIMIT when set, else memory
	// is ignored. Claims shrink from MemoryHigh of it.
	MemorySoft int64
	// MemoryHigh is the share of MemorySoft above which claims shrink;
	// default 0.8.
	MemoryHigh float64
	// Interval is how often the process is measured; default 1s.
	Interval time.Duration
}

// Pressure tuning: at full load (CPU share 1, memory at MemorySoft) the
// claim size is pressureAtFull of normal, never below pressureFloor; when
// the load falls the multiplier recovers by pressureRecover per interval
// (0.25 → 1 in eight seconds), while a rise applies at once.
const (
	pressureAtFull  = 0.25
	pressureFloor   = 0.1
	pressureRecover = 0.1
)

// pressureReading is one measurement: CPU is the busy share of GOMAXPROCS
// since the last one, Mem the memory in use over MemorySoft; negative =
// unknown.
type pressureReading struct {
	CPU, Mem float64
}

// pressureGauge turns readings into the claim-size multiplier: down at
// once when the process is loaded, back up gradually when it is not.
type pressureGauge struct {
	cpuHigh, memHigh float64
	level            float64
}

func newPressureGauge(c PressureConfig) *pressureGauge {
	if c.CPUHigh == 0 {
		c.CPUHigh = 0.9
	}
	if c.MemoryHigh <= 0 || c.MemoryHigh >= 1 {
		c.MemoryHigh = 0.8
	}
	return &pressureGauge{cpuHigh: c.CPUHigh, memHigh: c.MemoryHigh, level: 1}
}

// target is the multiplier a load x (share of full) calls for with the
// threshold high: 1 up to high, pressureAtFull at 1, linear between.
func pressureTarget(x, high float64) float64 {
	if x < 0 || high <= 0 || high >= 1 || x <= high || math.IsNaN(x) {
		return 1
	}
	f := 1 - (1-pressureAtFull)*(x-high)/(1-high)
	return max(f, pressureFloor)
}

// update takes a reading and returns the new multiplier.
func (g *pressureGauge) update(r pressureReading) float64 {
	target := min(pressureTarget(r.CPU, g.cpuHigh), pressureTarget(r.Mem, g.memHigh))
	if target < g.level {
		g.level = target
	} else {
		g.level = min(target, g.level+pressureRecover)
	}
	return g.level
}

// processMeter measures this process: CPU time from /proc/self/stat (no
// CPU reading where there is none) and memory from runtime/metrics.
type processMeter struct {
	memSoft  int64
	lastCPU  time.Duration
	lastWall time.Time
	samples  []metrics.Sample
}

func newProcessMeter(memSoft int64) *processMeter {
	if memSoft <= 0 {
		if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
			memSoft = l
		}
	}
	return &processMeter{memSoft: memSoft, lastCPU: -1, samples: []metrics.Sample{
		{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"},
	}}
}

func (m *processMeter) read(now time.Time) pressureReading {
	r := pressureReading{CPU: -1, Mem: -1}
	if cpu, err := processCPU(); err == nil {
		if m.lastCPU >= 0 {
			if wall := now.Sub(m.lastWall); wall > 0 {
				r.CPU = float64(cpu-m.lastCPU) / (float64(wall) * float64(runtime.GOMAXPROCS(0)))
			}
		}
		m.lastCPU, m.lastWall = cpu, now
	}
	if m.memSoft > 0 {
		metrics.Read(m.samples)
		var used uint64
		if s := m.samples[0]; s.Value.Kind() == metrics.KindUint64 {
			used = s.Value.Uint64()
		}
		if s := m.samples[1]; s.Value.Kind() == metrics.KindUint64 {
			used -= min(used, s.Value.Uint64())
		}
		r.Mem = float64(used) / float64(m.memSoft)
	}
	return r
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux port Go runs on.
const clockTick = 100

// processCPU returns the CPU time (user + system) of this process.
func processCPU() (time.Duration, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, err
	}
	return parseProcStat(b)
}

// parseProcStat reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line; the command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("proc stat: no command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state): utime is f[11], stime f[12].
	if len(f) < 13 {
		return 0, errors.New("proc stat: too few fields")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, errors.New("proc stat: bad cpu time")
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTick, nil
}

// pressureLoop measures the process every interval and sets the claim
// controller's pressure from it.
func (r *Runner) pressureLoop(ctx context.Context) {
	c := *r.cfg.Pressure
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	g := newPressureGauge(c)
	m := newProcessMeter(c.MemorySoft)
	t := time.NewTicker(c.Interval)
	defer t.Stop()
	m.read(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			old := g.level
			level := g.update(m.read(now))
			r.claim.SetPressure(level)
			if level < 1 && old == 1 {
				r.log.Info("claims shrink under pressure", "pressure", level)
			}
		}
	}
}
