CREATE TABLE ca_configs (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	factor_config_id BIGINT NOT NULL REFERENCES authn_factor_configs (id) ON DELETE CASCADE,
	is_enabled BOOLEAN NOT NULL,
	cert_der {{.Blob}} NOT NULL,
	subject_name TEXT NOT NULL,
	thumbprint TEXT NOT NULL,
	mapping_attribute TEXT NOT NULL,
	expires_on {{.Time}} NOT NULL,
	added_time {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
);
--bun:split
CREATE UNIQUE INDEX ca_configs_factor_thumbprint ON ca_configs (factor_config_id, thumbprint);
--bun:split
CREATE INDEX ca_configs_org ON ca_configs (org_id, factor_config_id);
