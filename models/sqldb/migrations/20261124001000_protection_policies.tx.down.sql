DROP TABLE ca_policy_assignments
--bun:split
DROP TABLE ca_policy_condition_configs
--bun:split
DROP TABLE ca_policy_conditions
--bun:split
DROP TABLE ca_policies
--bun:split
DROP TABLE ca_condition_configs
