DROP TABLE notification_delivery_log;
--bun:split
DROP TABLE notification_deliveries;
--bun:split
DROP TABLE notification_runs;
--bun:split
DROP TABLE notification_schedules;
--bun:split
DROP TABLE notification_templates;
