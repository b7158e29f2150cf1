{{if .Postgres}}ALTER TABLE device_accounts RESET (fillfactor){{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}ALTER TABLE devices RESET (fillfactor){{else}}SELECT 1{{end}}
