ALTER TABLE notification_runs ADD COLUMN recipients BIGINT NOT NULL DEFAULT 0;
--bun:split
ALTER TABLE notification_runs ADD COLUMN skipped BIGINT NOT NULL DEFAULT 0;
--bun:split
ALTER TABLE notification_deliveries ADD COLUMN kind TEXT NOT NULL DEFAULT 'member';
