-- On PostgreSQL an event's row is written twice: inserted unnumbered by
-- the transaction of its change, then updated with its number
-- (sqldb.NumberAuditEvents), which writes a new version of the row and of
-- its index entries. Every read goes through the numbered rows, so the
-- indexes of reads cover only those: the change's transaction then writes
-- one index entry (audit_events_pending's) instead of five, and the
-- numbering, a batch at a time, writes the rest. SQLite numbers its events
-- as it writes them and keeps its indexes.
{{if .Postgres}}DROP INDEX audit_events_id{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE UNIQUE INDEX audit_events_id ON audit_events (id) WHERE seq IS NOT NULL{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}DROP INDEX audit_events_published{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE INDEX audit_events_published ON audit_events (org_id, published) WHERE seq IS NOT NULL{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}DROP INDEX audit_events_target{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE INDEX audit_events_target ON audit_events (org_id, target_id) WHERE seq IS NOT NULL{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}DROP INDEX audit_events_seq{{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}CREATE UNIQUE INDEX audit_events_seq ON audit_events (org_id, seq) WHERE seq IS NOT NULL{{else}}SELECT 1{{end}}
