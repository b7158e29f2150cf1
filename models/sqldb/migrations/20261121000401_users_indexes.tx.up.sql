CREATE INDEX users_org_department_status ON users (org_id, department, status, id);
