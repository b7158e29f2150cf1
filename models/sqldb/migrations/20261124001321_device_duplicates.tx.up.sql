-- A device registered with the serial number (or, without one, the DNS host
-- name) of another live device of its organization, without proving that
-- device's credential, is a new device flagged as a possible duplicate of
-- the other (models/devices.go, Register; docs/devices.md). Deleting
-- either of them clears the flag.
ALTER TABLE devices ADD COLUMN possible_duplicate_of BIGINT;
--bun:split
CREATE INDEX devices_possible_duplicate_of ON devices (possible_duplicate_of) WHERE possible_duplicate_of IS NOT NULL;
