-- Management actions (docs/management.md): the columns shown per
-- organization and action, uploads resolved to users, and executions with
-- their attempts, target users and per-user results.
CREATE TABLE mgmt_view_columns (
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	action TEXT NOT NULL,
	columns {{.JSON}} NOT NULL,
	updated_at {{.Time}} NOT NULL,
	PRIMARY KEY (org_id, action)
)
--bun:split
CREATE TABLE mgmt_uploads (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	action TEXT NOT NULL,
	file_name TEXT NOT NULL DEFAULT '',
	header {{.JSON}} NOT NULL,
	match_columns {{.JSON}} NOT NULL,
	row_count BIGINT NOT NULL DEFAULT 0,
	created_by BIGINT NOT NULL DEFAULT 0,
	created_at {{.Time}} NOT NULL
)
--bun:split
CREATE INDEX mgmt_uploads_org ON mgmt_uploads (org_id, action, id)
--bun:split
-- user_id has no foreign key: a row keeps naming the user it was resolved to
-- after the user is deleted (an execution then fails that user "not found").
CREATE TABLE mgmt_upload_rows (
	upload_id BIGINT NOT NULL REFERENCES mgmt_uploads (id) ON DELETE CASCADE,
	row_no BIGINT NOT NULL,
	user_id BIGINT,
	status TEXT NOT NULL,
	message TEXT NOT NULL DEFAULT '',
	imported_data {{.JSON}} NOT NULL,
	PRIMARY KEY (upload_id, row_no)
)
--bun:split
CREATE INDEX mgmt_upload_rows_status ON mgmt_upload_rows (upload_id, status, row_no)
--bun:split
-- job_id has no foreign key either: deleting the job interrupts the
-- execution, whose record stays.
CREATE TABLE mgmt_executions (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	action TEXT NOT NULL,
	status TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	job_id BIGINT NOT NULL,
	selection {{.JSON}} NOT NULL,
	target_container TEXT NOT NULL DEFAULT '',
	total BIGINT NOT NULL DEFAULT 0,
	success_count BIGINT NOT NULL DEFAULT 0,
	failed_count BIGINT NOT NULL DEFAULT 0,
	created_by BIGINT NOT NULL DEFAULT 0,
	created_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL,
	finished_at {{.Time}}
)
--bun:split
CREATE INDEX mgmt_executions_org ON mgmt_executions (org_id, action, id)
--bun:split
CREATE UNIQUE INDEX mgmt_executions_job ON mgmt_executions (job_id)
--bun:split
CREATE TABLE mgmt_execution_attempts (
	execution_id BIGINT NOT NULL REFERENCES mgmt_executions (id) ON DELETE CASCADE,
	attempt INTEGER NOT NULL,
	job_id BIGINT NOT NULL,
	status TEXT NOT NULL,
	total BIGINT NOT NULL DEFAULT 0,
	success_count BIGINT NOT NULL DEFAULT 0,
	failed_count BIGINT NOT NULL DEFAULT 0,
	created_by BIGINT NOT NULL DEFAULT 0,
	created_at {{.Time}} NOT NULL,
	finished_at {{.Time}},
	PRIMARY KEY (execution_id, attempt)
)
--bun:split
CREATE UNIQUE INDEX mgmt_execution_attempts_job ON mgmt_execution_attempts (job_id)
--bun:split
-- The users an attempt works on, frozen when it is made (seq is the order a
-- job walks them in chunks); no foreign key on user_id, for the same reason
-- as upload rows.
CREATE TABLE mgmt_execution_targets (
	execution_id BIGINT NOT NULL REFERENCES mgmt_executions (id) ON DELETE CASCADE,
	attempt INTEGER NOT NULL,
	seq BIGINT NOT NULL,
	user_id BIGINT NOT NULL,
	PRIMARY KEY (execution_id, attempt, seq)
)
--bun:split
-- One result per user and attempt, with the user's name and email as they
-- were (a deleted user is still shown).
CREATE TABLE mgmt_execution_results (
	execution_id BIGINT NOT NULL REFERENCES mgmt_executions (id) ON DELETE CASCADE,
	attempt INTEGER NOT NULL,
	seq BIGINT NOT NULL,
	user_id BIGINT NOT NULL,
	first_name TEXT NOT NULL DEFAULT '',
	last_name TEXT NOT NULL DEFAULT '',
	email TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL,
	message TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (execution_id, attempt, seq)
)
--bun:split
CREATE INDEX mgmt_execution_results_status ON mgmt_execution_results (execution_id, attempt, status, seq)
