CREATE TABLE groups (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	description TEXT NOT NULL DEFAULT '',
	is_dynamic BOOLEAN NOT NULL DEFAULT FALSE,
	membership_rule TEXT NOT NULL DEFAULT '',
	rule_version BIGINT NOT NULL DEFAULT 0,
	membership_job_id BIGINT,
	members_count BIGINT NOT NULL DEFAULT 0,
	primary_source {{.JSON}},
	when_created {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
);
--bun:split
CREATE UNIQUE INDEX groups_org_name ON groups (org_id, lower(name));
--bun:split
CREATE INDEX groups_org_id_id ON groups (org_id, id);
--bun:split
CREATE INDEX groups_org_dynamic ON groups (org_id, id) WHERE is_dynamic;
--bun:split
CREATE TABLE group_members (
	group_id BIGINT NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
	user_id BIGINT NOT NULL REFERENCES users (id) ON DELETE CASCADE,
	org_id BIGINT NOT NULL,
	PRIMARY KEY (group_id, user_id)
);
--bun:split
CREATE INDEX group_members_user_id ON group_members (user_id, group_id);
--bun:split
{{if .Postgres}}
CREATE FUNCTION group_members_added() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r RECORD;
BEGIN
	-- Ascending group id, so that concurrent writers lock groups in one order.
	FOR r IN SELECT group_id, count(*) AS n FROM added_members GROUP BY group_id ORDER BY group_id LOOP
		UPDATE groups SET members_count = members_count + r.n WHERE id = r.group_id;
	END LOOP;
	RETURN NULL;
END $$
{{else}}
CREATE TRIGGER group_members_added AFTER INSERT ON group_members FOR EACH ROW BEGIN
	UPDATE groups SET members_count = members_count + 1 WHERE id = NEW.group_id;
END
{{end}}
--bun:split
{{if .Postgres}}
CREATE FUNCTION group_members_removed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE r RECORD;
BEGIN
	FOR r IN SELECT group_id, count(*) AS n FROM removed_members GROUP BY group_id ORDER BY group_id LOOP
		UPDATE groups SET members_count = members_count - r.n WHERE id = r.group_id;
	END LOOP;
	RETURN NULL;
END $$
{{else}}
CREATE TRIGGER group_members_removed AFTER DELETE ON group_members FOR EACH ROW BEGIN
	UPDATE groups SET members_count = members_count - 1 WHERE id = OLD.group_id;
END
{{end}}
--bun:split
{{if .Postgres}}
CREATE TRIGGER group_members_added AFTER INSERT ON group_members
	REFERENCING NEW TABLE AS added_members FOR EACH STATEMENT EXECUTE FUNCTION group_members_added()
{{else}}
SELECT 1
{{end}}
--bun:split
{{if .Postgres}}
CREATE TRIGGER group_members_removed AFTER DELETE ON group_members
	REFERENCING OLD TABLE AS removed_members FOR EACH STATEMENT EXECUTE FUNCTION group_members_removed()
{{else}}
SELECT 1
{{end}}
