DROP TABLE IF EXISTS device_sync_keys;
--bun:split
DROP TABLE IF EXISTS agent_installations;
--bun:split
DROP INDEX IF EXISTS jobs_one_device_sync;
--bun:split
DROP INDEX IF EXISTS device_accounts_org_id;
