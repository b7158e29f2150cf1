CREATE TABLE organizations (
	id BIGINT PRIMARY KEY,
	name TEXT NOT NULL,
	time_zone TEXT NOT NULL DEFAULT 'UTC',
	created_at {{.Time}} NOT NULL
);
--bun:split
CREATE TABLE jobs (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	kind TEXT NOT NULL,
	module TEXT NOT NULL,
	action_name TEXT NOT NULL,
	entity TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL,
	message TEXT NOT NULL DEFAULT '',
	input {{.JSON}},
	processed BIGINT NOT NULL DEFAULT 0,
	total BIGINT NOT NULL DEFAULT 0,
	success_count BIGINT NOT NULL DEFAULT 0,
	error_count BIGINT NOT NULL DEFAULT 0,
	created_by BIGINT NOT NULL DEFAULT 0,
	created_at {{.Time}} NOT NULL,
	start_time {{.Time}} NOT NULL,
	end_time {{.Time}},
	updated_at {{.Time}} NOT NULL
);
--bun:split
CREATE INDEX jobs_org_id_id ON jobs (org_id, id);
--bun:split
CREATE INDEX jobs_status_id ON jobs (status, id);
--bun:split
CREATE TABLE job_results (
	job_id BIGINT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	seq BIGINT NOT NULL,
	entity_id TEXT NOT NULL DEFAULT '',
	status TEXT NOT NULL,
	message TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (job_id, seq)
);
--bun:split
CREATE TABLE blobs (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	name TEXT NOT NULL DEFAULT '',
	content_type TEXT NOT NULL DEFAULT '',
	size BIGINT NOT NULL DEFAULT 0,
	sha256 TEXT NOT NULL DEFAULT '',
	created_at {{.Time}} NOT NULL
);
--bun:split
CREATE TABLE blob_chunks (
	blob_id BIGINT NOT NULL REFERENCES blobs (id) ON DELETE CASCADE,
	seq INTEGER NOT NULL,
	data {{.Blob}} NOT NULL,
	PRIMARY KEY (blob_id, seq)
);
