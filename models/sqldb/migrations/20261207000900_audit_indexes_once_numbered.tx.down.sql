-- The indexes of reads cover every row again.
{{if .Postgres}}DROP INDEX audit_events_id{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE UNIQUE INDEX audit_events_id ON audit_events (id){{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}DROP INDEX audit_events_published{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE INDEX audit_events_published ON audit_events (org_id, published){{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}DROP INDEX audit_events_target{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE INDEX audit_events_target ON audit_events (org_id, target_id){{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}DROP INDEX audit_events_seq{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE UNIQUE INDEX audit_events_seq ON audit_events (org_id, seq){{else}}SELECT 1{{end}}
