CREATE INDEX device_accounts_org_id ON device_accounts (org_id, id);
--bun:split
CREATE UNIQUE INDEX jobs_one_device_sync ON jobs (org_id) WHERE kind = 'DeviceAccountSync' AND status IN ('QUEUED', 'RUNNING');
