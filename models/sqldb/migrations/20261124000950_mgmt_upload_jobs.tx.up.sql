-- Large management uploads are resolved by a job (docs/management.md):
-- the upload's state, its job, why it failed, the rows of its file, and
-- where the job has got to in the file (the next row and its byte offset).
-- Uploads resolved inside the request are 'resolved' from the start.
ALTER TABLE mgmt_uploads ADD COLUMN status TEXT NOT NULL DEFAULT 'resolved'
--bun:split
ALTER TABLE mgmt_uploads ADD COLUMN job_id BIGINT
--bun:split
ALTER TABLE mgmt_uploads ADD COLUMN message TEXT NOT NULL DEFAULT ''
--bun:split
ALTER TABLE mgmt_uploads ADD COLUMN file_rows BIGINT NOT NULL DEFAULT 0
--bun:split
ALTER TABLE mgmt_uploads ADD COLUMN next_row BIGINT NOT NULL DEFAULT 0
--bun:split
ALTER TABLE mgmt_uploads ADD COLUMN next_offset BIGINT NOT NULL DEFAULT 0
--bun:split
-- The organization's administrators, which every batch of a management
-- execution locks (the last active one is kept): found without reading
-- every user of the organization.
CREATE INDEX users_org_admins ON users (org_id, status, id) WHERE role = 'admin'
