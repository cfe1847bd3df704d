package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"

	"github.com/sluicehq/sluice/engine"
)

// newWorkerID returns host:pid:boot, where boot is random per process, so
// that a restarted process with a reused pid is a different worker.
func newWorkerID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// runAutomation runs the scheduler (when this process wins its lease), the
// event triggers and the worker heartbeat until ctx ends or the returned
// stop is called (which waits for them). runner may be nil (no workers in
// this process: the heartbeat still shows the process).
func (e *Env) runAutomation(ctx context.Context, runner *engine.Runner) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	a := engine.NewAutomation(engine.AutomationConfig{
		Store: e.Store, Notifier: e.Notifier, Events: e.Events, Logger: e.Log, ID: e.WorkerID, Version: Version,
		Running: func() int {
			if runner == nil {
				return 0
			}
			return runner.InFlight()
		},
	})
	// On PostgreSQL, other processes' events wake this one's dispatcher
	// (when it leads) at once instead of at its next poll.
	if w, ok := e.Store.(interface{ WakeEventsOn(*engine.Notifier) }); ok {
		w.WakeEventsOn(a.EventWake())
	}
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	return func() {
		cancel()
		wg.Wait()
	}
}
