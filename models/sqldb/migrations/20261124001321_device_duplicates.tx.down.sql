DROP INDEX IF EXISTS devices_possible_duplicate_of;
--bun:split
ALTER TABLE devices DROP COLUMN possible_duplicate_of;
