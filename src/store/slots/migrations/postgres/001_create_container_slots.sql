-- Container places held in the cluster (store/slots/postgres-slot-store.ts, issue 26): one row per container (or
-- compose stack) a node runs for a caller, so that a per-caller limit counts every node's. A row counts only
-- while its node holds a live lease (a join on nodes): a lost node's places stop counting once its lease
-- lapses, without anyone deleting them; the node's next start deletes them. `holder` is a random id per place.
CREATE TABLE container_slots (
  holder      TEXT        COLLATE "C" PRIMARY KEY,
  node        TEXT        COLLATE "C" NOT NULL,
  kind        TEXT        NOT NULL CHECK (kind IN ('container', 'stack')),
  caller      TEXT        COLLATE "C" NOT NULL,
  acquired_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX container_slots_caller ON container_slots (kind, caller);
CREATE INDEX container_slots_node ON container_slots (node);
