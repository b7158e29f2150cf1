DROP TABLE mgmt_execution_results
--bun:split
DROP TABLE mgmt_execution_targets
--bun:split
DROP TABLE mgmt_execution_attempts
--bun:split
DROP TABLE mgmt_executions
--bun:split
DROP TABLE mgmt_upload_rows
--bun:split
DROP TABLE mgmt_uploads
--bun:split
DROP TABLE mgmt_view_columns
