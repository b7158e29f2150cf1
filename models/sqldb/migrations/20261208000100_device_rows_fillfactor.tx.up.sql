-- Check-ins rewrite a device's row and its accounts' rows again and again
-- (facts, contact times, last logins) without changing an indexed column.
-- Room left on each page lets PostgreSQL write the new version of such a
-- row beside the old one (a HOT update) and touch none of the table's
-- indexes; full pages move it to another page and add an entry to every
-- index. Pages written from now on keep a fifth free. SQLite rewrites rows
-- in place.
{{if .Postgres}}ALTER TABLE devices SET (fillfactor = 80){{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}ALTER TABLE device_accounts SET (fillfactor = 80){{else}}SELECT 1{{end}}
