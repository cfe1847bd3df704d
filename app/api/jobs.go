package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/engine"
	"github.com/sluicehq/sluice/engine/export"
)

// ownJob returns a job the caller may see: their own, or any for an admin.
// Another user's job is "not found", exactly like a missing one.
func (s *Server) ownJob(ctx context.Context, c *caller, id int64) (*engine.Job, error) {
	j, err := s.store.GetJob(ctx, id)
	if engine.IsNotFound(err) || (err == nil && j.UserID != c.user.ID && !c.user.IsAdmin()) {
		return nil, engine.Errorf(engine.ENOTFOUND, "job %d not found", id)
	}
	return j, err
}

func (s *Server) jobFromPath(r *http.Request, c *caller) (*engine.Job, error) {
	id, err := pathID(r, "id", "job")
	if err != nil {
		return nil, err
	}
	return s.ownJob(r.Context(), c, id)
}

// ownerFilter is the user id listings filter by: the caller's, or 0 (all)
// for an admin who asks for userId=all.
func ownerFilter(c *caller, v string) (int64, error) {
	switch v {
	case "", "me":
		return c.user.ID, nil
	case "all":
		if !c.user.IsAdmin() {
			return 0, engine.Errorf(engine.EFORBIDDEN, "userId=all: only an admin sees every user's work")
		}
		return 0, nil
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, engine.FieldErrorf("userId", "%q is not me, all or a user id", v)
	}
	if id != c.user.ID && !c.user.IsAdmin() {
		return 0, engine.Errorf(engine.EFORBIDDEN, "userId: only an admin sees another user's work")
	}
	return id, nil
}

func (s *Server) listJobs(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := r.URL.Query()
	owner, err := ownerFilter(c, q.Get("userId"))
	if err != nil {
		return err
	}
	p := &engine.ListJobsParams{UserID: owner}
	if p.Limit, err = intParam(q.Get("pageSize"), "pageSize", 50, 1, 500); err != nil {
		return err
	}
	if st := q.Get("states"); st != "" {
		for _, v := range strings.Split(st, ",") {
			js, err := engine.ParseJobState(strings.TrimSpace(v))
			if err != nil {
				return engine.FieldErrorf("states", "%s", engine.ErrorMessage(err))
			}
			p.States = append(p.States, js)
		}
	}
	if a := q.Get("after"); a != "" {
		if p.BeforeID, err = strconv.ParseInt(a, 10, 64); err != nil || p.BeforeID <= 0 {
			return engine.FieldErrorf("after", "%q is not the cursor a previous page gave", a)
		}
	}
	jobs, err := s.store.ListJobs(r.Context(), p)
	if err != nil {
		return err
	}
	now := s.now()
	out := struct {
		Jobs []engine.JobView `json:"jobs"`
		Next *string          `json:"next"`
	}{Jobs: make([]engine.JobView, 0, len(jobs))}
	for _, j := range jobs {
		out.Jobs = append(out.Jobs, engine.ViewJob(j, now))
	}
	if len(jobs) == p.Limit {
		next := strconv.FormatInt(jobs[len(jobs)-1].ID, 10)
		out.Next = &next
	}
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, c *caller) error {
	j, err := s.jobFromPath(r, c)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, engine.ViewJob(j, s.now()))
}

