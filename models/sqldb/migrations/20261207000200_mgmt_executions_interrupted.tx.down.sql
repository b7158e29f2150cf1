-- Nothing to undo: interrupted executions stay interrupted.
SELECT 1
