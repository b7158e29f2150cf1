DROP INDEX users_org_admins
--bun:split
ALTER TABLE mgmt_uploads DROP COLUMN next_offset
--bun:split
ALTER TABLE mgmt_uploads DROP COLUMN next_row
--bun:split
ALTER TABLE mgmt_uploads DROP COLUMN file_rows
--bun:split
ALTER TABLE mgmt_uploads DROP COLUMN message
--bun:split
ALTER TABLE mgmt_uploads DROP COLUMN job_id
--bun:split
ALTER TABLE mgmt_uploads DROP COLUMN status
