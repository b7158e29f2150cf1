CREATE TABLE users (
	id BIGINT PRIMARY KEY,
	org_id BIGINT NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
	first_name TEXT NOT NULL DEFAULT '',
	last_name TEXT NOT NULL DEFAULT '',
	display_name TEXT NOT NULL DEFAULT '',
	email TEXT NOT NULL DEFAULT '',
	employee_id TEXT NOT NULL DEFAULT '',
	title TEXT NOT NULL DEFAULT '',
	department TEXT NOT NULL DEFAULT '',
	company TEXT NOT NULL DEFAULT '',
	description TEXT NOT NULL DEFAULT '',
	manager_id BIGINT,
	city TEXT NOT NULL DEFAULT '',
	state_province TEXT NOT NULL DEFAULT '',
	street TEXT NOT NULL DEFAULT '',
	zip_postal TEXT NOT NULL DEFAULT '',
	post_office_box TEXT NOT NULL DEFAULT '',
	work_location TEXT NOT NULL DEFAULT '',
	seating_location TEXT NOT NULL DEFAULT '',
	country TEXT NOT NULL DEFAULT '',
	mobile_number TEXT NOT NULL DEFAULT '',
	home_phone TEXT NOT NULL DEFAULT '',
	telephone_number TEXT NOT NULL DEFAULT '',
	fax TEXT NOT NULL DEFAULT '',
	gender TEXT NOT NULL DEFAULT '',
	language TEXT NOT NULL DEFAULT '',
	is_domain_verified BOOLEAN NOT NULL DEFAULT FALSE,
	status INTEGER NOT NULL DEFAULT 1,
	is_licensed BOOLEAN NOT NULL DEFAULT TRUE,
	primary_source {{.JSON}},
	role TEXT NOT NULL DEFAULT 'user',
	password_hash TEXT NOT NULL DEFAULT '',
	failed_logins INTEGER NOT NULL DEFAULT 0,
	first_failed_login_at {{.Time}},
	blocked_until {{.Time}},
	created_at {{.Time}} NOT NULL,
	updated_at {{.Time}} NOT NULL
);
--bun:split
CREATE UNIQUE INDEX users_org_employee_id ON users (org_id, employee_id) WHERE employee_id <> '';
--bun:split
CREATE UNIQUE INDEX users_org_email ON users (org_id, lower(email)) WHERE email <> '';
--bun:split
CREATE INDEX users_org_id_id ON users (org_id, id);
--bun:split
CREATE INDEX users_manager_id ON users (manager_id);
