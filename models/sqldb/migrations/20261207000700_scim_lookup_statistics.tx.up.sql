-- SCIM lookups (docs/scim.md): PostgreSQL keeps no statistics of the
-- expressions of a partial index, so it guessed that userName eq "…"
-- (lower(user_name), users_org_user_name) and emails eq "…" (lower(email),
-- users_org_email) match 0.5% of the users and, for a page ordered by id,
-- walked the primary key and filtered instead (113 ms at 200,000 users
-- against 0.1 ms). Statistics of the expressions tell it they are unique.
{{if .Postgres}}CREATE STATISTICS users_lower_user_name ON (lower(user_name)) FROM users{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE STATISTICS users_lower_email ON (lower(email)) FROM users{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}ANALYZE users{{else}}SELECT 1{{end}}
