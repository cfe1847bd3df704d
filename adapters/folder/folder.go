// Package folder is the watched-folder source: files dropped into a
// directory become jobs. fsnotify events make it fast; a scan at start-up
// and a periodic rescan make it complete (events overflow, and are missed
// on network filesystems). Every file passes the shared arrival rule
// (engine.ArrivalRule, engine.Stability) and the ledger (engine.Taker).
//
// The folder is opened as an os.Root: symbolic links are never followed
// (listings skip them), and nothing is read, moved or deleted outside it.
package folder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sluicehq/sluice/engine"
)

// Folders inside the watched folder where files go after ingest (after
// move). They are never scanned.
const (
	DoneDir   = engine.DoneFolder
	FailedDir = engine.FailedFolder
)

// DefaultPoll is the rescan period when the source sets none.
const DefaultPoll = 10 * time.Second

// Config is a folder source's config (SourceRecord.Config).
type Config struct {
	// Path is the folder, absolute.
	Path string `json:"path"`
	// Recursive watches the subfolders too.
	Recursive bool `json:"recursive,omitempty"`
	engine.ArrivalRule
}

// ParseConfig reads and checks a folder source's config.
func ParseConfig(raw json.RawMessage) (*Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, engine.Errorf(engine.EINVALID, "folder source config: %v", err)
	}
	if c.Path == "" || !filepath.IsAbs(c.Path) {
		return nil, engine.Errorf(engine.EINVALID, "folder source: path %q is not absolute", c.Path)
	}
	if err := c.ArrivalRule.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Folder is one watched folder. Its methods may be called from several
// goroutines; looks and takes run one at a time.
type Folder struct {
	src   *engine.SourceRecord
	cfg   *Config
	taker *engine.Taker
	log   *slog.Logger

	mu   sync.Mutex
	stab *engine.Stability
	// settled are versions whose ledger row is finished: rescans skip
	// them without a write (after "leave", they stay in the folder).
	settled map[string]engine.ObjectInfo
}

// New returns the folder source of src.
func New(src *engine.SourceRecord, taker *engine.Taker, log *slog.Logger) (*Folder, error) {
	if src.Kind != engine.SourceFolder {
		return nil, engine.Errorf(engine.EINVALID, "source %s is a %s source, not a folder", src.Name, src.Kind)
	}
	cfg, err := ParseConfig(src.Config)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Folder{src: src, cfg: cfg, taker: taker, log: log.With("source", src.Name),
		stab: engine.NewStability(cfg.ArrivalRule), settled: map[string]engine.ObjectInfo{}}, nil
}

// Name is the source's name.
func (f *Folder) Name() string { return f.src.Name }

func (f *Folder) poll() time.Duration {
	if f.src.Poll <= 0 {
		return DefaultPoll
	}
	return f.src.Poll
}

// skipDir reports whether the walk leaves out the folder rel.
func (f *Folder) skipDir(rel string) bool {
	if rel == "." {
		return false
	}
	if !f.cfg.Recursive || rel == DoneDir || rel == FailedDir {
		return true
	}
	return strings.HasPrefix(path.Base(rel), ".")
}

// list walks the folder: regular files only (links and devices are
// skipped, links to folders are not entered), ignored names left out.
func (f *Folder) list(root *os.Root) ([]engine.ObjectInfo, []string, error) {
	var out []engine.ObjectInfo
	var dirs []string
	err := fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == "." {
				return err
			}
			f.log.Warn("cannot read", "path", rel, "err", err)
			return nil
		}
		if d.IsDir() {
			if f.skipDir(rel) {
				return fs.SkipDir
			}
			dirs = append(dirs, rel)
			return nil
		}
		if !d.Type().IsRegular() || f.cfg.Ignored(rel) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		out = append(out, engine.ObjectInfo{Key: rel, Size: info.Size(), MTime: info.ModTime()})
		return nil
	})
	return out, dirs, err
}

// stat looks at one file named by an event; ok is false when it is not a
// candidate (gone, not regular, ignored, in a folder not watched).
func (f *Folder) stat(root *os.Root, key string) (engine.ObjectInfo, bool) {
	if dir := path.Dir(key); dir != "." && (!f.cfg.Recursive || f.skipDirPath(dir)) {
		return engine.ObjectInfo{}, false
	}
	if f.cfg.Ignored(key) {
		return engine.ObjectInfo{}, false
	}
	info, err := root.Lstat(key)
	if err != nil || !info.Mode().IsRegular() {
		return engine.ObjectInfo{}, false
	}
	return engine.ObjectInfo{Key: key, Size: info.Size(), MTime: info.ModTime()}, true
}

