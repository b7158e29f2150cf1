-- Tokens and sign-ins of a user issued before tokens_valid_after are refused:
-- set on a password change, deactivation and demotion (models.UserStore.Update).
ALTER TABLE users ADD COLUMN tokens_valid_after {{.Time}}
