DROP TABLE provisioning_tokens
--bun:split
DROP INDEX groups_org_external_id
--bun:split
ALTER TABLE groups DROP COLUMN external_id
--bun:split
DROP INDEX users_org_external_id
--bun:split
DROP INDEX users_org_user_name
--bun:split
ALTER TABLE users DROP COLUMN external_id
--bun:split
ALTER TABLE users DROP COLUMN user_name
