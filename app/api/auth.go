package api

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alexedwards/argon2id"
	"golang.org/x/time/rate"

	"github.com/sluicehq/sluice/engine"
)

// SessionCookie is the name of the browser session cookie.
const SessionCookie = "sluice_session"

// touchEvery bounds how often a token's last use is written.
const touchEvery = time.Minute

// caller is who is calling: an account reached through an API token or a
// session cookie.
type caller struct {
	user      *engine.User
	token     *engine.Token
	viaCookie bool
	secret    string // the session's secret (for its CSRF token)
	// local is the desktop window's in-process caller (local.go).
	local bool
	ip    string
}

// NewSecret returns a new random token secret ("slc_" + 43 characters).
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "slc_" + base64.RawURLEncoding.EncodeToString(b), nil
}

// HashSecret is how a token's secret is stored: a SHA-256 (the secret has
// 256 random bits, so a slow hash adds nothing).
func HashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// HashPassword encodes a password with argon2id (RFC 9106 parameters of the
// argon2id package's defaults: 64 MiB, 1 pass, 2 lanes).
func HashPassword(pw string) (string, error) {
	if len(pw) < 8 {
		return "", engine.Errorf(engine.EINVALID, "a password needs at least 8 characters")
	}
	return argon2id.CreateHash(pw, argon2id.DefaultParams)
}

// dummyHash is checked against when no account matches, so a wrong name
// takes as long as a wrong password.
var dummyHash = sync.OnceValue(func() string {
	h, _ := argon2id.CreateHash("not a password of anyone", argon2id.DefaultParams)
	return h
})

func checkPassword(pw, hash string) bool {
	if hash == "" {
		_, _, _ = argon2id.CheckHash(pw, dummyHash())
		return false
	}
	ok, _, err := argon2id.CheckHash(pw, hash)
	return err == nil && ok
}

// csrfToken is derived from the session secret, which only the HttpOnly
// cookie carries: a page of another site can neither read the cookie nor
// compute the token.
func csrfToken(secret string) string {
	h := sha256.Sum256([]byte("sluice csrf\x00" + secret))
	return hex.EncodeToString(h[:16])
}

func (s *Server) validCSRF(c *caller, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(csrfToken(c.secret))) == 1
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// authenticate finds the caller: a bearer token first, then the session
// cookie. No credential is not an error (public routes allow it); a wrong
// bearer token is.
func (s *Server) authenticate(r *http.Request) (*caller, error) {
	if c := localCaller(r); c != nil {
		return c, nil
	}
	ip := clientIP(r)
	if h := r.Header.Get("Authorization"); h != "" {
		secret, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return nil, engine.Errorf(engine.EUNAUTHORIZED, "the Authorization header must be \"Bearer TOKEN\"")
		}
		tok, u, err := s.store.LookupToken(r.Context(), &engine.LookupTokenParams{Hash: HashSecret(strings.TrimSpace(secret)), Kind: engine.TokenAPI, Now: s.now()})
		if engine.IsNotFound(err) {
			return nil, engine.Errorf(engine.EUNAUTHORIZED, "the API token is not valid (mistyped or revoked)")
		}
		if err != nil {
			return nil, err
		}
		s.touch(r, tok)
		return &caller{user: u, token: tok, ip: ip}, nil
	}
	ck, err := r.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		return nil, nil
	}
	tok, u, err := s.store.LookupToken(r.Context(), &engine.LookupTokenParams{Hash: HashSecret(ck.Value), Kind: engine.TokenSession, Now: s.now()})
	if engine.IsNotFound(err) {
		return nil, nil // expired or signed out: anonymous
	}
	if err != nil {
		return nil, err
	}
	s.touch(r, tok)
	return &caller{user: u, token: tok, viaCookie: true, secret: ck.Value, ip: ip}, nil
}

func (s *Server) touch(r *http.Request, tok *engine.Token) {
	now := s.now()
	s.touchMu.Lock()
	last, seen := s.touched[tok.ID]
	due := !seen || now.Sub(last) >= touchEvery
	if due {
		if len(s.touched) > 100000 {
			clear(s.touched)
		}
		s.touched[tok.ID] = now
	}
	s.touchMu.Unlock()
	if due {
		if err := s.store.TouchToken(r.Context(), tok.ID, now); err != nil {
			s.log.Warn("recording a token's use failed", "token_id", tok.ID, "err", err)
		}
	}
}

