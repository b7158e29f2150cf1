-- An unfinished execution whose job is gone is interrupted by the write
-- that deletes or ends the job (models/management EndJob); reading an
-- execution never writes. Executions left unfinished by a job already
-- gone are interrupted here, as reading them used to do.
UPDATE mgmt_execution_attempts SET status = 'interrupted', finished_at = CURRENT_TIMESTAMP
WHERE status IN ('yet_to_start', 'pending')
	AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = mgmt_execution_attempts.job_id)
--bun:split
UPDATE mgmt_executions SET status = 'interrupted', finished_at = CURRENT_TIMESTAMP
WHERE status IN ('yet_to_start', 'pending')
	AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = mgmt_executions.job_id)
