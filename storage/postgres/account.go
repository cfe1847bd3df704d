package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluicehq/sluice/engine"
)

const userColumns = `id, name, role, COALESCE(password_hash, ''), created_at`

func scanUser(row scanner) (*engine.User, error) {
	var u engine.User
	var created int64
	if err := row.Scan(&u.ID, &u.Name, &u.Role, &u.PasswordHash, &created); err != nil {
		return nil, err
	}
	u.CreatedAt = fromMS(created)
	u.HasPassword = u.PasswordHash != ""
	return &u, nil
}

// CreateUser adds an account; the unique name decides between two
// concurrent creators.
func (s *Store) CreateUser(ctx context.Context, p *engine.CreateUserParams) (*engine.User, error) {
	name := strings.TrimSpace(p.Name)
	if name == "" {
		return nil, engine.Errorf(engine.EINVALID, "a user needs a name")
	}
	if err := engine.ValidateRole(p.Role); err != nil {
		return nil, err
	}
	u, err := scanUser(queryRow(ctx, s.pool, `INSERT INTO users (name, role, password_hash, created_at)
		VALUES (?, ?, NULLIF(?, ''), ?) RETURNING `+userColumns, name, p.Role, p.PasswordHash, ms(p.Now)))
	if uniqueViolation(err) {
		err = engine.Errorf(engine.ECONFLICT, "a user named %q exists already", name)
	}
	if err != nil {
		return nil, fmt.Errorf("create user %q: %w", name, err)
	}
	return u, nil
}

