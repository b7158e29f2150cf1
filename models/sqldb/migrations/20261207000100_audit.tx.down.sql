DROP TABLE audit_digests
--bun:split
DROP TABLE audit_events
--bun:split
DROP TABLE audit_heads
