-- An upload still resolving is failed by the write that ends or deletes
-- its job (models/management_resolve.go, failUploadOfJob), which finds it
-- through this index of resolving uploads only; reading an upload never
-- writes. Uploads left resolving whose job has already ended or gone are
-- failed here, as reading them used to do.
CREATE INDEX mgmt_uploads_resolving_job ON mgmt_uploads (job_id) WHERE status = 'resolving'
--bun:split
UPDATE mgmt_uploads SET status = 'failed', message = 'the job resolving the upload was deleted'
WHERE status = 'resolving' AND job_id IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = mgmt_uploads.job_id)
--bun:split
UPDATE mgmt_uploads SET status = 'failed', message = (
	SELECT substr('the job resolving the upload ended ' || jobs.status
		|| CASE WHEN jobs.message <> '' THEN ': ' || jobs.message ELSE '' END, 1, 512)
	FROM jobs WHERE jobs.id = mgmt_uploads.job_id)
WHERE status = 'resolving'
	AND job_id IN (SELECT id FROM jobs WHERE status IN ('COMPLETED', 'WARNING', 'ERROR'))
