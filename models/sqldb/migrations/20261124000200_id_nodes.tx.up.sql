-- Id node leases (models/ids_lease.go): a process making ids holds one node
-- until expires_ms (the database's clock, Unix milliseconds); no id of the
-- holder has a millisecond (since the id epoch) after id_ms_bound.
CREATE TABLE id_nodes (
	node INTEGER PRIMARY KEY CHECK (node >= 0 AND node < 1024),
	holder TEXT NOT NULL,
	expires_ms BIGINT NOT NULL,
	id_ms_bound BIGINT NOT NULL
)