func (s *Server) deleteJob(w http.ResponseWriter, r *http.Request, c *caller) error {
	j, err := s.jobFromPath(r, c)
	if err != nil {
		return err
	}
	f, err := s.store.DeleteJob(r.Context(), j.ID)
	if err != nil {
		return err
	}
	if f != nil && f.StoredPath != "" {
		s.removeStored(f.StoredPath)
	}
	s.audit(r, c, "job.delete", jobObject(j.ID), j.Name)
	s.events.pokeJob(j.ID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// statusesParam parses ?statuses=A,B (empty = every status).
func statusesParam(r *http.Request) ([]engine.ItemStatus, error) {
	sts, err := engine.ParseItemStatuses(r.URL.Query().Get("statuses"))
	if err != nil {
		return nil, engine.FieldErrorf("statuses", "%s", engine.ErrorMessage(err))
	}
	return sts, nil
}

type columnOut struct {
	Key   string `json:"key"`
	Label string `json:"label"`
}

func (s *Server) jobColumns(w http.ResponseWriter, r *http.Request, c *caller) error {
	j, err := s.jobFromPath(r, c)
	if err != nil {
		return err
	}
	sts, err := statusesParam(r)
	if err != nil {
		return err
	}
	cols, err := s.columns(r.Context(), j, sts)
	if err != nil {
		return err
	}
	out := make([]columnOut, 0, len(cols))
	for _, col := range cols {
		out = append(out, columnOut{Key: col.Key, Label: col.Label})
	}
	return writeJSON(w, http.StatusOK, map[string]any{"columns": out})
}

// itemOut is an item in listings: a short summary of its input, never the
// whole input unless asked for.
type itemOut struct {
	ID            int64           `json:"id"`
	JobID         int64           `json:"jobId"`
	Seq           int64           `json:"seq"`
	Stage         int             `json:"stage"`
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	Result        json.RawMessage `json:"result"`
	InputSummary  string          `json:"inputSummary"`
	Input         json.RawMessage `json:"input,omitempty"`
	LastError     string          `json:"lastError,omitempty"`
	LastErrorCode string          `json:"lastErrorCode,omitempty"`
	RunAt         time.Time       `json:"runAt"`
	UpdatedAt     time.Time       `json:"updatedAt"`
}

// summaryLen bounds an input summary (in bytes, cut at a rune boundary).
const summaryLen = 120

// inputSummary is "k: v · k: v ..." of the first fields of the normalised
// input, at most summaryLen bytes.
func inputSummary(norm json.RawMessage) string {
	if len(norm) == 0 {
		return ""
	}
	var b strings.Builder
	err := export.EachField(norm, func(k, v string) bool {
		if b.Len() > 0 {
			b.WriteString(" · ")
		}
		b.WriteString(k)
		b.WriteString(": ")
		b.WriteString(v)
		return b.Len() < summaryLen
	})
	if err != nil {
		return ""
	}
	return truncate(b.String(), summaryLen)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}

func toItemOut(it *engine.Item, withInput bool) itemOut {
	res := it.Result
	if len(res) == 0 {
		res = json.RawMessage("null")
	}
	o := itemOut{ID: it.ID, JobID: it.JobID, Seq: it.Seq, Stage: it.Stage, Status: string(it.Status), Attempts: it.Attempts,
		Result: res, InputSummary: inputSummary(it.Normalized), LastError: it.LastError, LastErrorCode: it.LastErrorCode,
		RunAt: it.RunAt, UpdatedAt: it.UpdatedAt}
	if withInput {
		o.Input = it.Input
	}
	return o
}

type pageOut struct {
	Items []itemOut `json:"items"`
	Next  *string   `json:"next"`
	// At and Total answer a page asked for by position (?at=): the row it
	// starts at and the rows of the filter (Total when known).
	At    *int64 `json:"at,omitempty"`
	Total *int64 `json:"total,omitempty"`
}

// itemPage reads one keyset page for the items and pending endpoints.
func (s *Server) itemPage(r *http.Request, p *engine.ListItemsParams) (*pageOut, error) {
	return s.itemPageOf(r, nil, p)
}

// itemPageOf is itemPage; with job j, a page can also be asked for by
// position (?at=N).
func (s *Server) itemPageOf(r *http.Request, j *engine.Job, p *engine.ListItemsParams) (*pageOut, error) {
	q := r.URL.Query()
	var err error
	if p.Statuses, err = statusesParam(r); err != nil {
		return nil, err
	}
	if p.Limit, err = intParam(q.Get("pageSize"), "pageSize", 100, 1, 1000); err != nil {
		return nil, err
	}
	if a := q.Get("after"); a != "" {
		if p.After, err = engine.DecodeCursor(a); err != nil {
			return nil, engine.FieldErrorf("after", "%q is not a cursor a previous page gave", a)
		}
	}
	var at, total *int64
	if v := q.Get("at"); v != "" {
		if j == nil {
			return nil, engine.FieldErrorf("at", "a position is only known within one job's items")
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, engine.FieldErrorf("at", "%q is not a row number (0 or more)", v)
		}
		if p.After != nil {
			return nil, engine.FieldErrorf("at", "asks for a position; after for a cursor: give one of them")
		}
		at = &n
	}
	withInput := q.Get("input") == "1" || q.Get("input") == "true"
	// The summary needs the normalised input; the full input goes out only
	// when asked for.
	p.WithInput = true
	var page *engine.ItemPage
	switch {
	case at != nil && *at > 0:
		var n int64
		page, n, err = s.pageAt(r.Context(), j, p, *at)
		total = &n
	case at != nil:
		// Row 0 is the first keyset page: no index needed to show it, but
		// the grid's first jump will need one.
		page, err = s.store.ListItems(r.Context(), p)
		if m := s.cachedMarks(j, p.Statuses); m != nil {
			total = &m.Total
		} else {
			s.warmMarks(r.Context(), j, p.Statuses)
		}
	default:
		page, err = s.store.ListItems(r.Context(), p)
	}
	if err != nil {
		return nil, err
	}
	out := &pageOut{Items: make([]itemOut, 0, len(page.Items)), At: at, Total: total}
	for _, it := range page.Items {
		out.Items = append(out.Items, toItemOut(it, withInput))
	}
	if page.Next != nil {
		n := engine.EncodeCursor(page.Next)
		out.Next = &n
	}
	return out, nil
}

func (s *Server) jobItems(w http.ResponseWriter, r *http.Request, c *caller) error {
	j, err := s.jobFromPath(r, c)
	if err != nil {
		return err
	}
	page, err := s.itemPageOf(r, j, &engine.ListItemsParams{JobID: j.ID})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}

// pending is the global Pending view across jobs (seed 000), behind a flag.
func (s *Server) pending(w http.ResponseWriter, r *http.Request, c *caller) error {
	if !s.cfg.PendingView {
		return engine.Errorf(engine.ENOTFOUND, "the global pending view is turned off (SLUICE_PENDING_VIEW=0)")
	}
	q := r.URL.Query()
	owner, err := ownerFilter(c, q.Get("userId"))
	if err != nil {
		return err
	}
	if q.Get("statuses") == "" {
		q.Set("statuses", "PENDING,PROCESSING")
		r.URL.RawQuery = q.Encode()
	}
	// A job's type is its pipeline (image, a lookup, noop...).
	page, err := s.itemPage(r, &engine.ListItemsParams{UserID: owner, Pipeline: q.Get("jobType")})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}

type itemDetail struct {
	*engine.Item
	Attempts []*engine.Attempt `json:"attemptHistory"`
}

// itemFromPath returns the item named by the path's {id} when the caller
// may see it; another user's item looks exactly like a missing one.
func (s *Server) itemFromPath(r *http.Request, c *caller) (*engine.Item, error) {
	id, err := pathID(r, "id", "item")
	if err != nil {
		return nil, err
	}
	it, err := s.store.GetItem(r.Context(), id)
	if engine.IsNotFound(err) || (err == nil && it.UserID != c.user.ID && !c.user.IsAdmin()) {
		return nil, engine.Errorf(engine.ENOTFOUND, "item %d not found", id)
	}
	return it, err
}

func (s *Server) getItem(w http.ResponseWriter, r *http.Request, c *caller) error {
	it, err := s.itemFromPath(r, c)
	if err != nil {
		return err
	}
	atts, err := s.store.ListAttempts(r.Context(), it.ID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, itemDetail{Item: it, Attempts: nonNil(atts)})
}

func (s *Server) control(verb string) func(http.ResponseWriter, *http.Request, *caller) error {
	ch := engine.JobControls[verb]
	return func(w http.ResponseWriter, r *http.Request, c *caller) error {
		j, err := s.jobFromPath(r, c)
		if err != nil {
			return err
		}
		j, err = s.store.SetJobState(r.Context(), &engine.SetJobStateParams{JobID: j.ID, From: ch.From, To: ch.To, Now: s.now()})
		if err != nil {
			return err
		}
		if ch.To == engine.JobQueued && s.cfg.Notifier != nil {
			s.cfg.Notifier.Notify()
		}
		s.audit(r, c, "job."+verb, jobObject(j.ID), "")
		s.events.pokeJob(j.ID)
		return writeJSON(w, http.StatusOK, engine.ViewJob(j, s.now()))
	}
}

// reprocessIn is seed 000's reprocess body.
type reprocessIn struct {
	// Scope is "job" (every item of the job in Statuses) or "items"
	// (exactly ItemIDs).
	Scope         string   `json:"scope"`
	ItemIDs       []string `json:"itemIds"`
	Statuses      []string `json:"statuses"`
	ResetAttempts bool     `json:"resetAttempts"`
}

func (s *Server) reprocess(w http.ResponseWriter, r *http.Request, c *caller) error {
	j, err := s.jobFromPath(r, c)
	if err != nil {
		return err
	}
	var in reprocessIn
	if err := decodeJSON(w, r, &in, 8<<20); err != nil {
		return err
	}
	p := &engine.ReprocessParams{JobID: j.ID, ResetAttempts: in.ResetAttempts, Now: s.now()}
	if p.Statuses, err = engine.ParseItemStatuses(strings.Join(in.Statuses, ",")); err != nil {
		return engine.FieldErrorf("statuses", "%s", engine.ErrorMessage(err))
	}
	switch in.Scope {
	case "job", "":
		if len(in.ItemIDs) > 0 {
			return engine.FieldErrorf("itemIds", "only with scope \"items\"")
		}
	case "items":
		if len(in.ItemIDs) == 0 {
			return engine.FieldErrorf("itemIds", "scope \"items\" needs at least one item id")
		}
		for _, v := range in.ItemIDs {
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil || id <= 0 {
				return engine.FieldErrorf("itemIds", "%q is not an item id", v)
			}
			p.ItemIDs = append(p.ItemIDs, id)
		}
	default:
		return engine.FieldErrorf("scope", "%q is not \"job\" or \"items\"", in.Scope)
	}
	n, err := s.store.ReprocessItems(r.Context(), p)
	if err != nil {
		return err
	}
	if s.cfg.Notifier != nil {
		s.cfg.Notifier.Notify()
	}
	s.audit(r, c, "job.reprocess", jobObject(j.ID), fmt.Sprintf("%d items", n))
	s.events.pokeJob(j.ID)
	return writeJSON(w, http.StatusOK, map[string]any{"jobId": j.ID, "reprocessed": n})
}

// exportJob streams the grid as CSV or XLSX: the columns of /columns and
// the rows of /items under the same filters.
func (s *Server) exportJob(w http.ResponseWriter, r *http.Request, c *caller) error {
	j, err := s.jobFromPath(r, c)
	if err != nil {
		return err
	}
	sts, err := statusesParam(r)
	if err != nil {
		return err
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = "csv"
	}
	ctype, ok := exportTypes[format]
	if !ok {
		return engine.FieldErrorf("format", "%q is not csv or xlsx", format)
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="job-%d.%s"`, j.ID, format))
	w.Header().Set("Cache-Control", "no-store")
	start := s.now()
	n, err := exportWrite(r.Context(), s.store, j.ID, sts, format, w)
	if err != nil {
		return err
	}
	s.metrics.exportSeconds.WithLabelValues(format).Observe(s.now().Sub(start).Seconds())
	s.audit(r, c, "job.export", jobObject(j.ID), fmt.Sprintf("%s, %d rows", format, n))
	return nil
}

var exportTypes = map[string]string{
	"csv":  "text/csv; charset=utf-8",
	"xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}

func (s *Server) removeStored(p string) {
	if !strings.HasPrefix(p, "/") && s.cfg.DataDir != "" {
		p = s.cfg.DataDir + string(os.PathSeparator) + p
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		s.log.Warn("could not remove a stored file", "path", p, "err", err)
	}
}
