ALTER TABLE blobs ADD COLUMN complete BOOLEAN NOT NULL DEFAULT TRUE;
--bun:split
ALTER TABLE blobs ADD COLUMN sealed BOOLEAN NOT NULL DEFAULT FALSE;
--bun:split
ALTER TABLE blobs ADD COLUMN job_id BIGINT;
--bun:split
CREATE INDEX blobs_job_id ON blobs (job_id) WHERE job_id IS NOT NULL;
--bun:split
CREATE INDEX blobs_incomplete ON blobs (created_at) WHERE NOT complete;
--bun:split
{{if .Postgres}}
UPDATE blobs SET job_id = jobs.id FROM jobs
WHERE jobs.module = 'QuickEnrollment' AND jobs.input->>'blob_id' = blobs.id::text
{{else}}
UPDATE blobs SET job_id = (
	SELECT jobs.id FROM jobs
	WHERE jobs.module = 'QuickEnrollment' AND json_extract(jobs.input, '$.blob_id') = CAST(blobs.id AS TEXT)
	LIMIT 1)
WHERE EXISTS (
	SELECT 1 FROM jobs
	WHERE jobs.module = 'QuickEnrollment' AND json_extract(jobs.input, '$.blob_id') = CAST(blobs.id AS TEXT))
{{end}}