// audit records an action of the caller; a failure is logged, never shown.
func (s *Server) audit(r *http.Request, c *caller, action, object, detail string) {
	e := &engine.AuditEntry{At: s.now(), Action: action, Object: object, IP: clientIP(r), Detail: detail}
	if c != nil {
		e.UserID, e.UserName = c.user.ID, c.user.Name
	}
	if _, err := s.store.RecordAudit(r.Context(), e); err != nil {
		s.log.Warn("writing the audit trail failed", "action", action, "object", object, "err", err)
	}
}

// loginLimiter slows password guessing per client address and per name.
type loginLimiter struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newLoginLimiter() *loginLimiter { return &loginLimiter{m: map[string]*rate.Limiter{}} }

// allow takes a token for key at now: a burst of 10, then one every 6
// seconds.
func (l *loginLimiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.m[key]
	if lim == nil {
		if len(l.m) > 10000 {
			clear(l.m)
		}
		lim = rate.NewLimiter(rate.Every(6*time.Second), 10)
		l.m[key] = lim
	}
	return lim.AllowN(now, 1)
}

type meOut struct {
	User      *engine.User `json:"user"`
	CSRFToken string       `json:"csrfToken,omitempty"`
	// Via is "token", "session" or "desktop" (the desktop window, which
	// has no sign-in and no sign-out).
	Via string `json:"via"`
}

func (c *caller) me() meOut {
	o := meOut{User: c.user, Via: "token"}
	if c.local {
		o.Via = "desktop"
	}
	if c.viaCookie {
		o.Via, o.CSRFToken = "session", csrfToken(c.secret)
	}
	return o
}

func (s *Server) me(w http.ResponseWriter, _ *http.Request, c *caller) error {
	return writeJSON(w, http.StatusOK, c.me())
}

// startSession creates a session for u and sets its cookie.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, u *engine.User, how string) (*caller, error) {
	secret, err := NewSecret()
	if err != nil {
		return nil, err
	}
	exp := s.now().Add(s.cfg.SessionTTL)
	tok, err := s.store.CreateToken(r.Context(), &engine.CreateTokenParams{UserID: u.ID, Name: how + " from " + clientIP(r),
		Kind: engine.TokenSession, Hash: HashSecret(secret), ExpiresAt: &exp, Now: s.now()})
	if err != nil {
		return nil, err
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: secret, Path: "/", Expires: exp, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: s.cfg.SecureCookies})
	c := &caller{user: u, token: tok, viaCookie: true, secret: secret, ip: clientIP(r)}
	s.audit(r, c, "session.start", "user "+u.Name, how)
	return c, nil
}

type loginIn struct {
	Name     string `json:"name"`
	Password string `json:"password"`
}

