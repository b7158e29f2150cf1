DROP INDEX users_org_container
--bun:split
ALTER TABLE users DROP COLUMN container
