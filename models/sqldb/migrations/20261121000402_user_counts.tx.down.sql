{{if .Postgres}}DROP TRIGGER IF EXISTS users_counted_update ON users{{else}}DROP TRIGGER IF EXISTS users_counted_update{{end}}
--bun:split
{{if .Postgres}}DROP TRIGGER IF EXISTS users_counted_delete ON users{{else}}DROP TRIGGER IF EXISTS users_counted_delete{{end}}
--bun:split
{{if .Postgres}}DROP TRIGGER IF EXISTS users_counted_insert ON users{{else}}DROP TRIGGER IF EXISTS users_counted_insert{{end}}
--bun:split
{{if .Postgres}}DROP FUNCTION IF EXISTS users_counted(){{else}}SELECT 1{{end}}
--bun:split
DROP TABLE IF EXISTS user_counts;
