package remote_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/adapters/remote/remotetest"
	"github.com/sluicehq/sluice/engine"
)

func TestSafeKey(t *testing.T) {
	for _, k := range []string{"a.csv", "a b.csv", "ünï 名前.csv", "sub/a.csv", "a..b.csv", "-x.csv"} {
		require.True(t, remote.SafeKey(k), k)
	}
	for _, k := range []string{"", "/etc/passwd", "../a.csv", "a/../../b.csv", "a/./b.csv", "a//b.csv", "a\x00.csv",
		"a\r\nDELE x", "tab\t.csv", `..\win.csv`, "\xff\xfe.csv", "a/", "\u0085.csv"} {
		require.False(t, remote.SafeKey(k), "%q", k)
	}
}

// memServer is a server in memory whose listing a hostile server wrote:
// the poller must take the plain names and none of the others.
type memServer struct {
	mu      sync.Mutex
	objects map[string][]byte
	opened  []string
	moved   []string
}

func (m *memServer) List(_ context.Context, fn func(engine.ObjectInfo) error) error {
	m.mu.Lock()
	keys := make([]string, 0, len(m.objects))
	for k := range m.objects {
		keys = append(keys, k)
	}
	m.mu.Unlock()
	sort.Strings(keys)
	for _, k := range keys {
		if err := fn(engine.ObjectInfo{Key: k, Size: int64(len(m.objects[k])), MTime: time.Unix(1e9, 0), ETag: "e"}); err != nil {
			return err
		}
	}
	return nil
}

func (m *memServer) Open(_ context.Context, info engine.ObjectInfo) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[info.Key]
	if !ok {
		return nil, fs.ErrNotExist
	}
	m.opened = append(m.opened, info.Key)
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m *memServer) After(_ context.Context, key, _ string, _ bool, _ int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.moved = append(m.moved, key)
	delete(m.objects, key)
	return nil
}

func (m *memServer) Close() error { return nil }

func TestHostileListingIsNotTaken(t *testing.T) {
	t.Parallel()
	srv := &memServer{objects: map[string][]byte{}}
	hostile := []string{"../../../../etc/cron.d/x.csv", "/abs.csv", "a\x00b.csv", "a\r\nDELE b.csv", "x/../../y.csv"}
	for _, k := range append([]string{"ok.csv", "sub/ünï.csv"}, hostile...) {
		srv.objects[k] = remotetest.CSV(2)
	}
	cfg, err := json.Marshal(engine.ArrivalRule{MinAgeMS: 50})
	require.NoError(t, err)
	h := remotetest.NewHarness(t, &remotetest.Fixture{Kind: "mem", Config: cfg,
		New: func(src *engine.SourceRecord, tk *engine.Taker, log *slog.Logger) (*remote.Poller, error) {
			return remote.New(src, engine.ArrivalRule{MinAgeMS: 50}, srv, tk, log), nil
		}}, engine.AfterMove)
	res, err := h.Poller().Scan(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, res.Ingested)
	require.ElementsMatch(t, []string{"ok.csv", "sub/ünï.csv"}, srv.opened, "hostile names are never opened")
	require.ElementsMatch(t, []string{"ok.csv", "sub/ünï.csv"}, srv.moved, "nor moved")
	require.Contains(t, h.Source().LastError, "5 object(s) with an unsafe name")
	// Nothing but the data folder was written.
	base := filepath.Dir(filepath.Dir(filepath.Dir(h.Taker.TempDir)))
	ents, err := os.ReadDir(base)
	require.NoError(t, err)
	require.Len(t, ents, 1)
	require.Equal(t, "data", ents[0].Name())
	left, err := os.ReadDir(h.Taker.TempDir)
	require.NoError(t, err)
	require.Empty(t, left, "copies are removed")
}
