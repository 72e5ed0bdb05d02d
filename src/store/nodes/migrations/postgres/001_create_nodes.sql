-- The nodes sharing one database (store/nodes/postgres-node-store.ts, issue 26): each registers under its name
-- and holds a lease, renewed by heartbeats. `holder` is the process that holds the name now (a random id per
-- start), so that a process whose lease was taken over cannot renew or release the new one. `data_id` names
-- the node's data directory (an id kept in it): a restart on the same directory (after a crash, within the
-- lease) takes its name back at once, as a single node re-attaches after a restart.
-- A stopped node keeps its row, released (released_at set); a node whose lease lapsed without a release is
-- lost (what expired() answers).
CREATE TABLE nodes (
  name         TEXT        COLLATE "C" PRIMARY KEY,
  url          TEXT        NOT NULL,
  version      TEXT        NOT NULL,
  holder       TEXT        NOT NULL,
  data_id      TEXT        NOT NULL,
  started_at   TIMESTAMPTZ NOT NULL,
  heartbeat_at TIMESTAMPTZ NOT NULL,
  expires_at   TIMESTAMPTZ NOT NULL,
  released_at  TIMESTAMPTZ
);

CREATE INDEX nodes_expires_at ON nodes (expires_at) WHERE released_at IS NULL;
