-- Event hooks (models/hooks): an organization's endpoints that receive its
-- audit events, signed per the Standard Webhooks specification. cursor_seq
-- is the last audit_events.seq of the organization the hook's dispatcher
-- has turned into deliveries (advanced in the transaction that inserts
-- them); the secrets are sealed with IAM_ENCRYPTION_KEY.
CREATE TABLE event_hooks (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL,
	url TEXT NOT NULL,
	description TEXT NOT NULL,
	event_types {{.JSON}} NOT NULL,
	enabled BOOLEAN NOT NULL,
	secret_sealed {{.Blob}} NOT NULL,
	old_secret_sealed {{.Blob}},
	old_secret_expires_at {{.Time}},
	cursor_seq BIGINT NOT NULL,
	failing_since {{.Time}},
	disabled_reason TEXT NOT NULL DEFAULT '',
	created_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
)
--bun:split
CREATE INDEX event_hooks_org ON event_hooks (org_id, created_at)
--bun:split
-- One row per (hook, event): id is the webhook-id, stable across retries.
-- attempts holds every attempt (time, status code, latency, error).
CREATE TABLE event_hook_deliveries (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL,
	hook_id BIGINT NOT NULL,
	event_id BIGINT NOT NULL,
	event_seq BIGINT NOT NULL,
	event_type TEXT NOT NULL,
	payload TEXT NOT NULL,
	status TEXT NOT NULL,
	attempt_count INTEGER NOT NULL,
	schedule_from INTEGER NOT NULL DEFAULT 0,
	attempts {{.JSON}} NOT NULL,
	next_attempt_at {{.Time}},
	created_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
)
--bun:split
CREATE INDEX event_hook_deliveries_due ON event_hook_deliveries (hook_id, status, next_attempt_at, event_seq)
--bun:split
CREATE INDEX event_hook_deliveries_list ON event_hook_deliveries (hook_id, created_at)
