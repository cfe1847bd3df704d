-- +goose Up
-- Tokens of three kinds share one table: API tokens (no expiry unless
-- given), browser sessions and the one-time sign-in link.
ALTER TABLE api_tokens ADD COLUMN kind TEXT NOT NULL DEFAULT 'api'
    CHECK (kind IN ('api', 'session', 'signin'));
ALTER TABLE api_tokens ADD COLUMN expires_at INTEGER;
CREATE INDEX api_tokens_user ON api_tokens (user_id, kind);

-- Who did what, from where. No foreign key: the trail outlives the
-- accounts and jobs it names.
CREATE TABLE audit_log (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    at        INTEGER NOT NULL,
    user_id   INTEGER NOT NULL,
    user_name TEXT    NOT NULL,
    action    TEXT    NOT NULL,
    object    TEXT,
    ip        TEXT,
    detail    TEXT
);
CREATE INDEX audit_log_user ON audit_log (user_id, id);

-- +goose Down
DROP TABLE audit_log;
DROP INDEX api_tokens_user;
ALTER TABLE api_tokens DROP COLUMN expires_at;
ALTER TABLE api_tokens DROP COLUMN kind;
