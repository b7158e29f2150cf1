{{if .Postgres}}DROP STATISTICS IF EXISTS users_lower_email{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}DROP STATISTICS IF EXISTS users_lower_user_name{{else}}SELECT 1{{end}}
