package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/engine"
)

// accountTests cover users, tokens and the audit trail.
var accountTests = []subtest{
	{"DefaultUserIsLocalAdmin", testDefaultUserIsLocalAdmin},
	{"CreateAndGetUser", testCreateAndGetUser},
	{"UserNameTaken", testUserNameTaken},
	{"UserInvalid", testUserInvalid},
	{"SetPassword", testSetPassword},
	{"TokenLookup", testTokenLookup},
	{"TokenExpiry", testTokenExpiry},
	{"TokenRevokeOwnOnly", testTokenRevokeOwnOnly},
	{"TokenOneTimeUse", testTokenOneTimeUse},
	{"TokenList", testTokenList},
	{"Audit", testAudit},
}

func (e *env) addUser(name, role string) *engine.User {
	e.t.Helper()
	u, err := e.s.CreateUser(e.ctx, &engine.CreateUserParams{Name: name, Role: role, Now: e.now()})
	require.NoError(e.t, err)
	return u
}

func (e *env) addToken(userID int64, kind, hash string, expires *time.Time) *engine.Token {
	e.t.Helper()
	tok, err := e.s.CreateToken(e.ctx, &engine.CreateTokenParams{UserID: userID, Name: "t-" + hash, Kind: kind, Hash: hash, ExpiresAt: expires, Now: e.now()})
	require.NoError(e.t, err)
	return tok
}

func testDefaultUserIsLocalAdmin(t *testing.T, e *env) {
	require.Equal(t, int64(1), e.user.ID)
	require.True(t, e.user.IsAdmin())
	require.False(t, e.user.HasPassword)
	require.Empty(t, e.user.PasswordHash, "DefaultUser never carries a hash")
	users, err := e.s.ListUsers(e.ctx)
	require.NoError(t, err)
	require.Len(t, users, 1)
}

