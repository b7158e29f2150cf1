-- user_counts keeps each organization's count in up to 16 rows (shards)
-- instead of one: on PostgreSQL each writing connection adds its changes
-- to the shard of its backend (pg_backend_pid() % 16), so that concurrent
-- creates and deletes of one organization do not all queue on one row
-- locked until their commits. A count is the sum of the shards. SQLite has
-- one writer at a time and keeps shard 0.
{{if .Postgres}}DROP TRIGGER IF EXISTS users_counted_update ON users{{else}}DROP TRIGGER IF EXISTS users_counted_update{{end}}
--bun:split
{{if .Postgres}}DROP TRIGGER IF EXISTS users_counted_delete ON users{{else}}DROP TRIGGER IF EXISTS users_counted_delete{{end}}
--bun:split
{{if .Postgres}}DROP TRIGGER IF EXISTS users_counted_insert ON users{{else}}DROP TRIGGER IF EXISTS users_counted_insert{{end}}
--bun:split
{{if .Postgres}}DROP FUNCTION IF EXISTS users_counted(){{else}}SELECT 1{{end}}
--bun:split
DROP TABLE user_counts;
--bun:split
CREATE TABLE user_counts (
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	shard SMALLINT NOT NULL DEFAULT 0,
	users BIGINT NOT NULL DEFAULT 0,
	licensed BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (org_id, shard)
);
--bun:split
INSERT INTO user_counts (org_id, shard, users, licensed)
SELECT org_id, 0, count(*), sum(CASE WHEN is_licensed THEN 1 ELSE 0 END) FROM users GROUP BY org_id;
--bun:split
{{if .Postgres}}
CREATE FUNCTION users_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- Every change is a delta added to this backend's shard (made when
	-- missing), in organization order.
	IF TG_OP = 'INSERT' THEN
		INSERT INTO user_counts AS c (org_id, shard, users, licensed)
		SELECT org_id, pg_backend_pid() % 16, count(*), count(*) FILTER (WHERE is_licensed)
		FROM new_users GROUP BY org_id ORDER BY org_id
		ON CONFLICT (org_id, shard) DO UPDATE SET users = c.users + EXCLUDED.users, licensed = c.licensed + EXCLUDED.licensed;
	ELSIF TG_OP = 'DELETE' THEN
		INSERT INTO user_counts AS c (org_id, shard, users, licensed)
		SELECT org_id, pg_backend_pid() % 16, -count(*), -count(*) FILTER (WHERE is_licensed)
		FROM old_users GROUP BY org_id ORDER BY org_id
		ON CONFLICT (org_id, shard) DO UPDATE SET users = c.users + EXCLUDED.users, licensed = c.licensed + EXCLUDED.licensed;
	ELSE
		INSERT INTO user_counts AS c (org_id, shard, users, licensed)
		SELECT d.org_id, pg_backend_pid() % 16, 0, d.l FROM (
			SELECT n.org_id, sum(n.is_licensed::int - o.is_licensed::int) AS l
			FROM new_users AS n JOIN old_users AS o ON o.id = n.id GROUP BY n.org_id) AS d
		WHERE d.l <> 0 ORDER BY d.org_id
		ON CONFLICT (org_id, shard) DO UPDATE SET licensed = c.licensed + EXCLUDED.licensed;
	END IF;
	RETURN NULL;
END $$
{{else}}
CREATE TRIGGER users_counted_insert AFTER INSERT ON users FOR EACH ROW BEGIN
	INSERT INTO user_counts (org_id, shard, users, licensed) VALUES (NEW.org_id, 0, 1, NEW.is_licensed)
	ON CONFLICT (org_id, shard) DO UPDATE SET users = users + 1, licensed = licensed + excluded.licensed;
END
{{end}}
--bun:split
{{if .Postgres}}
CREATE TRIGGER users_counted_insert AFTER INSERT ON users
	REFERENCING NEW TABLE AS new_users FOR EACH STATEMENT EXECUTE FUNCTION users_counted()
{{else}}
CREATE TRIGGER users_counted_delete AFTER DELETE ON users FOR EACH ROW BEGIN
	UPDATE user_counts SET users = users - 1, licensed = licensed - OLD.is_licensed WHERE org_id = OLD.org_id AND shard = 0;
END
{{end}}
--bun:split
{{if .Postgres}}
CREATE TRIGGER users_counted_delete AFTER DELETE ON users
	REFERENCING OLD TABLE AS old_users FOR EACH STATEMENT EXECUTE FUNCTION users_counted()
{{else}}
CREATE TRIGGER users_counted_update AFTER UPDATE OF is_licensed ON users FOR EACH ROW
WHEN OLD.is_licensed <> NEW.is_licensed BEGIN
	UPDATE user_counts SET licensed = licensed + NEW.is_licensed - OLD.is_licensed WHERE org_id = NEW.org_id AND shard = 0;
END
{{end}}
--bun:split
{{if .Postgres}}
CREATE TRIGGER users_counted_update AFTER UPDATE ON users
	REFERENCING OLD TABLE AS old_users NEW TABLE AS new_users FOR EACH STATEMENT EXECUTE FUNCTION users_counted()
{{else}}
SELECT 1
{{end}}