// GetUser returns an account by id.
func (s *Store) GetUser(ctx context.Context, id int64) (*engine.User, error) {
	u, err := scanUser(queryRow(ctx, s.pool, `SELECT `+userColumns+` FROM users WHERE id = ?`, id))
	if noRows(err) {
		return nil, notFound("user", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get user %d: %w", id, err)
	}
	return u, nil
}

// GetUserByName returns an account by name.
func (s *Store) GetUserByName(ctx context.Context, name string) (*engine.User, error) {
	u, err := scanUser(queryRow(ctx, s.pool, `SELECT `+userColumns+` FROM users WHERE name = ?`, name))
	if noRows(err) {
		return nil, notFound("user", fmt.Sprintf("%q", name))
	}
	if err != nil {
		return nil, fmt.Errorf("get user %q: %w", name, err)
	}
	return u, nil
}

// ListUsers returns every account without its hash.
func (s *Store) ListUsers(ctx context.Context) ([]*engine.User, error) {
	rows, err := query(ctx, s.pool, `SELECT `+userColumns+` FROM users ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	var out []*engine.User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		u.PasswordHash = ""
		out = append(out, u)
	}
	return out, rows.Err()
}

// SetPassword replaces an account's password hash.
func (s *Store) SetPassword(ctx context.Context, p *engine.SetPasswordParams) error {
	n, err := exec(ctx, s.pool, `UPDATE users SET password_hash = NULLIF(?, '') WHERE id = ?`, p.PasswordHash, p.UserID)
	if err != nil {
		return fmt.Errorf("set password of user %d: %w", p.UserID, err)
	}
	if n == 0 {
		return notFound("user", p.UserID)
	}
	return nil
}

const tokenColumns = `id, user_id, name, kind, created_at, last_used_at, expires_at`

func scanToken(row scanner) (*engine.Token, error) {
	var t engine.Token
	var created int64
	var used, expires *int64
	if err := row.Scan(&t.ID, &t.UserID, &t.Name, &t.Kind, &created, &used, &expires); err != nil {
		return nil, err
	}
	t.CreatedAt = fromMS(created)
	t.LastUsedAt = fromNullMS(used)
	t.ExpiresAt = fromNullMS(expires)
	return &t, nil
}

// CreateToken stores a token by its hash.
func (s *Store) CreateToken(ctx context.Context, p *engine.CreateTokenParams) (*engine.Token, error) {
	if err := engine.ValidateTokenKind(p.Kind); err != nil {
		return nil, err
	}
	if p.Hash == "" {
		return nil, engine.Errorf(engine.EINVALID, "a token needs the hash of its secret")
	}
	var t *engine.Token
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var n int
		// FOR SHARE: the account cannot be deleted under the new token.
		if err := queryRow(ctx, tx, `SELECT COUNT(*) FROM (SELECT 1 FROM users WHERE id = ? FOR SHARE) u`, p.UserID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return notFound("user", p.UserID)
		}
		var err error
		t, err = scanToken(queryRow(ctx, tx, `INSERT INTO api_tokens (user_id, name, kind, token_hash, created_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?) RETURNING `+tokenColumns, p.UserID, p.Name, p.Kind, p.Hash, ms(p.Now), nullMS(p.ExpiresAt)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create token: %w", err)
	}
	return t, nil
}

// LookupToken finds an unexpired token and its account.
func (s *Store) LookupToken(ctx context.Context, p *engine.LookupTokenParams) (*engine.Token, *engine.User, error) {
	var t engine.Token
	var u engine.User
	var created, userCreated int64
	var used, expires *int64
	err := queryRow(ctx, s.pool, `SELECT t.id, t.user_id, t.name, t.kind, t.created_at, t.last_used_at, t.expires_at,
			u.id, u.name, u.role, COALESCE(u.password_hash, ''), u.created_at
		FROM api_tokens t JOIN users u ON u.id = t.user_id
		WHERE t.token_hash = ? AND t.kind = ? AND (t.expires_at IS NULL OR t.expires_at > ?)`, p.Hash, p.Kind, ms(p.Now)).
		Scan(&t.ID, &t.UserID, &t.Name, &t.Kind, &created, &used, &expires, &u.ID, &u.Name, &u.Role, &u.PasswordHash, &userCreated)
	if noRows(err) {
		return nil, nil, fmt.Errorf("token: %w", engine.ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("look up token: %w", err)
	}
	t.CreatedAt, t.LastUsedAt, t.ExpiresAt = fromMS(created), fromNullMS(used), fromNullMS(expires)
	u.CreatedAt, u.HasPassword, u.PasswordHash = fromMS(userCreated), u.PasswordHash != "", ""
	return &t, &u, nil
}

// TouchToken records a use of a token.
func (s *Store) TouchToken(ctx context.Context, id int64, now time.Time) error {
	_, err := exec(ctx, s.pool, `UPDATE api_tokens SET last_used_at = ? WHERE id = ?`, ms(now), id)
	return err
}

// ListTokens returns tokens newest first.
func (s *Store) ListTokens(ctx context.Context, p *engine.ListTokensParams) ([]*engine.Token, error) {
	q := `SELECT ` + tokenColumns + ` FROM api_tokens WHERE 1 = 1`
	var args []any
	if p.UserID != 0 {
		q += ` AND user_id = ?`
		args = append(args, p.UserID)
	}
	if p.Kind != "" {
		q += ` AND kind = ?`
		args = append(args, p.Kind)
	}
	rows, err := query(ctx, s.pool, q+` ORDER BY id DESC`, args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []*engine.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// DeleteToken revokes a token; of two concurrent deletes exactly one
// removes the row, the other gets ErrNotFound.
func (s *Store) DeleteToken(ctx context.Context, p *engine.DeleteTokenParams) error {
	q, args := `DELETE FROM api_tokens WHERE id = ?`, []any{p.ID}
	if p.UserID != 0 {
		q += ` AND user_id = ?`
		args = append(args, p.UserID)
	}
	n, err := exec(ctx, s.pool, q, args...)
	if err != nil {
		return fmt.Errorf("delete token %d: %w", p.ID, err)
	}
	if n == 0 {
		return notFound("token", p.ID)
	}
	return nil
}

// DeleteExpiredTokens removes tokens past their expiry.
func (s *Store) DeleteExpiredTokens(ctx context.Context, now time.Time) (int, error) {
	n, err := exec(ctx, s.pool, `DELETE FROM api_tokens WHERE expires_at IS NOT NULL AND expires_at <= ?`, ms(now))
	if err != nil {
		return 0, fmt.Errorf("delete expired tokens: %w", err)
	}
	return int(n), nil
}

// RecordAudit appends to the audit trail.
func (s *Store) RecordAudit(ctx context.Context, e *engine.AuditEntry) (*engine.AuditEntry, error) {
	if e.Action == "" {
		return nil, engine.Errorf(engine.EINVALID, "an audit entry needs an action")
	}
	out := *e
	err := queryRow(ctx, s.pool, `INSERT INTO audit_log (at, user_id, user_name, action, object, ip, detail)
			VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`, ms(e.At), e.UserID, e.UserName, e.Action, e.Object, e.IP, e.Detail).Scan(&out.ID)
	if err != nil {
		return nil, fmt.Errorf("record audit: %w", err)
	}
	out.At = fromMS(ms(e.At))
	return &out, nil
}

// ListAudit returns audit entries newest first.
func (s *Store) ListAudit(ctx context.Context, p *engine.ListAuditParams) ([]*engine.AuditEntry, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	q := `SELECT id, at, user_id, user_name, action, COALESCE(object, ''), COALESCE(ip, ''), COALESCE(detail, '') FROM audit_log WHERE 1 = 1`
	var args []any
	if p.UserID != 0 {
		q += ` AND user_id = ?`
		args = append(args, p.UserID)
	}
	if p.Before > 0 {
		q += ` AND id < ?`
		args = append(args, p.Before)
	}
	rows, err := query(ctx, s.pool, q+` ORDER BY id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	var out []*engine.AuditEntry
	for rows.Next() {
		var e engine.AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.UserID, &e.UserName, &e.Action, &e.Object, &e.IP, &e.Detail); err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		e.At = fromMS(at)
		out = append(out, &e)
	}
	return out, rows.Err()
}
