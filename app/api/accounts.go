package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/engine"
)

// CreateAPIToken makes an API token for an account and returns it with
// its secret, which is shown once and never stored.
func CreateAPIToken(ctx context.Context, st engine.Store, userID int64, name string, now time.Time) (*engine.Token, string, error) {
	secret, err := NewSecret()
	if err != nil {
		return nil, "", err
	}
	tok, err := st.CreateToken(ctx, &engine.CreateTokenParams{UserID: userID, Name: name, Kind: engine.TokenAPI, Hash: HashSecret(secret), Now: now})
	if err != nil {
		return nil, "", err
	}
	return tok, secret, nil
}

// CreateUser adds an account (with a password when one is given) and a
// first API token, whose secret it returns.
func CreateUser(ctx context.Context, st engine.Store, name string, admin bool, password string, now time.Time) (*engine.User, string, error) {
	role := engine.RoleUser
	if admin {
		role = engine.RoleAdmin
	}
	var hash string
	if password != "" {
		var err error
		if hash, err = HashPassword(password); err != nil {
			return nil, "", err
		}
	}
	u, err := st.CreateUser(ctx, &engine.CreateUserParams{Name: name, Role: role, PasswordHash: hash, Now: now})
	if err != nil {
		return nil, "", err
	}
	_, secret, err := CreateAPIToken(ctx, st, u.ID, "created with the account", now)
	if err != nil {
		return nil, "", err
	}
	u.PasswordHash = ""
	return u, secret, nil
}

// SignInLinkTTL is how long a one-time sign-in link works.
const SignInLinkTTL = 24 * time.Hour

// CreateSignInLink makes a one-time sign-in token for an account and
// returns the link to open (base like "http://127.0.0.1:8080").
func CreateSignInLink(ctx context.Context, st engine.Store, userID int64, base string, now time.Time) (string, error) {
	secret, err := NewSecret()
	if err != nil {
		return "", err
	}
	exp := now.Add(SignInLinkTTL)
	if _, err := st.CreateToken(ctx, &engine.CreateTokenParams{UserID: userID, Name: "sign-in link", Kind: engine.TokenSignIn,
		Hash: HashSecret(secret), ExpiresAt: &exp, Now: now}); err != nil {
		return "", err
	}
	return base + "/signin?token=" + secret, nil
}

// NeedsFirstSignIn reports whether nobody can sign in yet: no account has
// a password and no API token exists.
func NeedsFirstSignIn(ctx context.Context, st engine.Store) (bool, error) {
	users, err := st.ListUsers(ctx)
	if err != nil {
		return false, err
	}
	for _, u := range users {
		if u.HasPassword {
			return false, nil
		}
	}
	toks, err := st.ListTokens(ctx, &engine.ListTokensParams{Kind: engine.TokenAPI})
	if err != nil {
		return false, err
	}
	return len(toks) == 0, nil
}

// HasAdminWithPassword reports whether an admin can sign in with a password.
func HasAdminWithPassword(ctx context.Context, st engine.Store) (bool, error) {
	users, err := st.ListUsers(ctx)
	if err != nil {
		return false, err
	}
	for _, u := range users {
		if u.IsAdmin() && u.HasPassword {
			return true, nil
		}
	}
	return false, nil
}

func asMaxBytes(err error, target **http.MaxBytesError) bool { return errors.As(err, target) }

// pathID reads a positive integer path value.
func pathID(r *http.Request, name, what string) (int64, error) {
	v := r.PathValue(name)
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, engine.Errorf(engine.EINVALID, "%s id %q is not a positive whole number", what, v)
	}
	return id, nil
}

// intParam reads an optional integer query parameter within [lo, hi].
func intParam(v, name string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, engine.FieldErrorf(name, "%q is not a whole number from %d to %d", v, lo, hi)
	}
	return n, nil
}

func jobObject(id int64) string { return fmt.Sprintf("job %d", id) }
