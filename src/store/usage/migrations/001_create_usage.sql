-- Usage seen by the model gateway and the egress proxy (docs/egress.md): one row per model request and per
-- egress decision. `day` is the UTC date of `at` (YYYY-MM-DD), what per-caller daily budgets and GET /usage
-- group by. Costs are integer micro-USD (the price table's precision), so sums are exact.
CREATE TABLE model_requests (
  id                          INTEGER PRIMARY KEY,
  at                          INTEGER NOT NULL,
  day                         TEXT    NOT NULL,
  caller                      TEXT    NOT NULL,
  run_id                      TEXT    NOT NULL,
  session_id                  TEXT,
  agent_id                    TEXT,
  model                       TEXT    NOT NULL,
  status                      INTEGER NOT NULL,
  input_tokens                INTEGER NOT NULL,
  output_tokens               INTEGER NOT NULL,
  cache_creation_input_tokens INTEGER NOT NULL,
  cache_read_input_tokens     INTEGER NOT NULL,
  cost_micro_usd              INTEGER NOT NULL,
  refusal_limit               TEXT CHECK (refusal_limit IN ('run', 'caller_usd_per_day', 'caller_tokens_per_day')),
  refusal_message             TEXT,
  overhead_ms                 REAL
);
CREATE INDEX model_requests_caller_day ON model_requests (caller, day);
CREATE INDEX model_requests_run ON model_requests (run_id);

CREATE TABLE egress_decisions (
  id         INTEGER PRIMARY KEY,
  at         INTEGER NOT NULL,
  day        TEXT    NOT NULL,
  caller     TEXT    NOT NULL,
  run_id     TEXT    NOT NULL,
  session_id TEXT,
  agent_id   TEXT,
  method     TEXT    NOT NULL CHECK (method IN ('CONNECT', 'HTTP')),
  host       TEXT    NOT NULL,
  port       INTEGER NOT NULL,
  decision   TEXT    NOT NULL,
  reason     TEXT
);
CREATE INDEX egress_decisions_caller_day ON egress_decisions (caller, day);
CREATE INDEX egress_decisions_run ON egress_decisions (run_id);
CREATE INDEX egress_decisions_at ON egress_decisions (at);