// skipDirPath reports whether any folder on rel's path is left out.
func (f *Folder) skipDirPath(rel string) bool {
	for p := rel; p != "." && p != "/"; p = path.Dir(p) {
		if p == DoneDir || p == FailedDir || strings.HasPrefix(path.Base(p), ".") {
			return true
		}
	}
	return false
}

// look looks at candidates once, takes the stable ones, and returns how
// long until a pending one could be stable (0: none pending).
func (f *Folder) look(ctx context.Context, root *os.Root, infos []engine.ObjectInfo, res *engine.ScanResult) (time.Duration, error) {
	var next time.Duration
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if s, ok := f.settled[info.Key]; ok && s.Size == info.Size && s.MTime.Equal(info.MTime) {
			continue
		}
		stable, wait := f.stab.Look(info, time.Now())
		if !stable {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		if err := f.take(ctx, root, info, res); err != nil {
			return 0, err
		}
	}
	return next, nil
}

// take takes one stable file and applies the after-action.
func (f *Folder) take(ctx context.Context, root *os.Root, info engine.ObjectInfo, res *engine.ScanResult) error {
	r, err := f.taker.Take(ctx, engine.TakeRequest{Source: f.src, Rule: f.cfg.ArrivalRule, Info: info,
		Open: func(context.Context) (io.ReadCloser, error) { return root.Open(info.Key) }})
	if err != nil {
		return err
	}
	obj := r.Object
	switch {
	case r.Claimed && errors.Is(r.Err, engine.ErrChanged):
		// Still being written: looked at again as the new version.
		f.stab.Forget(info.Key)
		return nil
	case r.Claimed && r.Err != nil:
		res.Failed++
	case r.Claimed:
		res.Ingested++
	case obj.State == engine.ObjectIngesting || obj.State == engine.ObjectSeen:
		// Another process holds it, or a crash left it to Recover:
		// looked at again.
		return nil
	}
	f.stab.Forget(info.Key)
	f.settled[info.Key] = info
	sameVersion := obj.Size == info.Size && obj.MTime.Equal(info.MTime.Truncate(time.Millisecond))
	if !sameVersion {
		// A changed file that the source does not ingest again: left as
		// it is, its ledger row names the version that was ingested.
		return nil
	}
	f.after(root, info.Key, obj)
	return nil
}

// after applies the source's after-action to a finished file: DONE files
// are moved to done/, deleted or left; FAILED files are moved to failed/
// (after move and delete: a file that failed is never deleted) or left.
func (f *Folder) after(root *os.Root, key string, obj *engine.SourceObject) {
	action, dir := f.src.After, DoneDir
	if obj.State == engine.ObjectFailed {
		dir = FailedDir
		if action == engine.AfterDelete {
			action = engine.AfterMove
		}
	}
	var err error
	switch action {
	case engine.AfterLeave:
		return
	case engine.AfterDelete:
		err = root.Remove(key)
	default:
		dest := path.Join(dir, key)
		if err = root.MkdirAll(path.Dir(dest), 0o755); err == nil {
			if _, serr := root.Lstat(dest); serr == nil {
				ext := path.Ext(dest)
				dest = fmt.Sprintf("%s-%d%s", strings.TrimSuffix(dest, ext), obj.ID, ext)
			}
			err = root.Rename(key, dest)
		}
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.log.Warn("after-action failed", "key", key, "action", action, "err", err)
		return
	}
	delete(f.settled, key)
}

// fullLook lists the folder and looks at everything in it.
func (f *Folder) fullLook(ctx context.Context, root *os.Root, res *engine.ScanResult) (time.Duration, []string, error) {
	infos, dirs, err := f.list(root)
	if err != nil {
		return 0, nil, err
	}
	res.Seen += len(infos)
	present := make(map[string]bool, len(infos))
	for _, in := range infos {
		present[in.Key] = true
	}
	for _, k := range f.stab.Pending() {
		if !present[k] {
			f.stab.Forget(k)
		}
	}
	for k := range f.settled {
		if !present[k] {
			delete(f.settled, k)
		}
	}
	next, err := f.look(ctx, root, infos, res)
	return next, dirs, err
}

// recover settles the ledger's stale claims (a crashed process's).
func (f *Folder) recover(ctx context.Context) { f.taker.Settle(ctx, f.src.Name) }

// Scan looks at the folder now and again until no candidate is waiting for
// its stability window (at most a few windows: a file still being written
// is left to a later scan).
func (f *Folder) Scan(ctx context.Context) (*engine.ScanResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recover(ctx)
	res := &engine.ScanResult{}
	root, err := os.OpenRoot(f.cfg.Path)
	if err != nil {
		return res, f.record(ctx, err)
	}
	defer root.Close()
	for pass := 0; pass < 6; pass++ {
		r := &engine.ScanResult{}
		next, _, err := f.fullLook(ctx, root, r)
		if err != nil {
			return res, f.record(ctx, err)
		}
		res.Seen = r.Seen
		res.Ingested += r.Ingested
		res.Failed += r.Failed
		if next == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(next):
		}
	}
	return res, f.record(ctx, nil)
}

