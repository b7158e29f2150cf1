CREATE INDEX device_accounts_org_id ON device_accounts (org_id, id);
--bun:split
CREATE UNIQUE INDEX jobs_one_device_sync ON jobs (org_id) WHERE kind = 'DeviceAccountSync' AND status IN ('QUEUED', 'RUNNING');
--bun:split
CREATE TABLE agent_installations (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	agent_type TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	serial_number TEXT NOT NULL DEFAULT '',
	dns_hostname TEXT NOT NULL DEFAULT '',
	agent_version TEXT NOT NULL DEFAULT '',
	facts {{.JSON}} NOT NULL,
	secret_hash {{.Blob}} NOT NULL,
	registered_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
);
--bun:split
CREATE INDEX agent_installations_org_type ON agent_installations (org_id, agent_type);
--bun:split
CREATE TABLE device_sync_keys (
	job_id BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	link_key TEXT NOT NULL,
	user_id BIGINT NOT NULL,
	users BIGINT NOT NULL,
	PRIMARY KEY (job_id, link_key)
);
