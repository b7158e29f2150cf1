-- Idempotency keys (models/idempotency.go, docs/operations.md): the first
-- answer to a job-starting request sent with an Idempotency-Key, per
-- organization, OAuth client and key, for 24 hours. A row is reserved
-- (status 0, owned by token until locked_until) before the request runs;
-- the job the request writes claims it in the job's own transaction
-- (job_id); the answer is recorded before it is sent.
CREATE TABLE idempotency_keys (
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	client_id TEXT NOT NULL,
	idem_key TEXT NOT NULL,
	route TEXT NOT NULL,
	token TEXT NOT NULL,
	locked_until {{.Time}} NOT NULL,
	job_id BIGINT,
	fingerprint TEXT NOT NULL DEFAULT '',
	status INTEGER NOT NULL DEFAULT 0,
	content_type TEXT NOT NULL DEFAULT '',
	location TEXT NOT NULL DEFAULT '',
	body {{.Blob}},
	created_at {{.Time}} NOT NULL,
	expires_at {{.Time}} NOT NULL,
	PRIMARY KEY (org_id, client_id, idem_key)
);
--bun:split
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
