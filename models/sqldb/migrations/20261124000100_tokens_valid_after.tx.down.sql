ALTER TABLE users DROP COLUMN tokens_valid_after
