package ftp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/textproto"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/jlaffaye/ftp"

	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/engine"
)

// New returns the FTP source of src.
func New(src *engine.SourceRecord, taker *engine.Taker, log *slog.Logger) (*remote.Poller, error) {
	srv, cfg, err := NewServer(src)
	if err != nil {
		return nil, err
	}
	return remote.New(src, cfg.ArrivalRule, srv, taker, log), nil
}

// Server speaks to one FTP server for a source (remote.Server). It keeps
// one connection, made on first use and again after Close.
type Server struct {
	cfg *Config
	t   *target

	conn *ftp.ServerConn
	// list says MLSD failed on this server: LIST from then on.
	listOnly bool

	// nets are the open network connections, closed at once when a
	// context ends (a blocked read would otherwise wait for the timeout).
	mu   sync.Mutex
	nets map[net.Conn]struct{}
}

var _ remote.Server = (*Server)(nil)

// NewServer checks src's config and returns its server (not connected).
func NewServer(src *engine.SourceRecord) (*Server, *Config, error) {
	if src.Kind != engine.SourceFTP {
		return nil, nil, engine.Errorf(engine.EINVALID, "source %s is a %s source, not ftp", src.Name, src.Kind)
	}
	cfg, err := ParseConfig(src.Config)
	if err != nil {
		return nil, nil, err
	}
	t, _ := cfg.target()
	return &Server{cfg: cfg, t: t, nets: map[net.Conn]struct{}{}}, cfg, nil
}

// idleConn gives up a read or write after the server was silent too long.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c idleConn) Read(b []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(b)
}

func (c idleConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(b)
}

func (c idleConn) Close() error {
	return c.Conn.Close()
}

// dialer returns the dial function of one login: the first connection is
// the control one (upgraded by AUTH TLS under FTPS), the next ones are
// data connections (TLS from the start under FTPS: PROT P).
func (s *Server) dialer(ctx context.Context, tlsCfg *tls.Config) func(network, addr string) (net.Conn, error) {
	first := true
	return func(network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: s.cfg.timeout()}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.nets[c] = struct{}{}
		s.mu.Unlock()
		var out net.Conn = idleConn{Conn: c, idle: s.cfg.timeout()}
		if !first && tlsCfg != nil {
			out = tls.Client(out, tlsCfg)
		}
		first = false
		return out, nil
	}
}

// killNets closes every network connection (a context ended).
func (s *Server) killNets() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.nets {
		_ = c.Close()
	}
	clear(s.nets)
}

// connect logs in, once per connection.
func (s *Server) connect(ctx context.Context) (*ftp.ServerConn, error) {
	if s.conn != nil {
		return s.conn, nil
	}
	pass := "anonymous"
	if !s.cfg.Password.IsZero() {
		p, err := s.cfg.Password.Read("ftp password")
		if err != nil {
			return nil, err
		}
		pass = p
	}
	var tlsCfg *tls.Config
	if s.t.tls {
		host, _, _ := net.SplitHostPort(s.t.addr)
		tlsCfg = &tls.Config{ServerName: host, InsecureSkipVerify: s.cfg.InsecureSkipVerify, //nolint:gosec // the user's choice, per source
			ClientSessionCache: tls.NewLRUClientSessionCache(4), MinVersion: tls.VersionTLS12}
	}
	opts := []ftp.DialOption{ftp.DialWithContext(ctx), ftp.DialWithDialFunc(s.dialer(ctx, tlsCfg)),
		ftp.DialWithDisabledMLSD(s.listOnly)}
	if tlsCfg != nil {
		opts = append(opts, ftp.DialWithExplicitTLS(tlsCfg))
	}
	c, err := ftp.Dial(s.t.addr, opts...)
	if err != nil {
		s.killNets()
		return nil, fmt.Errorf("connect to %s: %w", s.t.addr, err)
	}
	if err := c.Login(s.t.user, pass); err != nil {
		_ = c.Quit()
		s.killNets()
		return nil, fmt.Errorf("log in to %s as %s: %w", s.t.addr, s.t.user, err)
	}
	s.conn = c
	return c, nil
}