// record notes a look at the source (and its error) in the store.
func (f *Folder) record(ctx context.Context, err error) error {
	return f.taker.RecordPoll(ctx, f.src.Name, err)
}

// Run watches the folder until ctx is done.
func (f *Folder) Run(ctx context.Context) error {
	w, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		f.log.Warn("no file events: rescans only", "err", err)
		w = nil
	} else {
		defer w.Close()
	}
	var events chan fsnotify.Event
	var errs chan error
	if w != nil {
		events, errs = w.Events, w.Errors
	}
	watched := map[string]bool{}
	var root *os.Root
	defer func() {
		if root != nil {
			root.Close()
		}
	}()
	rescan := time.NewTimer(0)
	defer rescan.Stop()
	recheck := time.NewTimer(time.Hour)
	defer recheck.Stop()
	// recheckAt is when recheck fires (zero: not armed). A later look
	// never postpones it, so a stream of events cannot starve the files
	// already waiting.
	var recheckAt time.Time
	schedule := func(next time.Duration) {
		if next <= 0 {
			return
		}
		next = max(next, 20*time.Millisecond)
		if at := time.Now().Add(next); recheckAt.IsZero() || at.Before(recheckAt) {
			recheckAt = at
			recheck.Reset(next)
		}
	}
	fail := func(err error) {
		if ctx.Err() == nil {
			f.log.Warn("folder source", "err", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-rescan.C:
			rescan.Reset(f.poll())
			f.mu.Lock()
			f.recover(ctx)
			// Opened again at every full look: a folder removed and made
			// again (or replaced) is followed, not its old inode.
			fresh, err := os.OpenRoot(f.cfg.Path)
			if err != nil {
				if root != nil {
					root.Close()
				}
				root, watched = nil, map[string]bool{}
				f.mu.Unlock()
				fail(f.record(ctx, err))
				continue
			}
			if root != nil {
				if !sameDir(root, fresh) {
					watched = map[string]bool{}
				}
				root.Close()
			}
			root = fresh
			next, dirs, err := f.fullLook(ctx, root, &engine.ScanResult{})
			if err != nil {
				root.Close()
				root, watched = nil, map[string]bool{}
			} else if w != nil {
				for _, d := range dirs {
					if !watched[d] {
						if werr := w.Add(filepath.Join(f.cfg.Path, filepath.FromSlash(d))); werr == nil {
							watched[d] = true
						}
					}
				}
			}
			f.mu.Unlock()
			if err = f.record(ctx, err); err != nil {
				fail(err)
				continue
			}
			schedule(next)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if root == nil || ev.Has(fsnotify.Remove) {
				continue
			}
			rel, err := filepath.Rel(f.cfg.Path, ev.Name)
			if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
				continue
			}
			key := filepath.ToSlash(rel)
			if ev.Has(fsnotify.Create) && f.cfg.Recursive {
				if fi, err := root.Lstat(key); err == nil && fi.IsDir() && !f.skipDirPath(key) {
					// A new subfolder: watched by the next full look,
					// which comes at once (files may already be in it).
					rescan.Reset(0)
					continue
				}
			}
			f.mu.Lock()
			info, ok := f.stat(root, key)
			var next time.Duration
			if ok {
				next, err = f.look(ctx, root, []engine.ObjectInfo{info}, &engine.ScanResult{})
			}
			f.mu.Unlock()
			if err != nil {
				fail(err)
			}
			schedule(next)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			// Overflow or a watch lost: the full look finds everything.
			f.log.Info("file events lost: rescanning", "err", err)
			rescan.Reset(0)
		case <-recheck.C:
			recheckAt = time.Time{}
			if root == nil {
				continue
			}
			f.mu.Lock()
			var infos []engine.ObjectInfo
			for _, k := range f.stab.Pending() {
				if info, ok := f.stat(root, k); ok {
					infos = append(infos, info)
				} else {
					f.stab.Forget(k)
				}
			}
			next, err := f.look(ctx, root, infos, &engine.ScanResult{})
			f.mu.Unlock()
			if err != nil {
				fail(err)
			}
			schedule(next)
		}
	}
}

// Validate checks a config as ParseConfig does.
func (c *Config) Validate() error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = ParseConfig(raw)
	return err
}

// sameDir reports whether two roots are the same folder.
func sameDir(a, b *os.Root) bool {
	ai, err := a.Stat(".")
	if err != nil {
		return false
	}
	bi, err := b.Stat(".")
	return err == nil && os.SameFile(ai, bi)
}
