-- Conditional access (docs/protection.md): condition configs of three
-- families, conditional access policies with their conditions, the configs
-- each condition names, and the users, groups, devices and device groups
-- each policy is assigned to.
CREATE TABLE ca_condition_configs (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	family TEXT NOT NULL,
	display_name TEXT NOT NULL,
	business_hours_bitmap TEXT NOT NULL DEFAULT '',
	timezone TEXT NOT NULL DEFAULT '',
	countries {{.JSON}} NOT NULL,
	is_unknown_ip_locations_included BOOLEAN NOT NULL DEFAULT FALSE,
	is_trusted_source BOOLEAN NOT NULL DEFAULT FALSE,
	ip_addresses TEXT NOT NULL DEFAULT '',
	ip_address_ranges {{.JSON}} NOT NULL,
	created_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
)
--bun:split
CREATE UNIQUE INDEX ca_condition_configs_name ON ca_condition_configs (org_id, family, lower(display_name))
--bun:split
CREATE INDEX ca_condition_configs_org ON ca_condition_configs (org_id, family, id)
--bun:split
-- One default policy per organization (the partial unique index makes its
-- lazy creation race-safe); names unique among the others.
CREATE TABLE ca_policies (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	description TEXT NOT NULL DEFAULT '',
	is_enabled BOOLEAN NOT NULL,
	is_default BOOLEAN NOT NULL DEFAULT FALSE,
	priority BIGINT NOT NULL,
	access_type TEXT NOT NULL,
	criteria_expression TEXT NOT NULL DEFAULT '',
	endpoints_settings {{.JSON}} NOT NULL,
	advanced_settings {{.JSON}} NOT NULL,
	created_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL,
	updated_by BIGINT NOT NULL DEFAULT 0,
	updated_by_name TEXT NOT NULL DEFAULT ''
)
--bun:split
CREATE UNIQUE INDEX ca_policies_default ON ca_policies (org_id) WHERE is_default
--bun:split
CREATE UNIQUE INDEX ca_policies_name ON ca_policies (org_id, lower(name)) WHERE NOT is_default
--bun:split
CREATE INDEX ca_policies_priority ON ca_policies (org_id, priority)
--bun:split
CREATE TABLE ca_policy_conditions (
	policy_id BIGINT NOT NULL REFERENCES ca_policies (id) ON DELETE CASCADE,
	sequence_number INTEGER NOT NULL,
	factor_type TEXT NOT NULL,
	comparator TEXT NOT NULL,
	include_all_trusted_sources BOOLEAN NOT NULL DEFAULT FALSE,
	PRIMARY KEY (policy_id, sequence_number)
)
--bun:split
-- config_id references without cascade: a config a policy names cannot be
-- deleted (the store answers 409 naming the policies first).
CREATE TABLE ca_policy_condition_configs (
	policy_id BIGINT NOT NULL REFERENCES ca_policies (id) ON DELETE CASCADE,
	sequence_number INTEGER NOT NULL,
	position INTEGER NOT NULL,
	config_id BIGINT NOT NULL REFERENCES ca_condition_configs (id),
	org_id BIGINT NOT NULL,
	PRIMARY KEY (policy_id, sequence_number, config_id)
)
--bun:split
CREATE INDEX ca_policy_condition_configs_config ON ca_policy_condition_configs (config_id, policy_id)
--bun:split
-- kind: user, group, device or device_group. target_id has no foreign key
-- (four tables): lists join the target, so a deleted target drops out.
CREATE TABLE ca_policy_assignments (
	policy_id BIGINT NOT NULL REFERENCES ca_policies (id) ON DELETE CASCADE,
	org_id BIGINT NOT NULL,
	kind TEXT NOT NULL,
	target_id BIGINT NOT NULL,
	PRIMARY KEY (policy_id, kind, target_id)
)
--bun:split
CREATE INDEX ca_policy_assignments_target ON ca_policy_assignments (org_id, kind, target_id)
