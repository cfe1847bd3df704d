package engine_test

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// pruneSpy records the cutoffs of the PruneBlobs calls made on its store.
type pruneSpy struct {
	engine.Store
	mu      sync.Mutex
	cutoffs []time.Time
}

func (p *pruneSpy) PruneBlobs(ctx context.Context, q *engine.PruneBlobsParams) (int, error) {
	p.mu.Lock()
	p.cutoffs = append(p.cutoffs, q.Before)
	p.mu.Unlock()
	return p.Store.PruneBlobs(ctx, q)
}

func (p *pruneSpy) calls() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.cutoffs...)
}

// blockedBody yields head, then waits for release before yielding tail;
// reached is closed when the store asks for more than head (so head is
// stored).
type blockedBody struct {
	r       io.Reader
	tail    []byte
	reached chan struct{}
	release chan struct{}
}

func (b *blockedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.reached != nil {
		close(b.reached)
		b.reached = nil
		<-b.release
		b.r = bytes.NewReader(b.tail)
		return b.r.Read(p)
	}
	return n, err
}

// TestReaperPrunesAbandonedBlobs: the reaping runner removes the blobs a
// dead writer left half-written once they are older than
// AbandonedBlobAfter (a writer still going then fails with ErrBlobGone),
// keeps younger ones, and looks again only every ten minutes.
func TestReaperPrunesAbandonedBlobs(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	spy := &pruneSpy{Store: s}
	clock := &fakeClock{now: time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	start := clock.Now()

	put := func(key string, began time.Time) (*blockedBody, chan error) {
		b := &blockedBody{r: bytes.NewReader(make([]byte, engine.BlobChunkSize)), tail: []byte("end"),
			reached: make(chan struct{}), release: make(chan struct{})}
		reached := b.reached
		errc := make(chan error, 1)
		go func() {
			_, err := s.PutBlob(t.Context(), &engine.PutBlobParams{Key: key, Body: b, Now: began})
			errc <- err
		}()
		<-reached
		return b, errc
	}
	old, oldErr := put("old", start.Add(-25*time.Hour))
	young, youngErr := put("young", start.Add(-23*time.Hour))

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = newRunner(t, spy, engine.RunnerConfig{Clock: clock, ReapInterval: 5 * time.Millisecond}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })

	require.Eventually(t, func() bool { return len(spy.calls()) == 1 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, start.Add(-24*time.Hour), spy.calls()[0], "default AbandonedBlobAfter is 24h")
	close(old.release)
	close(young.release)
	require.ErrorIs(t, <-oldErr, engine.ErrBlobGone, "the blob begun 25 h ago was pruned under its writer")
	require.NoError(t, <-youngErr, "the blob begun 23 h ago was left alone")
	_, err := s.StatBlob(t.Context(), "young")
	require.NoError(t, err)

	clock.advance(9 * time.Minute)
	time.Sleep(100 * time.Millisecond) // about 20 reaps
	require.Len(t, spy.calls(), 1, "no second look within ten minutes")
	clock.advance(time.Minute)
	require.Eventually(t, func() bool { return len(spy.calls()) == 2 }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, clock.Now().Add(-24*time.Hour), spy.calls()[1])
}
