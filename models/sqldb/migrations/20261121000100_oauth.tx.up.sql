CREATE TABLE oauth_clients (
	id TEXT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	homepage_url TEXT NOT NULL DEFAULT '',
	type TEXT NOT NULL,
	redirect_uris {{.JSON}} NOT NULL,
	secret_hash TEXT NOT NULL DEFAULT '',
	created_at {{.Time}} NOT NULL
);
--bun:split
CREATE INDEX oauth_clients_org_id ON oauth_clients (org_id, created_at);
--bun:split
CREATE TABLE oauth_tokens (
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
);
--bun:split
CREATE INDEX oauth_tokens_request_id ON oauth_tokens (request_id);
--bun:split
CREATE INDEX oauth_tokens_user_kind_seq ON oauth_tokens (user_id, kind, seq);
--bun:split
CREATE INDEX oauth_tokens_client_id ON oauth_tokens (client_id);
--bun:split
CREATE INDEX oauth_tokens_expires_at ON oauth_tokens (expires_at);
--bun:split
CREATE TABLE admin_settings (
	org_id BIGINT PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
	settings {{.JSON}} NOT NULL,
	updated_at {{.Time}} NOT NULL
);
