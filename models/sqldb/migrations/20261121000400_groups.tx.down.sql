DROP TABLE IF EXISTS group_members;
--bun:split
{{if .Postgres}}DROP FUNCTION IF EXISTS group_members_added(){{else}}SELECT 1{{end}}
--bun:split
{{if .Postgres}}DROP FUNCTION IF EXISTS group_members_removed(){{else}}SELECT 1{{end}}
--bun:split
DROP TABLE IF EXISTS groups;
