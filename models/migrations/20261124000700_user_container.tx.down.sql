DROP INDEX users_org_container;
ALTER TABLE users DROP COLUMN container
