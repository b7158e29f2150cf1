DROP TABLE protection_versions;
--bun:split
DROP TABLE device_group_members;
--bun:split
DROP TABLE device_groups;
