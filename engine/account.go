package engine

import (
	"context"
	"time"
)

// Roles of accounts. An admin sees and manages every user's work; a user
// only their own.
const (
	RoleAdmin = "admin"
	RoleUser  = "user"
)

// Token kinds. API tokens are long-lived bearer tokens for scripts;
// sessions are browser sign-ins behind a cookie; a sign-in token is the
// one-time link printed on first start.
const (
	TokenAPI     = "api"
	TokenSession = "session"
	TokenSignIn  = "signin"
)

// AccountStore keeps accounts, their credentials and the audit trail. Only
// hashes of secrets are ever stored.
type AccountStore interface {
	// CreateUser adds an account; a taken name is ECONFLICT.
	CreateUser(ctx context.Context, p *CreateUserParams) (*User, error)
	// GetUser returns an account (with its password hash) or ErrNotFound.
	GetUser(ctx context.Context, id int64) (*User, error)
	// GetUserByName returns an account (with its password hash) or ErrNotFound.
	GetUserByName(ctx context.Context, name string) (*User, error)
	// ListUsers returns every account ordered by id, without hashes.
	ListUsers(ctx context.Context) ([]*User, error)
	// SetPassword replaces an account's password hash ("" removes it).
	SetPassword(ctx context.Context, p *SetPasswordParams) error

	// CreateToken stores a token by the hash of its secret.
	CreateToken(ctx context.Context, p *CreateTokenParams) (*Token, error)
	// LookupToken returns the unexpired token of that kind with that hash
	// and its account, or ErrNotFound.
	LookupToken(ctx context.Context, p *LookupTokenParams) (*Token, *User, error)
	// TouchToken records that a token was used at now.
	TouchToken(ctx context.Context, id int64, now time.Time) error
	// ListTokens returns tokens newest first: of one account (UserID) or
	// of all, of one kind or all.
	ListTokens(ctx context.Context, p *ListTokensParams) ([]*Token, error)
	// DeleteToken revokes a token; with UserID set only that account's.
	// A token that does not exist (or is another's) is ErrNotFound, so
	// exactly one caller can consume a one-time token.
	DeleteToken(ctx context.Context, p *DeleteTokenParams) error
	// DeleteExpiredTokens removes tokens whose expiry has passed.
	DeleteExpiredTokens(ctx context.Context, now time.Time) (int, error)

	// RecordAudit appends an entry to the audit trail.
	RecordAudit(ctx context.Context, e *AuditEntry) (*AuditEntry, error)
	// ListAudit returns entries newest first, keyset by id.
	ListAudit(ctx context.Context, p *ListAuditParams) ([]*AuditEntry, error)
}

// CreateUserParams are the arguments of AccountStore.CreateUser.
type CreateUserParams struct {
	Name string
	Role string
	// PasswordHash is an encoded hash (see app/auth), or "" for none.
	PasswordHash string
	Now          time.Time
}

// SetPasswordParams are the arguments of AccountStore.SetPassword.
type SetPasswordParams struct {
	UserID       int64
	PasswordHash string
}

// Token is a stored credential; its secret is never stored.
type Token struct {
	ID         int64      `json:"id"`
	UserID     int64      `json:"userId"`
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt,omitempty"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
}

// CreateTokenParams are the arguments of AccountStore.CreateToken.
type CreateTokenParams struct {
	UserID int64
	Name   string
	Kind   string
	// Hash identifies the secret (a SHA-256 of it); it must be unique.
	Hash      string
	ExpiresAt *time.Time
	Now       time.Time
}

// LookupTokenParams are the arguments of AccountStore.LookupToken.
type LookupTokenParams struct {
	Hash string
	Kind string
	Now  time.Time
}

// ListTokensParams are the arguments of AccountStore.ListTokens.
type ListTokensParams struct {
	UserID int64
	Kind   string
}

// DeleteTokenParams are the arguments of AccountStore.DeleteToken.
type DeleteTokenParams struct {
	ID     int64
	UserID int64
}

// AuditEntry records who did what to which object, and from where.
type AuditEntry struct {
	ID       int64     `json:"id"`
	At       time.Time `json:"at"`
	UserID   int64     `json:"userId"`
	UserName string    `json:"userName"`
	// Action is a verb such as job.create, job.pause, job.export.
	Action string `json:"action"`
	// Object names the target, e.g. "job 12" or "pipeline lookup".
	Object string `json:"object,omitempty"`
	// IP is the client's address.
	IP     string `json:"ip,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// ListAuditParams are the arguments of AccountStore.ListAudit.
type ListAuditParams struct {
	// UserID 0 lists every account's entries.
	UserID int64
	// Before continues a listing: entries with ids below it.
	Before int64
	Limit  int
}
