DROP TABLE blob_chunks;
--bun:split
DROP TABLE blobs;
--bun:split
DROP TABLE job_results;
--bun:split
DROP TABLE jobs;
--bun:split
DROP TABLE organizations;
