package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// ApplyDefinition validates a definition and stores it with its pipeline
// ("command.KEY", one command stage), so that its jobs run on every worker.
func ApplyDefinition(ctx context.Context, s Store, d *Definition, now time.Time) (*Definition, error) {
	if _, err := d.Compile(); err != nil {
		return nil, err
	}
	stored, err := s.PutDefinition(ctx, d.WithDefaults(), now)
	if err != nil {
		return nil, err
	}
	if _, err := s.PutPipeline(ctx, &PutPipelineParams{Pipeline: stored.Pipeline(), Now: now}); err != nil {
		return nil, err
	}
	return stored, nil
}

// JobRequest is a one-item job to start: a command (Definition) with its
// payload, or a pipeline with the payload as its one row.
type JobRequest struct {
	UserID     int64
	Definition string
	Pipeline   string
	Payload    json.RawMessage
	Name       string
	Source     string
	SourceRef  string
	Priority   int
	DedupeKey  string
	// DedupeWindow: see CreateJobParams.
	DedupeWindow time.Duration
	Now          time.Time
}

// NewJobParams checks a JobRequest and returns the job to enqueue. An
// unknown or inactive command is refused (ENOTFOUND, ECONFLICT); a payload
// that fails the command's schema is EINVALID naming the field
// ("payload.name").
func NewJobParams(ctx context.Context, s Store, req JobRequest) (*EnqueueJobParams, error) {
	return (&catalog{store: s}).jobParams(ctx, req)
}

// catalog reads the default user, pipelines and compiled definitions that
// jobs are built from, keeping them for ttl (0: read every time). The
// scheduler keeps one across passes, so that firing many triggers does not
// read and compile the same things for each.
type catalog struct {
	store Store
	ttl   time.Duration
	mu    sync.Mutex
	at    time.Time
	user  int64
	pipes map[string]*Pipeline
	cmds  map[string]*Command
	tmpls templateCache
}

// fresh drops what is older than ttl; the caller holds mu.
func (c *catalog) fresh() {
	if c.ttl <= 0 || time.Since(c.at) > c.ttl || c.pipes == nil {
		c.at, c.user, c.pipes, c.cmds, c.tmpls = time.Now(), 0, map[string]*Pipeline{}, map[string]*Command{}, templateCache{}
	}
}

func (c *catalog) defaultUser(ctx context.Context) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fresh()
	if c.user == 0 {
		u, err := c.store.DefaultUser(ctx)
		if err != nil {
			return 0, err
		}
		c.user = u.ID
	}
	return c.user, nil
}

func (c *catalog) pipeline(ctx context.Context, name string) (*Pipeline, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fresh()
	if p, ok := c.pipes[name]; ok {
		return p, nil
	}
	p, err := c.store.GetPipeline(ctx, name)
	if IsNotFound(err) {
		return nil, Errorf(ENOTFOUND, "pipeline %q does not exist", name)
	}
	if err != nil {
		return nil, err
	}
	c.pipes[name] = p
	return p, nil
}

func (c *catalog) command(ctx context.Context, key string) (*Command, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fresh()
	if cmd, ok := c.cmds[key]; ok {
		return cmd, nil
	}
	d, err := c.store.GetDefinition(ctx, key)
	if IsNotFound(err) {
		return nil, Errorf(ENOTFOUND, "command %q is not defined: refused (see sluice definitions)", key)
	}
	if err != nil {
		return nil, err
	}
	if !d.IsActive() {
		return nil, Errorf(ECONFLICT, "command %q is not active: refused", key)
	}
	cmd, err := d.Compile()
	if err != nil {
		return nil, fmt.Errorf("command %s: stored definition: %w", d.Key, err)
	}
	c.cmds[key] = cmd
	return cmd, nil
}

// render renders a trigger's payload with the templates kept here.
func (c *catalog) render(t *Trigger, data map[string]any) (json.RawMessage, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fresh()
	return t.renderPayload(data, c.tmpls)
}

func (c *catalog) jobParams(ctx context.Context, req JobRequest) (*EnqueueJobParams, error) {
	if (req.Definition == "") == (req.Pipeline == "") {
		return nil, FieldErrorf("definition", "give exactly one of definition and pipeline")
	}
	if len(req.Payload) == 0 {
		req.Payload = json.RawMessage(`{}`)
	}
	if req.UserID == 0 {
		uid, err := c.defaultUser(ctx)
		if err != nil {
			return nil, err
		}
		req.UserID = uid
	}
	p := &EnqueueJobParams{Job: CreateJobParams{UserID: req.UserID, Name: req.Name, Source: req.Source,
		SourceRef: req.SourceRef, Priority: req.Priority, DedupeKey: req.DedupeKey, DedupeWindow: req.DedupeWindow, Now: req.Now}}
	item := NewItem{Seq: 1, Input: req.Payload, Status: ItemPending}
	if req.Definition != "" {
		cmd, err := c.command(ctx, req.Definition)
		if err != nil {
			return nil, err
		}
		if err := cmd.CheckPayload(req.Payload); err != nil {
			return nil, err
		}
		// A command gets its payload exactly as given: the schema and the
		// argument templates name its keys.
		item.Normalized = req.Payload
		p.Job.Pipeline, p.Job.MaxAttempts = cmd.Def.PipelineName(), cmd.Def.MaxAttempts
		if p.Job.Name == "" {
			p.Job.Name = cmd.Def.Key
		}
	} else {
		pl, err := c.pipeline(ctx, req.Pipeline)
		if err != nil {
			return nil, err
		}
		norm, err := NormalizeObject(req.Payload)
		if err != nil {
			return nil, FieldErrorf("payload", "%v", err)
		}
		item.Normalized = norm
		p.Job.Pipeline, p.Job.MaxAttempts, p.Job.RequestCap = pl.Name, pl.MaxLeaseAttempts(), pl.MaxRequestsPerJob
		p.Job.Priority += pl.Priority
	}
	p.Items = []NewItem{item}
	return p, nil
}

