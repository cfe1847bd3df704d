package export

import (
	"context"
	"testing"

	"github.com/sluicehq/sluice/engine"
	"github.com/stretchr/testify/require"
)

func TestColumnsFirstSeenOrder(t *testing.T) {
	t.Parallel()
	s := &fakeStore{items: []*engine.Item{
		item(3, engine.ItemDone, `{"c":1,"a":2}`),
		item(1, engine.ItemDone, ` { "z" : 1 , "b" : {"nested":{"q":1}} } `),
		item(2, engine.ItemPending, ""),
		item(4, engine.ItemDone, `null`),
		item(5, engine.ItemDone, `{}`),
		item(6, engine.ItemDone, `{"\u0078":1,"b":2,"x":3,"y\"q":4,"é":5}`),
		{ID: 1, JobID: testJob + 1, Seq: 1, Result: []byte(`{"otherjob":1}`)},
	}}
	cols, err := Columns(context.Background(), s, testJob, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"seq", "status", "attempts", "error", "z", "b", "c", "a", "x", `y"q`, "é"}, keys(cols))
	require.Equal(t, []string{"Seq", "Status", "Attempts", "Error", "z", "b", "c", "a", "x", `y"q`, "é"}, labels(cols))
	require.Equal(t, 1, s.scans)
}

func TestColumnsNoItems(t *testing.T) {
	t.Parallel()
	cols, err := Columns(context.Background(), &fakeStore{}, testJob, nil)
	require.NoError(t, err)
	require.Equal(t, fixedColumns, cols)
	cols[0].Label = "changed"
	require.Equal(t, "Seq", fixedColumns[0].Label, "Columns must return a copy")
}

func TestColumnsKeyCollision(t *testing.T) {
	t.Parallel()
	s := &fakeStore{items: []*engine.Item{
		{ID: 1, JobID: testJob, Seq: 1, Status: engine.ItemError, Attempts: 3, LastError: "timeout",
			Result: []byte(`{"status":"ok","seq":"r7","Error":"E","result.x":1,"error":"boom","attempts":0,"name":"n"}`)},
	}}
	cols, err := Columns(context.Background(), s, testJob, nil)
	require.NoError(t, err)
	require.Equal(t, []Column{
		{Key: "seq", Label: "Seq"},
		{Key: "status", Label: "Status"},
		{Key: "attempts", Label: "Attempts"},
		{Key: "error", Label: "Error"},
		{Key: "result.status", Label: "status (result)"},
		{Key: "result.seq", Label: "seq (result)"},
		{Key: "Error", Label: "Error (result)"},
		{Key: "result.result.x", Label: "result.x"},
		{Key: "result.error", Label: "error (result)"},
		{Key: "result.attempts", Label: "attempts (result)"},
		{Key: "name", Label: "name"},
	}, cols)

	cells, err := Cells(s.items[0], cols)
	require.NoError(t, err)
	require.Equal(t, []string{"1", "ERROR", "3", "timeout", "ok", "r7", "E", "1", "boom", "0", "n"}, cells)
}

func TestColumnsStatuses(t *testing.T) {
	t.Parallel()
	s := &fakeStore{items: []*engine.Item{
		item(1, engine.ItemDone, `{"done":1}`),
		item(2, engine.ItemNotFound, `{"nf":1}`),
		item(3, engine.ItemError, `{"err":1,"done":2}`),
	}}
	cols, err := Columns(context.Background(), s, testJob, []engine.ItemStatus{engine.ItemError, engine.ItemNotFound})
	require.NoError(t, err)
	require.Equal(t, []string{"seq", "status", "attempts", "error", "nf", "err", "done"}, keys(cols))
}

func TestColumnsBadResult(t *testing.T) {
	t.Parallel()
	for _, result := range []string{`{"a":`, `[1,2]`, `"text"`, `12`, `{"a":1}x`} {
		s := &fakeStore{items: []*engine.Item{item(1, engine.ItemDone, `{"ok":1}`), item(2, engine.ItemDone, result)}}
		_, err := Columns(context.Background(), s, testJob, nil)
		require.Error(t, err, result)
		require.Contains(t, err.Error(), "seq 2", result)
	}
}

func TestColumnsContextCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s := &fakeStore{items: manyItems(100)}
	s.onItem = func(n int) {
		if n == 5 {
			cancel()
		}
	}
	_, err := Columns(ctx, s, testJob, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 5, s.visited)
}
