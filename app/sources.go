package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/adapters/folder"
	"github.com/sluicehq/sluice/adapters/ftp"
	"github.com/sluicehq/sluice/adapters/s3"
	"github.com/sluicehq/sluice/engine"
)

// sourceReload is how often a running process looks for sources added,
// removed, enabled or disabled (by `sluice source` in another process).
const sourceReload = 5 * time.Second

// taker returns the ledger path every source takes files through.
func (e *Env) taker(ing *engine.Ingester) *engine.Taker {
	return &engine.Taker{Store: e.Store, Ingester: ing, Log: e.Log, Events: e.Events,
		TempDir: filepath.Join(e.Data, "tmp", "sources")}
}

// newSource builds the adapter of a stored source.
func newSource(rec *engine.SourceRecord, t *engine.Taker, e *Env) (engine.Source, error) {
	switch rec.Kind {
	case engine.SourceFolder:
		return folder.New(rec, t, e.Log)
	case engine.SourceFTP:
		return ftp.New(rec, t, e.Log)
	case engine.SourceS3:
		return s3.New(rec, t, e.Log)
	}
	return nil, engine.Errorf(engine.EINVALID, "source %s: kind %q is not supported by this build", rec.Name, rec.Kind)
}

// sourceWhere says where a source's files come from, for people (no
// secret is in a config, so none can be shown).
func sourceWhere(rec *engine.SourceRecord) string {
	switch rec.Kind {
	case engine.SourceFolder:
		if c, err := folder.ParseConfig(rec.Config); err == nil {
			if c.Recursive {
				return c.Path + " (recursive)"
			}
			return c.Path
		}
	case engine.SourceFTP:
		if c, err := ftp.ParseConfig(rec.Config); err == nil {
			return c.Where()
		}
	case engine.SourceS3:
		if c, err := s3.ParseConfig(rec.Config); err == nil {
			return c.Where()
		}
	}
	return ""
}

// scanSource looks at a stored source once and ingests every stable file
// (sluice source scan, POST /api/sources/{name}/scan).
func (e *Env) scanSource(ctx context.Context, ing *engine.Ingester, name string) (*engine.ScanResult, error) {
	rec, err := e.Store.GetSource(ctx, name)
	if err != nil {
		return nil, err
	}
	src, err := newSource(rec, e.taker(ing), e)
	if err != nil {
		return nil, err
	}
	return src.Scan(ctx)
}

// runSources runs the enabled sources of the data directory in this
// process until ctx is done or the returned stop is called (which waits
// for them). Several processes may run the same sources: the ledger lets
// exactly one take each file.
func (e *Env) runSources(ctx context.Context, ing *engine.Ingester) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	type running struct {
		created time.Time
		cancel  context.CancelFunc
	}
	t := e.taker(ing)
	removeStaleCopies(t.TempDir, 24*time.Hour)
	wg.Go(func() {
		live := map[string]running{}
		tick := time.NewTicker(sourceReload)
		defer tick.Stop()
		for {
			recs, err := e.Store.ListSources(ctx)
			if err != nil && ctx.Err() == nil {
				e.Log.Warn("list sources", "err", err)
			}
			want := map[string]bool{}
			for _, rec := range recs {
				if !rec.Enabled {
					continue
				}
				if r, ok := live[rec.Name]; ok && r.created.Equal(rec.CreatedAt) {
					want[rec.Name] = true
					continue
				}
				src, err := newSource(rec, t, e)
				if err != nil {
					e.Log.Warn("source not started", "source", rec.Name, "err", err)
					_ = e.Store.RecordSourcePoll(ctx, rec.Name, engine.ErrorMessage(err), time.Now())
					continue
				}
				if r, ok := live[rec.Name]; ok {
					r.cancel()
				}
				sctx, scancel := context.WithCancel(ctx)
				live[rec.Name] = running{created: rec.CreatedAt, cancel: scancel}
				want[rec.Name] = true
				e.Log.Info("source started", "source", rec.Name, "kind", rec.Kind)
				wg.Go(func() {
					if err := src.Run(sctx); err != nil {
						e.Log.Warn("source stopped", "source", src.Name(), "err", err)
					}
				})
			}
			for name, r := range live {
				if !want[name] && err == nil {
					r.cancel()
					delete(live, name)
					e.Log.Info("source stopped", "source", name)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// removeStaleCopies deletes the copies a killed process left in dir (an
// ingest removes its own). Only old ones: another process may be copying.
func removeStaleCopies(dir string, age time.Duration) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, d := range ents {
		if !d.Type().IsRegular() || !strings.HasPrefix(d.Name(), "source-") {
			continue
		}
		if fi, err := d.Info(); err == nil && time.Since(fi.ModTime()) > age {
			_ = os.Remove(filepath.Join(dir, d.Name()))
		}
	}
}
