DROP TABLE event_hook_deliveries
--bun:split
DROP TABLE event_hooks
