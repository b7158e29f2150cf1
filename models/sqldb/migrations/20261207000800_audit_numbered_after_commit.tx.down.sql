-- Back to numbering in the writing transaction: the events still without
-- a number must be numbered first (any read of the audit log does it).
{{if .Postgres}}DROP INDEX IF EXISTS audit_events_pending{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}DROP INDEX IF EXISTS audit_events_seq{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}ALTER TABLE audit_events ALTER COLUMN seq SET NOT NULL, ALTER COLUMN hash SET NOT NULL{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}ALTER TABLE audit_events ADD PRIMARY KEY (org_id, seq){{else}}SELECT 1{{end}}
