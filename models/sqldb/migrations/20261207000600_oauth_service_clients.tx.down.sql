-- Service clients' tokens have no user: they go, with the service clients,
-- before user_id is NOT NULL again.
DELETE FROM oauth_tokens WHERE user_id IS NULL
--bun:split
DELETE FROM oauth_clients WHERE type = 'service'
--bun:split
{{if .Postgres}}
ALTER TABLE oauth_tokens ALTER COLUMN user_id SET NOT NULL
{{else}}
CREATE TABLE oauth_tokens_rebuilt (
	kind TEXT NOT NULL,
	signature TEXT NOT NULL,
	seq BIGINT NOT NULL,
	request_id TEXT NOT NULL,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	client_id TEXT NOT NULL REFERENCES oauth_clients (id) ON DELETE CASCADE,
	user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	requested_at {{.Time}} NOT NULL,
	expires_at {{.Time}},
	active BOOLEAN NOT NULL DEFAULT TRUE,
	requested_scopes TEXT NOT NULL DEFAULT '',
	granted_scopes TEXT NOT NULL DEFAULT '',
	form TEXT NOT NULL DEFAULT '',
	session {{.JSON}} NOT NULL,
	PRIMARY KEY (kind, signature)
)
--bun:split
INSERT INTO oauth_tokens_rebuilt (kind, signature, seq, request_id, org_id, client_id, user_id, requested_at,
	expires_at, active, requested_scopes, granted_scopes, form, session)
SELECT kind, signature, seq, request_id, org_id, client_id, user_id, requested_at,
	expires_at, active, requested_scopes, granted_scopes, form, session FROM oauth_tokens
--bun:split
DROP TABLE oauth_tokens
--bun:split
ALTER TABLE oauth_tokens_rebuilt RENAME TO oauth_tokens
--bun:split
CREATE INDEX oauth_tokens_request_id ON oauth_tokens (request_id)
--bun:split
CREATE INDEX oauth_tokens_user_kind_seq ON oauth_tokens (user_id, kind, seq)
--bun:split
CREATE INDEX oauth_tokens_client_id ON oauth_tokens (client_id)
--bun:split
CREATE INDEX oauth_tokens_expires_at ON oauth_tokens (expires_at)
{{end}}
--bun:split
ALTER TABLE oauth_clients DROP COLUMN scopes
