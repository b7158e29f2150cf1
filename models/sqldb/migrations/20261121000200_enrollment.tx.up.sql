CREATE TABLE authn_factor_configs (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	factor_type TEXT NOT NULL,
	display_name TEXT NOT NULL,
	is_enabled BOOLEAN NOT NULL DEFAULT TRUE,
	created_at {{.Time}} NOT NULL
);
--bun:split
CREATE UNIQUE INDEX authn_factor_configs_org_type ON authn_factor_configs (org_id, factor_type);
--bun:split
CREATE TABLE enrollments (
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	factor_config_id BIGINT NOT NULL REFERENCES authn_factor_configs (id) ON DELETE CASCADE,
	factor_type TEXT NOT NULL,
	value TEXT NOT NULL DEFAULT '',
	secret {{.Blob}},
	thumbprint TEXT NOT NULL DEFAULT '',
	expires_at {{.Time}},
	job_id BIGINT NOT NULL DEFAULT 0,
	source_row BIGINT NOT NULL DEFAULT 0,
	updated_at {{.Time}} NOT NULL,
	PRIMARY KEY (user_id, factor_config_id)
);
--bun:split
CREATE INDEX enrollments_org_user ON enrollments (org_id, user_id);
--bun:split
CREATE TABLE enrollment_cursors (
	job_id BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	next_row BIGINT NOT NULL,
	byte_offset BIGINT NOT NULL,
	PRIMARY KEY (job_id, next_row)
);
--bun:split
CREATE INDEX users_org_mobile_number ON users (org_id, mobile_number) WHERE mobile_number <> '';
--bun:split
CREATE TABLE logon_script_configs (
	org_id BIGINT PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
	window_title TEXT NOT NULL,
	window_content TEXT NOT NULL,
	enrollment_button TEXT NOT NULL,
	cancellation_button TEXT NOT NULL,
	force_enrollment TEXT NOT NULL,
	updated_at {{.Time}} NOT NULL
);
