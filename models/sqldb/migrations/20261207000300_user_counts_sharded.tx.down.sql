-- Back to one row per organization (the shards summed).
{{if .Postgres}}DROP TRIGGER IF EXISTS users_counted_update ON users{{else}}DROP TRIGGER IF EXISTS users_counted_update{{end}}
--bun:split
{{if .Postgres}}DROP TRIGGER IF EXISTS users_counted_delete ON users{{else}}DROP TRIGGER IF EXISTS users_counted_delete{{end}}
--bun:split
{{if .Postgres}}DROP TRIGGER IF EXISTS users_counted_insert ON users{{else}}DROP TRIGGER IF EXISTS users_counted_insert{{end}}
--bun:split
{{if .Postgres}}DROP FUNCTION IF EXISTS users_counted(){{else}}SELECT 1{{end}}
--bun:split
DROP TABLE IF EXISTS user_counts;
--bun:split
CREATE TABLE user_counts (
	org_id BIGINT PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
	users BIGINT NOT NULL DEFAULT 0,
	licensed BIGINT NOT NULL DEFAULT 0
);
--bun:split
INSERT INTO user_counts (org_id, users, licensed)
SELECT org_id, count(*), sum(CASE WHEN is_licensed THEN 1 ELSE 0 END) FROM users GROUP BY org_id;
--bun:split
{{if .Postgres}}
CREATE FUNCTION users_counted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'INSERT' THEN
		INSERT INTO user_counts AS c (org_id, users, licensed)
		SELECT org_id, count(*), count(*) FILTER (WHERE is_licensed) FROM new_users GROUP BY org_id ORDER BY org_id
		ON CONFLICT (org_id) DO UPDATE SET users = c.users + EXCLUDED.users, licensed = c.licensed + EXCLUDED.licensed;
	ELSIF TG_OP = 'DELETE' THEN
		UPDATE user_counts AS c SET users = c.users - d.n, licensed = c.licensed - d.l
		FROM (SELECT org_id, count(*) AS n, count(*) FILTER (WHERE is_licensed) AS l FROM old_users GROUP BY org_id) AS d
		WHERE c.org_id = d.org_id;
	ELSE
		UPDATE user_counts AS c SET licensed = c.licensed + d.l
		FROM (SELECT n.org_id, sum(n.is_licensed::int - o.is_licensed::int) AS l
			FROM new_users AS n JOIN old_users AS o ON o.id = n.id GROUP BY n.org_id) AS d
		WHERE c.org_id = d.org_id AND d.l <> 0;
	END IF;
	RETURN NULL;
END $$
{{else}}
CREATE TRIGGER users_counted_insert AFTER INSERT ON users FOR EACH ROW BEGIN
	INSERT INTO user_counts (org_id, users, licensed) VALUES (NEW.org_id, 1, NEW.is_licensed)
	ON CONFLICT (org_id) DO UPDATE SET users = users + 1, licensed = licensed + excluded.licensed;
END
{{end}}
--bun:split
{{if .Postgres}}
CREATE TRIGGER users_counted_insert AFTER INSERT ON users
	REFERENCING NEW TABLE AS new_users FOR EACH STATEMENT EXECUTE FUNCTION users_counted()
{{else}}
CREATE TRIGGER users_counted_delete AFTER DELETE ON users FOR EACH ROW BEGIN
	UPDATE user_counts SET users = users - 1, licensed = licensed - OLD.is_licensed WHERE org_id = OLD.org_id;
END
{{end}}
--bun:split
{{if .Postgres}}
CREATE TRIGGER users_counted_delete AFTER DELETE ON users
	REFERENCING OLD TABLE AS old_users FOR EACH STATEMENT EXECUTE FUNCTION users_counted()
{{else}}
CREATE TRIGGER users_counted_update AFTER UPDATE OF is_licensed ON users FOR EACH ROW
WHEN OLD.is_licensed <> NEW.is_licensed BEGIN
	UPDATE user_counts SET licensed = licensed + NEW.is_licensed - OLD.is_licensed WHERE org_id = NEW.org_id;
END
{{end}}
--bun:split
{{if .Postgres}}
CREATE TRIGGER users_counted_update AFTER UPDATE ON users
	REFERENCING OLD TABLE AS old_users NEW TABLE AS new_users FOR EACH STATEMENT EXECUTE FUNCTION users_counted()
{{else}}
SELECT 1
{{end}}
