-- Node loss (issue 26): a node whose lease lapsed without a release is lost; one live node at a time takes
-- its work over. `loss_handler` / `loss_handler_until`: the node handling it now, by a compare-and-set on this
-- row, for a bounded time (a handler that dies mid-way is replaced once that time is over); `loss_handled_at`:
-- when its work was taken over (its running jobs crashed, its agents exited). Once a handler took the row,
-- the lost process can no longer renew its lease: were it still running (paused longer than its lease), it
-- finds itself unregistered at its next heartbeat. A new claim of the name (a restart) clears the three.
ALTER TABLE nodes ADD COLUMN loss_handler TEXT COLLATE "C";
ALTER TABLE nodes ADD COLUMN loss_handler_until TIMESTAMPTZ;
ALTER TABLE nodes ADD COLUMN loss_handled_at TIMESTAMPTZ;
