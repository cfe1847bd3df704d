package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/sluicehq/sluice/engine/tabular"
)

// EnqueueRequest is a small job given as rows (JSON objects) rather than a
// file: API item lists, triggers, benchmarks.
type EnqueueRequest struct {
	UserID    int64
	Pipeline  string
	Name      string
	Source    string
	SourceRef string
	Priority  int
	Rows      []json.RawMessage
}

// MaxEnqueueRows bounds Enqueue, which writes one transaction; larger inputs
// go through IngestCSV's batches.
const MaxEnqueueRows = 10000

// Enqueue stores a job and all its rows in one transaction and wakes the
// workers of this process; a one-item job's item may instead be handed to
// an idle worker of this process, claimed in the same transaction.
func (g *Ingester) Enqueue(ctx context.Context, req EnqueueRequest) (*Job, error) {
	if len(req.Rows) > MaxEnqueueRows {
		return nil, FieldErrorf("items", "at most %d rows per request (got %d); upload a file instead", MaxEnqueueRows, len(req.Rows))
	}
	pl, err := g.resolve(ctx, &req.UserID, &req.Pipeline)
	if err != nil {
		return nil, err
	}
	items := make([]NewItem, len(req.Rows))
	for i, row := range req.Rows {
		norm, err := NormalizeObject(row)
		if err != nil {
			return nil, FieldErrorf(fmt.Sprintf("items[%d]", i), "%v", err)
		}
		items[i] = NewItem{Seq: int64(i + 1), Input: row, Normalized: norm, Status: ItemPending}
	}
	p := &EnqueueJobParams{
		Job: CreateJobParams{UserID: req.UserID, Pipeline: pl.Name, Name: req.Name, Source: req.Source,
			SourceRef: req.SourceRef, Priority: req.Priority + pl.Priority, MaxAttempts: pl.MaxLeaseAttempts(), RequestCap: pl.MaxRequestsPerJob, Now: g.clock.Now()},
		Items: items,
	}
	// A one-item job goes straight to an idle worker when one takes it
	// (enqueue_direct.go).
	if job, done, err := g.enqueueDirect(ctx, p); done || err != nil {
		return job, err
	}
	job, err := g.store.EnqueueJob(ctx, p)
	if err != nil {
		return nil, err
	}
	g.notifier.Notify()
	return job, nil
}

// NormalizeObject returns a JSON object's normalised form: keys made
// canonical (as for CSV headers), string values trimmed, other values kept.
func NormalizeObject(row json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(row, &m); err != nil || m == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]json.RawMessage, len(m))
	for i, k := range keys {
		nk := tabular.NormalizeKey(k)
		if nk == "" {
			nk = fmt.Sprintf("column_%d", i+1)
		}
		for base, n := nk, 2; ; n++ {
			if _, dup := out[nk]; !dup {
				break
			}
			nk = fmt.Sprintf("%s_%d", base, n)
		}
		v := m[k]
		var s string
		if len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil {
			v, _ = json.Marshal(strings.TrimSpace(s))
		}
		out[nk] = v
	}
	return json.Marshal(out)
}