func testCreateAndGetUser(t *testing.T, e *env) {
	u, err := e.s.CreateUser(e.ctx, &engine.CreateUserParams{Name: " ana ", Role: engine.RoleUser, PasswordHash: "h1", Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, "ana", u.Name, "names are trimmed")
	require.Equal(t, engine.RoleUser, u.Role)
	require.True(t, u.HasPassword)
	require.Equal(t, e.now(), u.CreatedAt)

	byID, err := e.s.GetUser(e.ctx, u.ID)
	require.NoError(t, err)
	require.Equal(t, "h1", byID.PasswordHash)
	byName, err := e.s.GetUserByName(e.ctx, "ana")
	require.NoError(t, err)
	require.Equal(t, u.ID, byName.ID)
	require.Equal(t, "h1", byName.PasswordHash)

	users, err := e.s.ListUsers(e.ctx)
	require.NoError(t, err)
	require.Len(t, users, 2)
	require.Equal(t, "ana", users[1].Name)
	require.True(t, users[1].HasPassword)
	require.Empty(t, users[1].PasswordHash, "listings carry no hashes")

	_, err = e.s.GetUser(e.ctx, 999)
	require.True(t, engine.IsNotFound(err))
	_, err = e.s.GetUserByName(e.ctx, "nobody")
	require.True(t, engine.IsNotFound(err))
}

func testUserNameTaken(t *testing.T, e *env) {
	e.addUser("bo", engine.RoleUser)
	_, err := e.s.CreateUser(e.ctx, &engine.CreateUserParams{Name: "bo", Role: engine.RoleAdmin, Now: e.now()})
	require.Equal(t, engine.ECONFLICT, engine.ErrorCode(err))
}

func testUserInvalid(t *testing.T, e *env) {
	_, err := e.s.CreateUser(e.ctx, &engine.CreateUserParams{Name: "  ", Role: engine.RoleUser, Now: e.now()})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
	_, err = e.s.CreateUser(e.ctx, &engine.CreateUserParams{Name: "x", Role: "root", Now: e.now()})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
}

func testSetPassword(t *testing.T, e *env) {
	u := e.addUser("cy", engine.RoleUser)
	require.False(t, u.HasPassword)
	require.NoError(t, e.s.SetPassword(e.ctx, &engine.SetPasswordParams{UserID: u.ID, PasswordHash: "h2"}))
	got, err := e.s.GetUser(e.ctx, u.ID)
	require.NoError(t, err)
	require.Equal(t, "h2", got.PasswordHash)
	require.True(t, got.HasPassword)
	require.NoError(t, e.s.SetPassword(e.ctx, &engine.SetPasswordParams{UserID: u.ID}))
	got, err = e.s.GetUser(e.ctx, u.ID)
	require.NoError(t, err)
	require.False(t, got.HasPassword)
	err = e.s.SetPassword(e.ctx, &engine.SetPasswordParams{UserID: 999, PasswordHash: "h"})
	require.True(t, engine.IsNotFound(err))
}

func testTokenLookup(t *testing.T, e *env) {
	u := e.addUser("di", engine.RoleUser)
	tok := e.addToken(u.ID, engine.TokenAPI, "hash-a", nil)
	require.Equal(t, engine.TokenAPI, tok.Kind)
	require.Nil(t, tok.ExpiresAt)

	got, owner, err := e.s.LookupToken(e.ctx, &engine.LookupTokenParams{Hash: "hash-a", Kind: engine.TokenAPI, Now: e.now()})
	require.NoError(t, err)
	require.Equal(t, tok.ID, got.ID)
	require.Equal(t, u.ID, owner.ID)
	require.Equal(t, "di", owner.Name)
	require.Empty(t, owner.PasswordHash)

	// The kind must match: an API token is not a session.
	_, _, err = e.s.LookupToken(e.ctx, &engine.LookupTokenParams{Hash: "hash-a", Kind: engine.TokenSession, Now: e.now()})
	require.True(t, engine.IsNotFound(err))
	_, _, err = e.s.LookupToken(e.ctx, &engine.LookupTokenParams{Hash: "nope", Kind: engine.TokenAPI, Now: e.now()})
	require.True(t, engine.IsNotFound(err))

	require.NoError(t, e.s.TouchToken(e.ctx, tok.ID, e.advance(time.Minute)))
	got, _, err = e.s.LookupToken(e.ctx, &engine.LookupTokenParams{Hash: "hash-a", Kind: engine.TokenAPI, Now: e.now()})
	require.NoError(t, err)
	require.NotNil(t, got.LastUsedAt)
	require.Equal(t, e.now(), *got.LastUsedAt)

	_, err = e.s.CreateToken(e.ctx, &engine.CreateTokenParams{UserID: 999, Kind: engine.TokenAPI, Hash: "h-x", Now: e.now()})
	require.True(t, engine.IsNotFound(err), "a token needs an existing account")
	_, err = e.s.CreateToken(e.ctx, &engine.CreateTokenParams{UserID: u.ID, Kind: "magic", Hash: "h-y", Now: e.now()})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
}

func testTokenExpiry(t *testing.T, e *env) {
	exp := e.now().Add(time.Hour)
	e.addToken(e.user.ID, engine.TokenSession, "sess", &exp)
	lookup := func() error {
		_, _, err := e.s.LookupToken(e.ctx, &engine.LookupTokenParams{Hash: "sess", Kind: engine.TokenSession, Now: e.now()})
		return err
	}
	require.NoError(t, lookup())
	e.advance(59 * time.Minute)
	require.NoError(t, lookup())
	e.advance(time.Minute)
	require.True(t, engine.IsNotFound(lookup()), "a token is dead at its expiry")

	forever := e.addToken(e.user.ID, engine.TokenAPI, "api", nil)
	n, err := e.s.DeleteExpiredTokens(e.ctx, e.now())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	toks, err := e.s.ListTokens(e.ctx, &engine.ListTokensParams{})
	require.NoError(t, err)
	require.Len(t, toks, 1)
	require.Equal(t, forever.ID, toks[0].ID)
}

func testTokenRevokeOwnOnly(t *testing.T, e *env) {
	a := e.addUser("ed", engine.RoleUser)
	b := e.addUser("fi", engine.RoleUser)
	tok := e.addToken(a.ID, engine.TokenAPI, "ha", nil)
	err := e.s.DeleteToken(e.ctx, &engine.DeleteTokenParams{ID: tok.ID, UserID: b.ID})
	require.True(t, engine.IsNotFound(err), "another account's token is not found")
	require.NoError(t, e.s.DeleteToken(e.ctx, &engine.DeleteTokenParams{ID: tok.ID, UserID: a.ID}))
	_, _, err = e.s.LookupToken(e.ctx, &engine.LookupTokenParams{Hash: "ha", Kind: engine.TokenAPI, Now: e.now()})
	require.True(t, engine.IsNotFound(err), "a revoked token no longer works")
}

func testTokenOneTimeUse(t *testing.T, e *env) {
	tok := e.addToken(e.user.ID, engine.TokenSignIn, "once", nil)
	require.NoError(t, e.s.DeleteToken(e.ctx, &engine.DeleteTokenParams{ID: tok.ID}))
	err := e.s.DeleteToken(e.ctx, &engine.DeleteTokenParams{ID: tok.ID})
	require.True(t, engine.IsNotFound(err), "only one caller consumes a token")
}

func testTokenList(t *testing.T, e *env) {
	a := e.addUser("gu", engine.RoleUser)
	t1 := e.addToken(a.ID, engine.TokenAPI, "h1", nil)
	e.advance(time.Second)
	t2 := e.addToken(a.ID, engine.TokenAPI, "h2", nil)
	e.addToken(a.ID, engine.TokenSession, "h3", nil)
	e.addToken(e.user.ID, engine.TokenAPI, "h4", nil)
	toks, err := e.s.ListTokens(e.ctx, &engine.ListTokensParams{UserID: a.ID, Kind: engine.TokenAPI})
	require.NoError(t, err)
	require.Len(t, toks, 2)
	require.Equal(t, []int64{t2.ID, t1.ID}, []int64{toks[0].ID, toks[1].ID}, "newest first")
	all, err := e.s.ListTokens(e.ctx, &engine.ListTokensParams{})
	require.NoError(t, err)
	require.Len(t, all, 4)
}

func testAudit(t *testing.T, e *env) {
	a := e.addUser("hu", engine.RoleUser)
	var ids []int64
	for i, action := range []string{"job.create", "job.pause", "job.export"} {
		uid, name := e.user.ID, e.user.Name
		if i == 1 {
			uid, name = a.ID, a.Name
		}
		got, err := e.s.RecordAudit(e.ctx, &engine.AuditEntry{At: e.advance(time.Second), UserID: uid, UserName: name,
			Action: action, Object: "job 7", IP: "127.0.0.1", Detail: "x"})
		require.NoError(t, err)
		require.Positive(t, got.ID)
		ids = append(ids, got.ID)
	}
	all, err := e.s.ListAudit(e.ctx, &engine.ListAuditParams{})
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, "job.export", all[0].Action, "newest first")
	require.Equal(t, "127.0.0.1", all[0].IP)
	require.Equal(t, "job 7", all[0].Object)
	require.Equal(t, e.now(), all[0].At)

	mine, err := e.s.ListAudit(e.ctx, &engine.ListAuditParams{UserID: a.ID})
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, "job.pause", mine[0].Action)

	older, err := e.s.ListAudit(e.ctx, &engine.ListAuditParams{Before: ids[2], Limit: 1})
	require.NoError(t, err)
	require.Len(t, older, 1)
	require.Equal(t, ids[1], older[0].ID)

	_, err = e.s.RecordAudit(e.ctx, &engine.AuditEntry{At: e.now()})
	require.Equal(t, engine.EINVALID, engine.ErrorCode(err))
}
