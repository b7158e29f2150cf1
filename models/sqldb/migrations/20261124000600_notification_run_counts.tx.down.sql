ALTER TABLE notification_deliveries DROP COLUMN kind;
--bun:split
ALTER TABLE notification_runs DROP COLUMN skipped;
--bun:split
ALTER TABLE notification_runs DROP COLUMN recipients;
