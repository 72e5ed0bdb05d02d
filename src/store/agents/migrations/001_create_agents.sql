-- Persistent agents, so that a restarted service finds the agents whose containers outlived it. A row is
-- written when the agent's container exists and updated at every status change; `container` and `run_id`
-- find the container and the run's configuration directory again; `turns_ended` (completed and failed
-- turns) tells whether a turn in progress at a crash ended while the service was down.
CREATE TABLE agents (
  id                    TEXT    PRIMARY KEY NOT NULL,
  owner                 TEXT    NOT NULL,
  session_id            TEXT    NOT NULL,
  run_id                TEXT    NOT NULL,      -- the run's configuration directory (sessions/.runs/<run_id>)
  inputs_id             TEXT    NOT NULL,      -- its input directory and the container's berth.run label
  container             TEXT    NOT NULL,      -- container name
  workdir               TEXT    NOT NULL,
  persistent            INTEGER NOT NULL,      -- whether the session keeps a transcript
  idle_timeout_seconds  INTEGER NOT NULL,
  idle_timeout_disabled INTEGER NOT NULL,
  status                TEXT    NOT NULL CHECK (status IN ('starting', 'idle', 'generating', 'exited')),
  current_turn          TEXT,                  -- the turn in progress, while generating
  turns_completed       INTEGER NOT NULL DEFAULT 0,
  turns_ended           INTEGER NOT NULL DEFAULT 0,
  exit_error            TEXT,
  created_at            TEXT    NOT NULL,      -- ISO 8601, UTC, milliseconds
  last_activity_at      TEXT    NOT NULL,
  exited_at             TEXT
);

CREATE INDEX agents_live ON agents (status) WHERE status <> 'exited';
