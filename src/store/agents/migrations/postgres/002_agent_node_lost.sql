-- Node loss (issue 26): another node marks a lost node's live agents exited (exit_error 'node_lost') and sets
-- lost_at. Writes of the lost node itself, were it still running, no longer change such a record: an agent
-- declared lost stays exited (its container is removed when that node notices or starts again).
ALTER TABLE agents ADD COLUMN lost_at TIMESTAMPTZ;
