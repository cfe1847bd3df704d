package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// seekPage is /items asked for by position.
type seekPage struct {
	Items []struct {
		ID  int64 `json:"id"`
		Seq int64 `json:"seq"`
	} `json:"items"`
	Next  *string `json:"next"`
	At    *int64  `json:"at"`
	Total *int64  `json:"total"`
}

func (h *harness) seek(path string) seekPage {
	h.t.Helper()
	resp, body := h.get(path, h.ownerTok)
	require.Equal(h.t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
	var p seekPage
	require.NoError(h.t, json.Unmarshal(body, &p))
	return p
}

// walkIDs lists the ids of a filter by following the keyset cursors.
func (h *harness) walkIDs(jobID int64, statuses string) []int64 {
	var ids []int64
	after := ""
	for {
		p := h.seek(fmt.Sprintf("/api/jobs/%d/items?pageSize=97&statuses=%s&after=%s", jobID, statuses, after))
		for _, it := range p.Items {
			ids = append(ids, it.ID)
		}
		if p.Next == nil {
			return ids
		}
		after = *p.Next
	}
}

// TestItemsAt: ?at=N answers the page that starts at row N of the filtered
// order (the rows a keyset walk lists from the N+1-th on), with the
// filter's total and a cursor that continues the walk, on both sides of the
// server's marks (every 250 rows) and past the end.
func TestItemsAt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.ownerJob(700)
	// Half of 400 claimed items end DONE, half ERROR, a second apart, so
	// the order differs from the seq order and mixes statuses.
	now := time.Now()
	items, err := h.st.ClaimItems(t.Context(), &engine.ClaimItemsParams{WorkerID: "w", Limit: 400, LeaseFor: time.Hour, Now: now})
	require.NoError(t, err)
	for i, it := range items {
		st := engine.ItemDone
		if i%2 == 1 {
			st = engine.ItemError
		}
		_, err := h.st.CompleteItems(t.Context(), &engine.CompleteItemsParams{WorkerID: "w", Now: now.Add(time.Duration(400-i) * time.Millisecond),
			Outcomes: []engine.Outcome{{ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Status: st, StartedAt: now, ErrorClass: engine.ClassPermanent}}})
		require.NoError(t, err)
	}
	for _, statuses := range []string{"", "DONE,ERROR", "ERROR", "PENDING"} {
		want := h.walkIDs(j.ID, statuses)
		for _, at := range []int{0, 1, 9, 249, 250, 251, 333, 499, 500, 650, len(want) - 3, len(want) - 1, len(want), len(want) + 50} {
			if at < 0 {
				continue
			}
			p := h.seek(fmt.Sprintf("/api/jobs/%d/items?at=%d&pageSize=7&statuses=%s", j.ID, at, statuses))
			require.NotNil(t, p.At)
			require.Equal(t, int64(at), *p.At)
			end := min(len(want), at+7)
			var got []int64
			for _, it := range p.Items {
				got = append(got, it.ID)
			}
			if at >= len(want) {
				require.Empty(t, got, "at %d of %d", at, len(want))
				require.Nil(t, p.Next)
				continue
			}
			require.Equal(t, want[at:end], got, "at %d, statuses %q", at, statuses)
			if at > 0 {
				require.NotNil(t, p.Total, "at %d", at)
				require.Equal(t, int64(len(want)), *p.Total)
			}
			if end == len(want) {
				require.Nil(t, p.Next, "the last page has no next")
				continue
			}
			require.NotNil(t, p.Next)
			more := h.seek(fmt.Sprintf("/api/jobs/%d/items?after=%s&pageSize=3&statuses=%s", j.ID, *p.Next, statuses))
			require.Equal(t, want[end], more.Items[0].ID, "the cursor continues the walk after row %d", end-1)
		}
	}
}

// TestItemsAtChanges: the position index follows the job: after items
// change status, a page by position is the new order's.
func TestItemsAtChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.ownerJob(600)
	before := h.walkIDs(j.ID, "PENDING")
	p := h.seek(fmt.Sprintf("/api/jobs/%d/items?at=300&pageSize=5&statuses=PENDING", j.ID))
	require.Equal(t, before[300], p.Items[0].ID)
	items, err := h.st.ClaimItems(t.Context(), &engine.ClaimItemsParams{WorkerID: "w", Limit: 100, LeaseFor: time.Hour, Now: time.Now()})
	require.NoError(t, err)
	var outs []engine.Outcome
	for _, it := range items {
		outs = append(outs, engine.Outcome{ItemID: it.ID, JobID: it.JobID, Attempt: it.Attempts, Status: engine.ItemDone, StartedAt: time.Now()})
	}
	_, err = h.st.CompleteItems(t.Context(), &engine.CompleteItemsParams{WorkerID: "w", Outcomes: outs, Now: time.Now()})
	require.NoError(t, err)
	after := h.walkIDs(j.ID, "PENDING")
	require.Len(t, after, 500)
	p = h.seek(fmt.Sprintf("/api/jobs/%d/items?at=300&pageSize=5&statuses=PENDING", j.ID))
	require.Equal(t, after[300], p.Items[0].ID)
	require.Equal(t, int64(500), *p.Total)
}

// TestItemsAtErrors: a bad position is a 400 naming the field.
func TestItemsAtErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	j := h.ownerJob(3)
	first := h.seek(fmt.Sprintf("/api/jobs/%d/items?pageSize=1", j.ID))
	for _, path := range []string{
		fmt.Sprintf("/api/jobs/%d/items?at=-1", j.ID),
		fmt.Sprintf("/api/jobs/%d/items?at=x", j.ID),
		fmt.Sprintf("/api/jobs/%d/items?at=1&after=%s", j.ID, *first.Next),
		"/api/pending?at=1",
	} {
		resp, body := h.get(path, h.ownerTok)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s: %s", path, body)
		require.Contains(t, string(body), `"at"`, path)
	}
}
