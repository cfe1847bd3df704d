// Package remote runs the sources that live on a server and are polled
// (FTP, S3): it lists the server, passes every object through the shared
// arrival rule (engine.Stability) and the ledger (engine.Taker), applies
// the after-action on the server, and copes with servers that are down,
// slow or answer garbage: the error is recorded on the source (sluice
// sources, /api/sources, the Sources page) and the server is tried again
// with a growing backoff. The adapters (adapters/ftp, adapters/s3) only
// speak their protocol: they implement Server.
//
// Remote names are never used as local paths: the copy's name is the
// ledger's (engine.Taker), and names that are not plain relative paths
// (absolute, "..", control characters, invalid UTF-8) are not taken at all,
// since the after-action would use them on the server.
package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"path"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluicehq/sluice/engine"
)

// Server is one polled server, as an adapter speaks to it. Its methods are
// called one at a time. An error of any method may leave the connection
// broken: the poller then calls Close, and the next call connects again.
type Server interface {
	// List calls fn for every object of the source (the keys relative to
	// the source's folder or prefix, "/" separators), a page at a time
	// where the protocol pages, so that memory does not grow with the
	// server. An error of fn stops the listing and is returned.
	List(ctx context.Context, fn func(engine.ObjectInfo) error) error
	// Open streams an object. A missing object is fs.ErrNotExist, one
	// that is no longer the version listed engine.ErrChanged; any other
	// error is taken as the way's (the copy is retried).
	Open(ctx context.Context, info engine.ObjectInfo) (io.ReadCloser, error)
	// After applies an after-action to a finished object: move it to the
	// done or failed folder (failed true), or delete it.
	After(ctx context.Context, key, action string, failed bool, id int64) error
	// Close drops the connection, if any.
	Close() error
}

// Backoff bounds: a server that fails is tried again after MinBackoff,
// twice as long after each failure, at most MaxBackoff.
const (
	MinBackoff = time.Second
	MaxBackoff = 5 * time.Minute
)

// Poller is the engine.Source of a polled server. Its methods may be
// called from several goroutines; looks and takes run one at a time.
type Poller struct {
	src    *engine.SourceRecord
	rule   engine.ArrivalRule
	server Server
	taker  *engine.Taker
	log    *slog.Logger
	// MinBackoff overrides the first retry delay (tests); 0 = MinBackoff.
	MinBackoff time.Duration

	mu   sync.Mutex
	stab *engine.Stability
	// settled are versions whose ledger row is finished and that stay on
	// the server (after leave, or an after-action that failed): later
	// polls skip them without a write.
	settled map[string]engine.ObjectInfo
}

// New returns the poller of src, which lists server.
func New(src *engine.SourceRecord, rule engine.ArrivalRule, server Server, taker *engine.Taker, log *slog.Logger) *Poller {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Poller{src: src, rule: rule, server: server, taker: taker, log: log.With("source", src.Name),
		stab: engine.NewStability(rule), settled: map[string]engine.ObjectInfo{}}
}

// DefaultPoll is the polling period when the source sets none.
const DefaultPoll = 30 * time.Second

// Name is the source's name.
func (p *Poller) Name() string { return p.src.Name }

func (p *Poller) poll() time.Duration {
	if p.src.Poll <= 0 {
		return DefaultPoll
	}
	return p.src.Poll
}

