-- SCIM 2.0 (docs/scim.md): a user's userName (unique in its organization
-- ignoring case; users made before it, and users made through /api/v1
-- without one, take their email) and the externalId a provisioning client
-- keeps for users and groups; and the organization's provisioning tokens,
-- stored as the SHA-256 of the token only.
ALTER TABLE users ADD COLUMN user_name TEXT NOT NULL DEFAULT ''
--bun:split
ALTER TABLE users ADD COLUMN external_id TEXT NOT NULL DEFAULT ''
--bun:split
UPDATE users SET user_name = email WHERE user_name = ''
--bun:split
CREATE UNIQUE INDEX users_org_user_name ON users (org_id, lower(user_name)) WHERE user_name <> ''
--bun:split
CREATE INDEX users_org_external_id ON users (org_id, external_id) WHERE external_id <> ''
--bun:split
ALTER TABLE groups ADD COLUMN external_id TEXT NOT NULL DEFAULT ''
--bun:split
CREATE INDEX groups_org_external_id ON groups (org_id, external_id) WHERE external_id <> ''
--bun:split
CREATE TABLE provisioning_tokens (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	token_hash TEXT NOT NULL,
	scopes TEXT NOT NULL,
	created_at {{.Time}} NOT NULL,
	expires_at {{.Time}},
	last_used_at {{.Time}},
	revoked_at {{.Time}}
)
--bun:split
CREATE UNIQUE INDEX provisioning_tokens_hash ON provisioning_tokens (token_hash)
--bun:split
CREATE INDEX provisioning_tokens_org ON provisioning_tokens (org_id, id)
