package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/engine"
)

type kickoffOut struct {
	JobID int64 `json:"jobId"`
	// DurationMs is the slice asked for; ElapsedMs what it took.
	DurationMs int64 `json:"durationMs"`
	ElapsedMs  int64 `json:"elapsedMs"`
	// Processed counts the outcomes this slice wrote (retries included).
	Processed int64            `json:"processed"`
	ByStatus  map[string]int64 `json:"byStatus"`
	Job       engine.JobView   `json:"job"`
}

// kickoff runs one time slice of work on a job in this request (seed 000):
// a runner that claims only this job's items for durationMs, then gives
// back what it has not started. It is repeatable; workers of the server go
// on as before.
func (s *Server) kickoff(w http.ResponseWriter, r *http.Request, c *caller) error {
	j, err := s.jobFromPath(r, c)
	if err != nil {
		return err
	}
	if s.cfg.NewRunner == nil {
		return engine.Errorf(engine.ECONFLICT, "this server runs no workers")
	}
	ms := int64(5000)
	if v := r.URL.Query().Get("durationMs"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 100 || n > 60000 {
			return engine.FieldErrorf("durationMs", "%q is not a whole number from 100 to 60000", v)
		}
		ms = n
	}
	if j.State != engine.JobQueued && j.State != engine.JobRunning {
		return engine.Errorf(engine.ECONFLICT, "job %d is %s: only a QUEUED or RUNNING job can be kicked off (resume it first)", j.ID, j.State)
	}
	run, err := s.cfg.NewRunner(engine.RunnerConfig{JobID: j.ID, WorkerID: "kickoff-" + strconv.FormatInt(j.ID, 10) + "-" + strconv.FormatInt(s.now().UnixNano(), 36),
		ShutdownGrace: time.Second})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Duration(ms)*time.Millisecond)
	defer cancel()
	start := s.now()
	sum, err := run.Run(ctx)
	if err != nil {
		return err
	}
	s.audit(r, c, "job.kickoff", jobObject(j.ID), strconv.FormatInt(ms, 10)+" ms")
	if j, err = s.store.GetJob(r.Context(), j.ID); err != nil {
		return err
	}
	s.events.pokeJob(j.ID)
	return writeJSON(w, http.StatusOK, kickoffOut{JobID: j.ID, DurationMs: ms, ElapsedMs: s.now().Sub(start).Milliseconds(),
		Processed: sum.Completed, ByStatus: sum.ByStatus, Job: engine.ViewJob(j, s.now())})
}