// SafeKey reports whether a remote name is a plain relative path that may
// be taken: not empty, not absolute, no "." or ".." element, no control
// characters, valid UTF-8 (any script is fine).
func SafeKey(key string) bool {
	if key == "" || !utf8.ValidString(key) || strings.HasPrefix(key, "/") || strings.Contains(key, `\`) {
		return false
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return false
		}
	}
	for _, el := range strings.Split(key, "/") {
		if el == "" || el == "." || el == ".." {
			return false
		}
	}
	return true
}

// unsafeNames collects the names a look left out, for the source's error.
type unsafeNames struct {
	n     int
	first string
}

func (u *unsafeNames) err() error {
	if u.n == 0 {
		return nil
	}
	return fmt.Errorf("%d object(s) with an unsafe name not taken, e.g. %q (absolute, \"..\" or control characters)", u.n, u.first)
}

// look lists the server once, takes the stable objects, and returns how
// long until a pending one could be stable (0: none pending). notice is a
// problem of some objects that is not the server's (unsafe names); err is
// the server's or the store's, and ends the look.
func (p *Poller) look(ctx context.Context, res *engine.ScanResult) (next time.Duration, notice, err error) {
	var unsafe unsafeNames
	present := map[string]bool{}
	err = p.server.List(ctx, func(info engine.ObjectInfo) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !SafeKey(info.Key) {
			if unsafe.n == 0 {
				unsafe.first = info.Key
			}
			unsafe.n++
			return nil
		}
		if p.rule.Ignored(info.Key) {
			return nil
		}
		res.Seen++
		present[info.Key] = true
		if s, ok := p.settled[info.Key]; ok && sameVersion(s, info) {
			return nil
		}
		stable, wait := p.stab.Look(info, time.Now())
		if !stable {
			if next == 0 || wait < next {
				next = wait
			}
			return nil
		}
		retry, err := p.take(ctx, info, res)
		if err != nil {
			return err
		}
		// A copy cut short: the server is gone or broken, the look ends
		// here and the next one (after a backoff) connects again.
		return retry
	})
	if err != nil {
		return 0, nil, err
	}
	// Forget what is gone (a complete listing only).
	for _, k := range p.stab.Pending() {
		if !present[k] {
			p.stab.Forget(k)
		}
	}
	for k := range p.settled {
		if !present[k] {
			delete(p.settled, k)
		}
	}
	return next, unsafe.err(), nil
}

func sameVersion(a, b engine.ObjectInfo) bool {
	return a.Size == b.Size && a.MTime.Equal(b.MTime) && a.ETag == b.ETag
}

// take takes one stable object and applies the after-action. The error is
// of the store or ctx; retry is why a copy was interrupted (the server
// went away: the poll is cut short and the object is taken again later).
func (p *Poller) take(ctx context.Context, info engine.ObjectInfo, res *engine.ScanResult) (retry error, err error) {
	r, err := p.taker.Take(ctx, engine.TakeRequest{Source: p.src, Rule: p.rule, Info: info,
		Open: func(ctx context.Context) (io.ReadCloser, error) {
			rc, err := p.server.Open(ctx, info)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, engine.ErrChanged) {
					return nil, err
				}
				return nil, engine.Interrupted(err)
			}
			return interruptedReader{rc}, nil
		}})
	if err != nil {
		return nil, err
	}
	obj := r.Object
	switch {
	case r.Retry:
		p.stab.Forget(info.Key)
		return r.Err, nil
	case r.Claimed && errors.Is(r.Err, engine.ErrChanged):
		// Still being written: looked at again as the new version.
		p.stab.Forget(info.Key)
		return nil, nil
	case r.Claimed && r.Err != nil:
		res.Failed++
	case r.Claimed:
		res.Ingested++
	case obj.State == engine.ObjectIngesting || obj.State == engine.ObjectSeen:
		// Another process holds it, or an interrupted copy waits for
		// Recover: looked at again.
		return nil, nil
	}
	p.stab.Forget(info.Key)
	p.settled[info.Key] = info
	if obj.Size != info.Size || !obj.MTime.Equal(info.MTime.Truncate(time.Millisecond)) || obj.ETag != info.ETag {
		// A changed object the source does not ingest again: left alone.
		return nil, nil
	}
	p.after(ctx, info.Key, obj)
	return nil, nil
}

// after applies the after-action: DONE objects are moved to the done
// folder, deleted or left; FAILED ones are moved to the failed folder
// (after move and delete) or left.
func (p *Poller) after(ctx context.Context, key string, obj *engine.SourceObject) {
	action, failed := p.src.After, obj.State == engine.ObjectFailed
	if failed && action == engine.AfterDelete {
		action = engine.AfterMove
	}
	if action == engine.AfterLeave {
		return
	}
	if err := p.server.After(ctx, key, action, failed, obj.ID); err != nil {
		// The object stays: settled, so it is not looked at again.
		p.log.Warn("after-action failed", "key", key, "action", action, "err", err)
		return
	}
	delete(p.settled, key)
}

// interruptedReader marks read errors as the way's, not the object's.
type interruptedReader struct{ io.ReadCloser }

func (r interruptedReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	if err != nil && err != io.EOF {
		err = engine.Interrupted(err)
	}
	return n, err
}

// recover settles the ledger's stale claims (a crashed process's, or an
// interrupted copy's).
func (p *Poller) recover(ctx context.Context) { p.taker.Settle(ctx, p.src.Name) }

// Scan looks at the server now and again until no candidate is waiting
// for its stability window (at most a few windows: an object still being
// written is left to a later poll). The connection is closed after.
func (p *Poller) Scan(ctx context.Context) (*engine.ScanResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.server.Close()
	p.recover(ctx)
	res := &engine.ScanResult{}
	var notice error
	for pass := 0; pass < 6; pass++ {
		r := &engine.ScanResult{}
		next, n, err := p.look(ctx, r)
		res.Seen = r.Seen
		res.Ingested += r.Ingested
		res.Failed += r.Failed
		notice = n
		if err != nil {
			return res, p.record(ctx, err)
		}
		if next == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(next):
		}
	}
	p.record(ctx, notice)
	return res, nil
}

// record notes a look at the source (and its error) in the store.
func (p *Poller) record(ctx context.Context, err error) error {
	return p.taker.RecordPoll(ctx, p.src.Name, err)
}

// backoff is the delay before the attempt after n failures in a row,
// with ±20% jitter so that many sources do not retry in step.
func (p *Poller) backoff(n int) time.Duration {
	d := p.MinBackoff
	if d <= 0 {
		d = MinBackoff
	}
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, MaxBackoff)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// Run polls the server until ctx is done: every poll period, sooner while
// an object waits for its stability window, and after a failure again
// with a growing backoff (the error is on the source meanwhile).
func (p *Poller) Run(ctx context.Context) error {
	defer p.server.Close()
	failures := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		p.mu.Lock()
		p.recover(ctx)
		next, notice, err := p.look(ctx, &engine.ScanResult{})
		if err != nil {
			_ = p.server.Close()
		}
		p.mu.Unlock()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			p.record(ctx, err)
		} else {
			p.record(ctx, notice)
		}
		wait := p.poll()
		if err != nil {
			failures++
			wait = p.backoff(failures)
			// One line per failure streak length doubling, not per poll.
			if failures&(failures-1) == 0 {
				p.log.Warn("source poll failed", "err", err, "failures", failures, "retry_in", wait.Round(time.Millisecond))
			}
		} else {
			if failures > 0 {
				p.log.Info("source poll works again", "after_failures", failures)
			}
			failures = 0
			if next > 0 {
				wait = min(wait, max(next, 20*time.Millisecond))
			}
		}
		timer.Reset(wait)
	}
}

// Join returns dir/key on the server, with dir as configured ("" = the
// login folder).
func Join(dir, key string) string {
	if dir == "" {
		return key
	}
	return path.Join(dir, key)
}
