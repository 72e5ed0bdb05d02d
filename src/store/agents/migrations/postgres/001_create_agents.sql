-- Persistent agents on PostgreSQL (store/agents/postgres-agent-store.ts), the SQLite file's records
-- (../001_create_agents.sql, ../002_agent_warm_up_results.sql) in one step, plus the node whose Podman runs
-- the agent's container: a node's start follows again only its own agents (their containers are on its
-- Podman, not another's), so every query but the id's uniqueness names the node. Times are timestamptz.
-- exit_error is a json string: it can quote an engine's last output, which may hold a NUL that text cannot.
-- Identifiers compare byte-wise (COLLATE "C").
CREATE TABLE agents (
  id                    TEXT COLLATE "C" PRIMARY KEY,
  node                  TEXT COLLATE "C" NOT NULL,
  owner                 TEXT COLLATE "C" NOT NULL,
  session_id            TEXT COLLATE "C" NOT NULL,
  run_id                TEXT COLLATE "C" NOT NULL,  -- the run's configuration directory (sessions/.runs/<run_id>)
  inputs_id             TEXT COLLATE "C" NOT NULL,  -- its input directory and the container's berth.run label
  container             TEXT COLLATE "C" NOT NULL,  -- container name
  workdir               TEXT             NOT NULL,
  persistent            BOOLEAN          NOT NULL,  -- whether the session keeps a transcript
  idle_timeout_seconds  INTEGER          NOT NULL,
  idle_timeout_disabled BOOLEAN          NOT NULL,
  status                TEXT             NOT NULL CHECK (status IN ('starting', 'idle', 'generating', 'exited')),
  current_turn          TEXT COLLATE "C",           -- the turn in progress, while generating
  turns_completed       INTEGER          NOT NULL DEFAULT 0,
  turns_ended           INTEGER          NOT NULL DEFAULT 0,
  warm_up_results       INTEGER          NOT NULL DEFAULT 0,
  exit_error            JSON,                       -- a JSON string, or NULL
  created_at            TIMESTAMPTZ      NOT NULL,
  last_activity_at      TIMESTAMPTZ      NOT NULL,
  exited_at             TIMESTAMPTZ
);

CREATE INDEX agents_node_live ON agents (node, created_at) WHERE status <> 'exited';
CREATE INDEX agents_node_exited ON agents (node, exited_at) WHERE status = 'exited';