func (s *Server) login(w http.ResponseWriter, r *http.Request, _ *caller) error {
	var in loginIn
	if err := decodeJSON(w, r, &in, 64<<10); err != nil {
		return err
	}
	ip := clientIP(r)
	if now := s.now(); !s.logins.allow("ip "+ip, now) || !s.logins.allow("name "+in.Name, now) {
		w.Header().Set("Retry-After", "6")
		return engine.Errorf(engine.ETOOMANY, "too many sign-in attempts; wait a few seconds")
	}
	u, err := s.store.GetUserByName(r.Context(), in.Name)
	hash := ""
	if err == nil {
		hash = u.PasswordHash
	} else if !engine.IsNotFound(err) {
		return err
	}
	if !checkPassword(in.Password, hash) {
		s.audit(r, nil, "session.refused", "user "+in.Name, "wrong name or password")
		return engine.Errorf(engine.EUNAUTHORIZED, "wrong name or password")
	}
	u.PasswordHash = ""
	c, err := s.startSession(w, r, u, "password")
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, c.me())
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, c *caller) error {
	if c.viaCookie {
		if err := s.store.DeleteToken(r.Context(), &engine.DeleteTokenParams{ID: c.token.ID}); err != nil && !engine.IsNotFound(err) {
			return err
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteLaxMode})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// signInLink consumes a one-time sign-in token and starts a session.
func (s *Server) signInLink(w http.ResponseWriter, r *http.Request, _ *caller) error {
	secret := r.URL.Query().Get("token")
	if !s.logins.allow("ip "+clientIP(r), s.now()) {
		return engine.Errorf(engine.ETOOMANY, "too many sign-in attempts; wait a few seconds")
	}
	tok, u, err := s.store.LookupToken(r.Context(), &engine.LookupTokenParams{Hash: HashSecret(secret), Kind: engine.TokenSignIn, Now: s.now()})
	if err == nil {
		// Deleting is what consumes it: of two racing requests one wins.
		err = s.store.DeleteToken(r.Context(), &engine.DeleteTokenParams{ID: tok.ID})
	}
	if engine.IsNotFound(err) {
		msg := "this sign-in link was used already or has expired; run `sluice user signin-link` for a new one"
		if strings.Contains(r.Header.Get("Accept"), "text/html") {
			// A person clicked it: show the sign-in page with the reason.
			http.Redirect(w, r, "/login?error="+url.QueryEscape(msg), http.StatusSeeOther)
			return nil
		}
		return engine.Errorf(engine.EUNAUTHORIZED, "%s", msg)
	}
	if err != nil {
		return err
	}
	if _, err := s.startSession(w, r, u, "sign-in link"); err != nil {
		return err
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}

type tokenIn struct {
	Name string `json:"name"`
}

type tokenOut struct {
	*engine.Token
	// Secret is shown once, when the token is made.
	Secret string `json:"token,omitempty"`
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in tokenIn
	if err := decodeJSON(w, r, &in, 64<<10); err != nil {
		return err
	}
	if strings.TrimSpace(in.Name) == "" {
		return engine.FieldErrorf("name", "a token needs a name (what uses it)")
	}
	tok, secret, err := CreateAPIToken(r.Context(), s.store, c.user.ID, in.Name, s.now())
	if err != nil {
		return err
	}
	s.audit(r, c, "token.create", fmt.Sprintf("token %d", tok.ID), in.Name)
	return writeJSON(w, http.StatusCreated, tokenOut{Token: tok, Secret: secret})
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, c *caller) error {
	toks, err := s.store.ListTokens(r.Context(), &engine.ListTokensParams{UserID: c.user.ID, Kind: engine.TokenAPI})
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"tokens": nonNil(toks)})
}

func (s *Server) deleteToken(w http.ResponseWriter, r *http.Request, c *caller) error {
	id, err := pathID(r, "id", "token")
	if err != nil {
		return err
	}
	owner := c.user.ID
	if c.user.IsAdmin() {
		owner = 0
	}
	if err := s.store.DeleteToken(r.Context(), &engine.DeleteTokenParams{ID: id, UserID: owner}); err != nil {
		return err
	}
	s.audit(r, c, "token.revoke", fmt.Sprintf("token %d", id), "")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listUsers(w http.ResponseWriter, r *http.Request, _ *caller) error {
	users, err := s.store.ListUsers(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"users": nonNil(users)})
}

type userIn struct {
	Name     string `json:"name"`
	Admin    bool   `json:"admin"`
	Password string `json:"password"`
}

func (s *Server) createUser(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in userIn
	if err := decodeJSON(w, r, &in, 64<<10); err != nil {
		return err
	}
	u, secret, err := CreateUser(r.Context(), s.store, in.Name, in.Admin, in.Password, s.now())
	if err != nil {
		return err
	}
	s.audit(r, c, "user.create", "user "+u.Name, u.Role)
	return writeJSON(w, http.StatusCreated, map[string]any{"user": u, "token": secret})
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := r.URL.Query()
	p := &engine.ListAuditParams{UserID: c.user.ID}
	if c.user.IsAdmin() {
		p.UserID = 0
	}
	var err error
	if p.Limit, err = intParam(q.Get("pageSize"), "pageSize", 100, 1, 1000); err != nil {
		return err
	}
	if b := q.Get("before"); b != "" {
		if p.Before, err = strconv.ParseInt(b, 10, 64); err != nil || p.Before <= 0 {
			return engine.FieldErrorf("before", "%q is not an entry id", b)
		}
	}
	list, err := s.store.ListAudit(r.Context(), p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"entries": nonNil(list)})
}

// decodeJSON reads a JSON body of at most limit bytes; unknown fields are
// an error naming them.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if asMaxBytes(err, &mbe) {
			return err
		}
		return engine.Errorf(engine.EINVALID, "the request body is not the JSON expected: %v", err)
	}
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
