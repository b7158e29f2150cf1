DROP TABLE admin_settings;
--bun:split
DROP TABLE oauth_tokens;
--bun:split
DROP TABLE oauth_clients;
