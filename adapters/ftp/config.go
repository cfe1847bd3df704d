// Package ftp is the FTP source: a folder on an FTP server, polled, whose
// files become jobs (github.com/jlaffaye/ftp speaks the protocol). It
// lists with MLSD where the server offers it (exact times and sizes) and
// falls back to LIST when it does not or when MLSD fails; transfers are
// passive (EPSV, then PASV); explicit FTPS (AUTH TLS) is an option. The
// polling, the arrival rule, the ledger and the backoff are adapters/remote.
package ftp

import (
	"encoding/json"
	"net"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/engine"
)

// DefaultTimeout is how long the server may stay silent (connecting, on
// the control or a data connection) before the attempt is given up.
const DefaultTimeout = 30 * time.Second

// Config is an FTP source's config (SourceRecord.Config). It never holds
// the password: Password names where it is.
type Config struct {
	// URL is ftp://USER@HOST[:PORT]/DIR (ftps:// for explicit FTPS). No
	// password in it.
	URL string `json:"url"`
	// Password names the password's environment variable or file. None:
	// anonymous login.
	Password remote.Secret `json:"password,omitzero"`
	// InsecureSkipVerify accepts any TLS certificate (FTPS only).
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// TimeoutMS bounds a silent server, in milliseconds (0 = DefaultTimeout).
	TimeoutMS int64 `json:"timeoutMs,omitempty"`
	engine.ArrivalRule
}

// target is a parsed URL.
type target struct {
	addr, user, dir string
	tls             bool
}

// ParseConfig reads and checks an FTP source's config.
func ParseConfig(raw json.RawMessage) (*Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, engine.Errorf(engine.EINVALID, "ftp source config: %v", err)
	}
	if _, err := c.target(); err != nil {
		return nil, err
	}
	if err := c.Password.Validate("ftp password"); err != nil {
		return nil, err
	}
	if err := c.ArrivalRule.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
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

func (c *Config) timeout() time.Duration {
	if c.TimeoutMS <= 0 {
		return DefaultTimeout
	}
	return time.Duration(c.TimeoutMS) * time.Millisecond
}

// target parses the URL.
func (c *Config) target() (*target, error) {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil, engine.Errorf(engine.EINVALID, "ftp source: url: %v", err)
	}
	t := &target{}
	switch u.Scheme {
	case "ftp":
	case "ftps":
		t.tls = true
	default:
		return nil, engine.Errorf(engine.EINVALID, "ftp source: url %q: want ftp://USER@HOST:PORT/DIR or ftps://...", u.Redacted())
	}
	if _, has := u.User.Password(); has {
		return nil, engine.Errorf(engine.EINVALID, "ftp source: url %q holds a password: name it with --password-env or --password-file instead", u.Redacted())
	}
	if u.Hostname() == "" {
		return nil, engine.Errorf(engine.EINVALID, "ftp source: url %q has no host", c.URL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, engine.Errorf(engine.EINVALID, "ftp source: url %q: no query or fragment expected", c.URL)
	}
	port := u.Port()
	if port == "" {
		port = "21"
	}
	t.addr = net.JoinHostPort(u.Hostname(), port)
	t.user = "anonymous"
	if u.User != nil && u.User.Username() != "" {
		t.user = u.User.Username()
	}
	if strings.ContainsAny(u.Path, "\r\n\x00") {
		return nil, engine.Errorf(engine.EINVALID, "ftp source: url %q: control characters in the folder", c.URL)
	}
	// The folder as written after the host: "/in" is "in" from the login
	// folder, "//srv/in" is the absolute /srv/in (RFC 1738).
	t.dir = strings.TrimPrefix(u.Path, "/")
	if t.dir != "" {
		t.dir = path.Clean(t.dir)
	}
	return t, nil
}

// Where is the URL as shown to people (no password can be in it).
func (c *Config) Where() string { return c.URL }
