-- The node that accepted a job and runs it (issue 26, several nodes on one database). A node's start follows
-- again, crashes or re-queues only its own running and pending jobs, and resumes only its own webhook
-- deliveries: without it, a node starting would crash every other node's running jobs (their containers are
-- not on its Podman) and run their pending ones a second time. NULL for jobs recorded before (none were:
-- the PostgreSQL store was not selectable then).
ALTER TABLE jobs ADD COLUMN node TEXT COLLATE "C";

CREATE INDEX jobs_node_status_seq ON jobs (node, status, seq);
