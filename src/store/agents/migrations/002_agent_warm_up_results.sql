-- Results the agent's engine printed before its first turn: 1 for an engine warmed up in the pool (its
-- blank warm-up turn, core/pool), 0 otherwise (and for agents stored before the column existed). A
-- restarted service skips them when it counts the turns that ended in the container's log.
ALTER TABLE agents ADD COLUMN warm_up_results INTEGER NOT NULL DEFAULT 0;