// Close ends the connection (QUIT, and the sockets closed whatever the
// server does).
func (s *Server) Close() error {
	if s.conn != nil {
		done := make(chan struct{})
		go func() { _ = s.conn.Quit(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
		}
		s.conn = nil
	}
	s.killNets()
	return nil
}

// watch closes the sockets when ctx ends, until the returned stop.
func (s *Server) watch(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, s.killNets)
}

// isPermanent reports a 5xx reply (the command is refused as such).
func isPermanent(err error) bool {
	var te *textproto.Error
	return errors.As(err, &te) && te.Code >= 500 && te.Code < 600
}

// List lists the folder (not its subfolders): regular files only, "."
// and ".." and links left out.
func (s *Server) List(ctx context.Context, fn func(engine.ObjectInfo) error) error {
	defer s.watch(ctx)()
	c, err := s.connect(ctx)
	if err != nil {
		return err
	}
	entries, err := c.List(s.t.dir)
	if err != nil && isPermanent(err) && c.IsTimePreciseInList() && !s.listOnly {
		// The server announced MLSD and refuses it: LIST from now on.
		s.listOnly = true
		_ = s.Close()
		if c, err = s.connect(ctx); err != nil {
			return err
		}
		entries, err = c.List(s.t.dir)
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", s.where(), err)
	}
	for _, e := range entries {
		if e.Type != ftp.EntryTypeFile || e.Name == "." || e.Name == ".." {
			continue
		}
		// Some servers list full paths; the key is the name in the folder.
		name := e.Name
		if s.t.dir != "" {
			name = strings.TrimPrefix(name, s.t.dir+"/")
		}
		if err := fn(engine.ObjectInfo{Key: name, Size: int64(e.Size), MTime: e.Time}); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) where() string {
	return "ftp://" + s.t.addr + "/" + s.t.dir
}

// download is a RETR in progress: its end is the server's word that the
// transfer completed (226), so a connection dropped mid-way is an error,
// never a short file.
type download struct {
	resp *ftp.Response
	stop func() bool
	done bool
}

func (d *download) Read(b []byte) (int, error) {
	n, err := d.resp.Read(b)
	if err == io.EOF && !d.done {
		d.done = true
		if cerr := d.resp.Close(); cerr != nil {
			return n, fmt.Errorf("transfer not confirmed by the server: %w", cerr)
		}
	}
	return n, err
}

func (d *download) Close() error {
	defer d.stop()
	return d.resp.Close()
}

// Open starts a download.
func (s *Server) Open(ctx context.Context, info engine.ObjectInfo) (io.ReadCloser, error) {
	stop := s.watch(ctx)
	c, err := s.connect(ctx)
	if err != nil {
		stop()
		return nil, err
	}
	resp, err := c.Retr(remote.Join(s.t.dir, info.Key))
	if err != nil {
		stop()
		if isPermanent(err) {
			// 550: gone since the listing (or unreadable).
			return nil, fmt.Errorf("retrieve %s: %w (%w)", info.Key, fs.ErrNotExist, err)
		}
		return nil, fmt.Errorf("retrieve %s: %w", info.Key, err)
	}
	return &download{resp: resp, stop: stop}, nil
}

// After moves a file to DIR/done or DIR/failed (a name already there gets
// the ledger id), or deletes it.
func (s *Server) After(ctx context.Context, key, action string, failed bool, id int64) error {
	defer s.watch(ctx)()
	c, err := s.connect(ctx)
	if err != nil {
		return err
	}
	from := remote.Join(s.t.dir, key)
	if action == engine.AfterDelete {
		return c.Delete(from)
	}
	dir := engine.DoneFolder
	if failed {
		dir = engine.FailedFolder
	}
	dir = remote.Join(s.t.dir, dir)
	_ = c.MakeDir(dir) // exists already, mostly
	to := path.Join(dir, key)
	if _, err := c.FileSize(to); err == nil {
		// Taken before (a file of the same name): servers overwrite on
		// rename, so this one is named after its ledger row.
		ext := path.Ext(key)
		to = path.Join(dir, fmt.Sprintf("%s-%d%s", strings.TrimSuffix(key, ext), id, ext))
	}
	return c.Rename(from, to)
}
