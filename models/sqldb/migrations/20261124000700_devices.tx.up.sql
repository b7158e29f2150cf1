CREATE TABLE agent_install_keys (
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	agent_type TEXT NOT NULL,
	key_digest TEXT NOT NULL,
	key_sealed {{.Blob}} NOT NULL,
	created_at {{.Time}} NOT NULL,
	PRIMARY KEY (org_id, agent_type)
);
--bun:split
CREATE UNIQUE INDEX agent_install_keys_digest ON agent_install_keys (key_digest);
--bun:split
CREATE TABLE devices (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	platform TEXT NOT NULL,
	name TEXT NOT NULL DEFAULT '',
	os_type TEXT NOT NULL DEFAULT '',
	os_distribution TEXT NOT NULL DEFAULT '',
	os_major_version TEXT NOT NULL DEFAULT '',
	os_release_name TEXT NOT NULL DEFAULT '',
	os_build_version TEXT NOT NULL DEFAULT '',
	serial_number TEXT NOT NULL DEFAULT '',
	ip_address TEXT NOT NULL DEFAULT '',
	agent_version TEXT NOT NULL DEFAULT '',
	join_type TEXT NOT NULL DEFAULT '',
	domain TEXT NOT NULL DEFAULT '',
	tenant TEXT NOT NULL DEFAULT '',
	dns_hostname TEXT NOT NULL DEFAULT '',
	container TEXT NOT NULL DEFAULT '',
	managed_by TEXT NOT NULL DEFAULT '',
	owner TEXT NOT NULL DEFAULT '',
	mdm TEXT NOT NULL DEFAULT '',
	description TEXT NOT NULL DEFAULT '',
	is_deactivated BOOLEAN NOT NULL DEFAULT FALSE,
	secret_hash {{.Blob}},
	checkin_interval_seconds BIGINT NOT NULL,
	reported_digest TEXT NOT NULL DEFAULT '',
	total_local_accounts BIGINT NOT NULL DEFAULT 0,
	linked_local_accounts BIGINT NOT NULL DEFAULT 0,
	agent_installed_time {{.Time}} NOT NULL,
	date_added {{.Time}} NOT NULL,
	last_contact_time {{.Time}},
	inactive_after {{.Time}},
	uninstall_requested_at {{.Time}},
	deleted_at {{.Time}},
	updated_at {{.Time}} NOT NULL
);
--bun:split
CREATE INDEX devices_org_id_id ON devices (org_id, id);
--bun:split
CREATE INDEX devices_org_serial ON devices (org_id, serial_number) WHERE serial_number <> '';
--bun:split
CREATE INDEX devices_org_hostname ON devices (org_id, lower(dns_hostname)) WHERE dns_hostname <> '';
--bun:split
CREATE TABLE device_accounts (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL,
	device_id BIGINT NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
	user_name TEXT NOT NULL,
	permission_level TEXT NOT NULL,
	last_login {{.Time}},
	link_status TEXT NOT NULL DEFAULT 'unlinked',
	link_type TEXT NOT NULL DEFAULT '',
	linked_at {{.Time}},
	idp_user_id BIGINT,
	link_permission_level TEXT NOT NULL DEFAULT '',
	link_command_id BIGINT,
	created_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
);
--bun:split
CREATE UNIQUE INDEX device_accounts_device_name ON device_accounts (device_id, user_name);
--bun:split
CREATE UNIQUE INDEX device_accounts_device_user ON device_accounts (device_id, idp_user_id) WHERE idp_user_id IS NOT NULL;
--bun:split
CREATE INDEX device_accounts_idp_user ON device_accounts (org_id, idp_user_id) WHERE idp_user_id IS NOT NULL;
--bun:split
CREATE TABLE device_commands (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL,
	device_id BIGINT NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
	account_id BIGINT,
	type TEXT NOT NULL,
	args {{.JSON}} NOT NULL,
	status TEXT NOT NULL DEFAULT 'pending',
	message TEXT NOT NULL DEFAULT '',
	created_at {{.Time}} NOT NULL,
	acked_at {{.Time}}
);
--bun:split
CREATE INDEX device_commands_pending ON device_commands (device_id, id) WHERE status = 'pending';
--bun:split
CREATE TABLE device_offline_users (
	device_id BIGINT NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
	user_id BIGINT NOT NULL,
	org_id BIGINT NOT NULL,
	display_name TEXT NOT NULL DEFAULT '',
	user_name TEXT NOT NULL DEFAULT '',
	sam_account_name TEXT NOT NULL DEFAULT '',
	local_account_name TEXT NOT NULL DEFAULT '',
	enrolled_time {{.Time}},
	primary_source {{.JSON}},
	enrolled_authenticators {{.JSON}},
	removal_command_id BIGINT,
	PRIMARY KEY (device_id, user_id)
);
--bun:split
CREATE TABLE device_link_history (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	device_id BIGINT NOT NULL,
	device_name TEXT NOT NULL DEFAULT '',
	account_id BIGINT,
	user_name TEXT NOT NULL DEFAULT '',
	idp_user_id BIGINT,
	action TEXT NOT NULL,
	link_type TEXT NOT NULL DEFAULT '',
	old_state TEXT NOT NULL DEFAULT '',
	new_state TEXT NOT NULL DEFAULT '',
	reason TEXT NOT NULL DEFAULT '',
	actor TEXT NOT NULL DEFAULT '',
	job_id BIGINT,
	created_at {{.Time}} NOT NULL
);
--bun:split
CREATE INDEX device_link_history_org ON device_link_history (org_id, created_at, id);
--bun:split
CREATE TABLE account_linking_settings (
	org_id BIGINT PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
	settings {{.JSON}} NOT NULL,
	updated_at {{.Time}} NOT NULL
);