// StartJob enqueues a one-item job (sluice definition run, POST
// /api/definitions/{key}/run) and wakes this process's workers.
func StartJob(ctx context.Context, s Store, n *Notifier, req JobRequest) (*Job, error) {
	p, err := NewJobParams(ctx, s, req)
	if err != nil {
		return nil, err
	}
	j, err := s.EnqueueJob(ctx, p)
	if err != nil {
		return nil, err
	}
	n.Notify()
	return j, nil
}

// AddTrigger validates a new trigger, computes a schedule's first fire
// time and stores it (enabled).
func AddTrigger(ctx context.Context, s Store, t *Trigger, now time.Time) (*Trigger, error) {
	if err := t.Validate(ctx, s); err != nil {
		return nil, err
	}
	t.Enabled = true
	t.NextFireAt = nil
	if t.Kind == TriggerSchedule {
		sched, err := ParseSchedule(t.Cron, t.TZ)
		if err != nil {
			return nil, err
		}
		next := sched.Next(now)
		t.NextFireAt = &next
	}
	return s.CreateTrigger(ctx, t, now)
}

// TriggerPatch is a change to a trigger: nil fields stay as they are.
type TriggerPatch struct {
	Enabled      *bool            `json:"enabled,omitempty"`
	Cron         *string          `json:"cron,omitempty"`
	TZ           *string          `json:"tz,omitempty"`
	Definition   *string          `json:"definition,omitempty"`
	Pipeline     *string          `json:"pipeline,omitempty"`
	Payload      *json.RawMessage `json:"payload,omitempty"`
	Priority     *int             `json:"priority,omitempty"`
	DedupeWindow *Duration        `json:"dedupeWindow,omitempty"`
	Missed       *string          `json:"missed,omitempty"`
}

// EditTrigger applies a patch to a trigger, validates the result as
// AddTrigger does and stores it. A schedule's next fire time is computed
// again from now when its cron or zone changed or it is enabled again (the
// ticks it missed while disabled are not run); a disabled trigger fires
// nothing. The scheduler and the event dispatcher see the change at their
// next reload.
func EditTrigger(ctx context.Context, s Store, name string, p *TriggerPatch, now time.Time) (*Trigger, error) {
	cur, err := findTrigger(ctx, s, name)
	if err != nil {
		return nil, err
	}
	t := *cur
	if p.Definition != nil {
		t.Definition, t.Pipeline = *p.Definition, ""
	}
	if p.Pipeline != nil {
		t.Pipeline = *p.Pipeline
		if p.Definition == nil {
			t.Definition = ""
		}
	}
	set(&t.Cron, p.Cron)
	set(&t.TZ, p.TZ)
	set(&t.Priority, p.Priority)
	set(&t.DedupeWindow, p.DedupeWindow)
	set(&t.Missed, p.Missed)
	set(&t.Enabled, p.Enabled)
	if p.Payload != nil {
		t.Payload = *p.Payload
	}
	if t.Kind == TriggerEvent && (p.Cron != nil || p.TZ != nil) {
		return nil, FieldErrorf("cron", "an event trigger has no schedule")
	}
	if err := t.Validate(ctx, s); err != nil {
		return nil, err
	}
	t.NextFireAt = cur.NextFireAt
	if t.Kind == TriggerSchedule && (t.Cron != cur.Cron || t.TZ != cur.TZ || (t.Enabled && !cur.Enabled) || t.NextFireAt == nil) {
		sched, err := ParseSchedule(t.Cron, t.TZ)
		if err != nil {
			return nil, err
		}
		next := sched.Next(now)
		t.NextFireAt = &next
	}
	return s.UpdateTrigger(ctx, &t, now)
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// findTrigger returns the trigger by name, ENOTFOUND naming it if none.
func findTrigger(ctx context.Context, s Store, name string) (*Trigger, error) {
	ts, err := s.ListTriggers(ctx, &ListTriggersParams{})
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, Errorf(ENOTFOUND, "trigger %q not found (see sluice triggers)", name)
}
