DROP INDEX IF EXISTS mgmt_uploads_resolving_job
