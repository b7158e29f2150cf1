DROP TABLE IF EXISTS logon_script_configs;
--bun:split
DROP INDEX IF EXISTS users_org_mobile_number;
--bun:split
DROP TABLE IF EXISTS enrollment_cursors;
--bun:split
DROP TABLE IF EXISTS enrollments;
--bun:split
DROP TABLE IF EXISTS authn_factor_configs;
