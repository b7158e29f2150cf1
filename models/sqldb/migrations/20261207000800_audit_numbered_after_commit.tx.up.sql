-- On PostgreSQL an organization's audit events are numbered after they
-- commit (sqldb.NumberAuditEvents), so that its writers no longer pass its
-- audit_heads row one at a time: a row is written with seq and hash NULL
-- and its body's sequence 0. The numbers stay unique per organization; the
-- partial index finds the rows still to number. SQLite numbers its events
-- as it writes them and keeps its table.
{{if .Postgres}}ALTER TABLE audit_events DROP CONSTRAINT audit_events_pkey{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}ALTER TABLE audit_events ALTER COLUMN seq DROP NOT NULL, ALTER COLUMN hash DROP NOT NULL{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE UNIQUE INDEX audit_events_seq ON audit_events (org_id, seq){{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE INDEX audit_events_pending ON audit_events (org_id, id) WHERE seq IS NULL{{else}}SELECT 1{{end}}
