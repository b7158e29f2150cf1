CREATE INDEX IF NOT EXISTS enrollments_org_user ON enrollments (org_id, user_id)
--bun:split
{{if .Postgres}}
DROP TRIGGER IF EXISTS jobs_delete_results ON jobs
--bun:split
DROP FUNCTION IF EXISTS jobs_delete_results()
--bun:split
DELETE FROM job_results WHERE job_id NOT IN (SELECT id FROM jobs)
--bun:split
ALTER TABLE job_results ADD CONSTRAINT job_results_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE
--bun:split
ALTER TABLE enrollments ADD CONSTRAINT enrollments_factor_config_id_fkey FOREIGN KEY (factor_config_id) REFERENCES authn_factor_configs (id) ON DELETE CASCADE
--bun:split
ALTER TABLE enrollments ADD CONSTRAINT enrollments_org_id_fkey FOREIGN KEY (org_id) REFERENCES organizations (id) ON DELETE CASCADE
{{end}}
