DROP INDEX IF EXISTS blobs_incomplete;
--bun:split
DROP INDEX IF EXISTS blobs_job_id;
--bun:split
ALTER TABLE blobs DROP COLUMN job_id;
--bun:split
ALTER TABLE blobs DROP COLUMN sealed;
--bun:split
ALTER TABLE blobs DROP COLUMN complete;
