DROP TABLE IF EXISTS account_linking_settings;
--bun:split
DROP TABLE IF EXISTS device_link_history;
--bun:split
DROP TABLE IF EXISTS device_offline_users;
--bun:split
DROP TABLE IF EXISTS device_commands;
--bun:split
DROP TABLE IF EXISTS device_accounts;
--bun:split
DROP TABLE IF EXISTS devices;
--bun:split
DROP TABLE IF EXISTS agent_install_keys;
