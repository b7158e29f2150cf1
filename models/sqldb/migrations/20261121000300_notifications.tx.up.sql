CREATE TABLE notification_templates (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	description TEXT NOT NULL DEFAULT '',
	share_type TEXT NOT NULL DEFAULT 'ALL',
	module TEXT NOT NULL,
	is_default BOOLEAN NOT NULL DEFAULT FALSE,
	configurations {{.JSON}} NOT NULL,
	mail {{.JSON}},
	sms {{.JSON}},
	created_by BIGINT NOT NULL DEFAULT 0,
	created_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
);
--bun:split
CREATE UNIQUE INDEX notification_templates_org_name ON notification_templates (org_id, lower(name));
--bun:split
CREATE INDEX notification_templates_org_module ON notification_templates (org_id, module);
--bun:split
CREATE TABLE notification_schedules (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	description TEXT NOT NULL DEFAULT '',
	template_id BIGINT NOT NULL REFERENCES notification_templates (id),
	group_ids {{.JSON}} NOT NULL,
	is_enabled BOOLEAN NOT NULL DEFAULT TRUE,
	settings {{.JSON}} NOT NULL,
	created_by BIGINT NOT NULL DEFAULT 0,
	created_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
);
--bun:split
CREATE UNIQUE INDEX notification_schedules_org_name ON notification_schedules (org_id, lower(name));
--bun:split
CREATE INDEX notification_schedules_template_id ON notification_schedules (template_id);
--bun:split
CREATE TABLE notification_runs (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	notification_id BIGINT NOT NULL,
	scheduled_at {{.Time}} NOT NULL,
	slot TEXT NOT NULL DEFAULT '',
	template {{.JSON}} NOT NULL,
	status TEXT NOT NULL,
	message TEXT NOT NULL DEFAULT '',
	total BIGINT NOT NULL DEFAULT 0,
	sent BIGINT NOT NULL DEFAULT 0,
	failed BIGINT NOT NULL DEFAULT 0,
	uncertain BIGINT NOT NULL DEFAULT 0,
	created_at {{.Time}} NOT NULL,
	finished_at {{.Time}}
);
--bun:split
CREATE UNIQUE INDEX notification_runs_key ON notification_runs (notification_id, scheduled_at);
--bun:split
CREATE UNIQUE INDEX notification_runs_slot ON notification_runs (notification_id, slot) WHERE slot <> '';
--bun:split
CREATE TABLE notification_deliveries (
	run_id BIGINT NOT NULL REFERENCES notification_runs (id) ON DELETE CASCADE,
	seq BIGINT NOT NULL,
	notification_id BIGINT NOT NULL,
	recipient TEXT NOT NULL,
	scheduled_at {{.Time}} NOT NULL,
	user_id BIGINT NOT NULL,
	channel TEXT NOT NULL,
	address TEXT NOT NULL,
	state TEXT NOT NULL,
	claim BIGINT NOT NULL DEFAULT 0,
	attempts INTEGER NOT NULL DEFAULT 0,
	last_error TEXT NOT NULL DEFAULT '',
	updated_at {{.Time}} NOT NULL,
	PRIMARY KEY (run_id, seq)
);
--bun:split
CREATE UNIQUE INDEX notification_deliveries_key ON notification_deliveries (notification_id, recipient, scheduled_at);
--bun:split
CREATE INDEX notification_deliveries_run_state ON notification_deliveries (run_id, state, seq);
--bun:split
CREATE TABLE notification_delivery_log (
	id BIGINT PRIMARY KEY,
	run_id BIGINT NOT NULL REFERENCES notification_runs (id) ON DELETE CASCADE,
	seq BIGINT NOT NULL,
	attempt INTEGER NOT NULL,
	channel TEXT NOT NULL,
	outcome TEXT NOT NULL,
	detail TEXT NOT NULL DEFAULT '',
	at {{.Time}} NOT NULL
);
--bun:split
CREATE INDEX notification_delivery_log_run_seq ON notification_delivery_log (run_id, seq);
