-- The user's place in the directory: a distinguished name in RFC 4514 syntax
-- (models.CheckContainer), empty when none; set by the move-users action,
-- filtered and sorted on in /users.
ALTER TABLE users ADD COLUMN container TEXT NOT NULL DEFAULT ''
--bun:split
CREATE INDEX users_org_container ON users (org_id, container, id)
