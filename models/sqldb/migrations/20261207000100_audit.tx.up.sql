-- The audit log (models/audit, written by sqldb.InTx). An organization's
-- events are numbered by seq in commit order: audit_heads holds each
-- organization's last number, and the transaction that takes the next ones
-- keeps its row locked until it commits; pruned_seq is the last number
-- retention deleted.
CREATE TABLE audit_heads (
	org_id BIGINT PRIMARY KEY,
	last_seq BIGINT NOT NULL,
	pruned_seq BIGINT NOT NULL DEFAULT 0
)
--bun:split
CREATE TABLE audit_events (
	org_id BIGINT NOT NULL,
	seq BIGINT NOT NULL,
	id BIGINT NOT NULL,
	published {{.Time}} NOT NULL,
	event_type TEXT NOT NULL,
	actor_type TEXT NOT NULL,
	actor_id TEXT NOT NULL,
	result TEXT NOT NULL,
	request_id TEXT NOT NULL,
	target_type TEXT NOT NULL,
	target_id TEXT NOT NULL,
	job_id BIGINT,
	body TEXT NOT NULL,
	hash TEXT NOT NULL,
	PRIMARY KEY (org_id, seq)
)
--bun:split
CREATE UNIQUE INDEX audit_events_id ON audit_events (id)
--bun:split
CREATE INDEX audit_events_published ON audit_events (org_id, published)
--bun:split
CREATE INDEX audit_events_target ON audit_events (org_id, target_id)
--bun:split
-- The signed digests sealing each organization's events: digest n covers
-- the events after the previous digest's to_seq up to its own.
CREATE TABLE audit_digests (
	org_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	from_seq BIGINT NOT NULL,
	to_seq BIGINT NOT NULL,
	event_count BIGINT NOT NULL,
	period_start {{.Time}} NOT NULL,
	period_end {{.Time}} NOT NULL,
	events_hash TEXT NOT NULL,
	previous_hash TEXT NOT NULL,
	digest_hash TEXT NOT NULL,
	signature TEXT NOT NULL,
	key_id TEXT NOT NULL,
	created_at {{.Time}} NOT NULL,
	PRIMARY KEY (org_id, number)
)
