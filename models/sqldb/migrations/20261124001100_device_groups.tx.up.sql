CREATE TABLE device_groups (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	name_key TEXT NOT NULL,
	description TEXT NOT NULL DEFAULT '',
	created_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
);
--bun:split
CREATE UNIQUE INDEX device_groups_org_name ON device_groups (org_id, name_key);
--bun:split
CREATE TABLE device_group_members (
	group_id BIGINT NOT NULL REFERENCES device_groups (id) ON DELETE CASCADE,
	device_id BIGINT NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
	org_id BIGINT NOT NULL,
	added_at {{.Time}} NOT NULL,
	PRIMARY KEY (group_id, device_id)
);
--bun:split
CREATE INDEX device_group_members_device ON device_group_members (device_id, group_id);
--bun:split
CREATE TABLE protection_versions (
	org_id BIGINT PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
	version BIGINT NOT NULL
);
