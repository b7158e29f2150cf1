DROP INDEX IF EXISTS users_org_department_status;
