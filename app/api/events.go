package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// The event stream (GET /api/events) sends "job" events, each a job view,
// whenever a job's state or counters change, and "job.deleted" events.
// One hub polls the store for everyone: at most every pollEvery, and only
// when the store changed or a handler of this server poked it.

const (
	pollEvery  = 500 * time.Millisecond
	pingEvery  = 15 * time.Second
	subBacklog = 256
)

type event struct {
	name   string
	userID int64
	data   []byte
}

type subscriber struct {
	user *engine.User
	ch   chan event
}

type hub struct {
	s      *Server
	pokeCh chan struct{}
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	// sent is the last view sent of each unfinished (or just finished) job.
	sent map[int64]jobKey
	// touched are jobs a handler changed: looked at on the next scan even
	// when they are finished (a reprocess that finished again between two
	// scans would otherwise go unseen).
	touched map[int64]bool
}

// jobKey is what makes a job worth a new event.
type jobKey struct {
	state   engine.JobState
	counts  engine.ItemCounts
	total   int64
	userID  int64
	updated time.Time
}

func newHub(s *Server) *hub {
	return &hub{s: s, pokeCh: make(chan struct{}, 1), subs: map[*subscriber]struct{}{}, sent: map[int64]jobKey{}, touched: map[int64]bool{}}
}

// pokeJob asks for a look at the jobs now, this one included.
func (h *hub) pokeJob(id int64) {
	h.mu.Lock()
	if len(h.subs) > 0 {
		h.touched[id] = true
	}
	h.mu.Unlock()
	h.poke()
}

// poke asks for a look at the jobs now.
func (h *hub) poke() {
	select {
	case h.pokeCh <- struct{}{}:
	default:
	}
}

func (h *hub) subscribe(u *engine.User) *subscriber {
	sub := &subscriber{user: u, ch: make(chan event, subBacklog)}
	h.mu.Lock()
	h.subs[sub] = struct{}{}
	h.mu.Unlock()
	h.poke()
	return sub
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	delete(h.subs, sub)
	h.mu.Unlock()
}

func (h *hub) listening() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0
}

// broadcast hands an event to every subscriber allowed to see it; one too
// slow to keep up loses the event rather than stalling the others (the UI
// reloads on reconnect).
func (h *hub) broadcast(ev event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if sub.user.ID != ev.userID && !sub.user.IsAdmin() {
			continue
		}
		select {
		case sub.ch <- ev:
		default:
		}
	}
}

func (h *hub) run(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	var lastVersion int64 = -1
	for {
		poked := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.pokeCh:
			poked = true
		}
		if !h.listening() {
			continue
		}
		v, err := h.s.store.ChangeCounter(ctx)
		if err != nil {
			continue
		}
		if !poked && v == lastVersion && !h.anyRunning() {
			continue
		}
		lastVersion = v
		if err := h.scan(ctx); err != nil && ctx.Err() == nil {
			h.s.log.Warn("event stream: reading jobs failed", "err", err)
		}
	}
}

// anyRunning: jobs of this process's own workers change without another
// connection committing, so while any is unfinished the hub keeps looking.
func (h *hub) anyRunning() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range h.sent {
		if !k.state.Terminal() {
			return true
		}
	}
	return false
}

var unfinished = []engine.JobState{engine.JobIngesting, engine.JobQueued, engine.JobRunning, engine.JobPaused}

// scan sends an event for every unfinished job that changed, and for jobs
// that finished or went away since the last scan.
func (h *hub) scan(ctx context.Context) error {
	jobs, err := h.s.store.ListJobs(ctx, &engine.ListJobsParams{States: unfinished, Limit: 1000})
	if err != nil {
		return err
	}
	seen := map[int64]bool{}
	now := h.s.now()
	for _, j := range jobs {
		seen[j.ID] = true
		h.maybeSend(j, now)
	}
	h.mu.Lock()
	var gone []int64
	for id := range h.touched {
		if !seen[id] {
			gone = append(gone, id)
			seen[id] = true
		}
	}
	clear(h.touched)
	for id, k := range h.sent {
		if !seen[id] {
			if k.state.Terminal() {
				delete(h.sent, id) // sent its final state already
				continue
			}
			gone = append(gone, id)
		}
	}
	h.mu.Unlock()
	for _, id := range gone {
		j, err := h.s.store.GetJob(ctx, id)
		if engine.IsNotFound(err) {
			h.mu.Lock()
			k := h.sent[id]
			delete(h.sent, id)
			h.mu.Unlock()
			data, _ := json.Marshal(map[string]int64{"id": id})
			h.broadcast(event{name: "job.deleted", userID: k.userID, data: data})
			continue
		}
		if err != nil {
			return err
		}
		h.maybeSend(j, now)
	}
	return nil
}

func (h *hub) maybeSend(j *engine.Job, now time.Time) {
	k := jobKey{state: j.State, counts: j.Counts, total: j.TotalItems, userID: j.UserID, updated: j.UpdatedAt}
	h.mu.Lock()
	old, ok := h.sent[j.ID]
	h.sent[j.ID] = k
	h.mu.Unlock()
	if ok && old == k {
		return
	}
	data, err := json.Marshal(engine.ViewJob(j, now))
	if err != nil {
		return
	}
	h.broadcast(event{name: "job", userID: j.UserID, data: data})
}

// serveEvents streams server-sent events until the client goes away.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request, c *caller) error {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// Tell the browser how soon to reconnect, and flush the headers.
	fmt.Fprint(w, "retry: 2000\n\n")
	if err := rc.Flush(); err != nil {
		return nil
	}
	sub := s.events.subscribe(c.user)
	defer s.events.unsubscribe(sub)
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-s.done:
			return nil
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
		case ev := <-sub.ch:
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, ev.data)
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}
