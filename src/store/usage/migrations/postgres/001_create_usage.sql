-- Usage seen by the model gateway and the egress proxy on PostgreSQL (store/usage/postgres-usage-store.ts), the
-- same records as the SQLite file's (../001_create_usage.sql): one row per model request and per egress
-- decision, from every node. `at` is epoch milliseconds, `day` its UTC date (YYYY-MM-DD), what daily budgets and
-- GET /usage group by. Costs are integer micro-USD, so sums are exact. The texts a container can put there (the
-- model named in a request body, a refusal's or a decision's reason, a host) are `json` strings: the text type
-- cannot hold a NUL character, and a record refused for one would be a model request nobody pays for.
-- Identifiers compare byte-wise (COLLATE "C"), as in SQLite, whatever the database's locale.
CREATE TABLE model_requests (
  id                          BIGINT           GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at                          BIGINT           NOT NULL,
  day                         TEXT COLLATE "C" NOT NULL,
  caller                      TEXT COLLATE "C" NOT NULL,
  run_id                      TEXT COLLATE "C" NOT NULL,
  session_id                  TEXT COLLATE "C",
  agent_id                    TEXT COLLATE "C",
  model                       JSON             NOT NULL,  -- a JSON string
  status                      INTEGER          NOT NULL,
  input_tokens                BIGINT           NOT NULL,
  output_tokens               BIGINT           NOT NULL,
  cache_creation_input_tokens BIGINT           NOT NULL,
  cache_read_input_tokens     BIGINT           NOT NULL,
  cost_micro_usd              BIGINT           NOT NULL,
  refusal_limit               TEXT CHECK (refusal_limit IN ('run', 'caller_usd_per_day', 'caller_tokens_per_day')),
  refusal_message             JSON,                       -- a JSON string, or NULL
  overhead_ms                 DOUBLE PRECISION
);
CREATE INDEX model_requests_caller_day ON model_requests (caller, day);
CREATE INDEX model_requests_run ON model_requests (run_id);

CREATE TABLE egress_decisions (
  id         BIGINT           GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at         BIGINT           NOT NULL,
  day        TEXT COLLATE "C" NOT NULL,
  caller     TEXT COLLATE "C" NOT NULL,
  run_id     TEXT COLLATE "C" NOT NULL,
  session_id TEXT COLLATE "C",
  agent_id   TEXT COLLATE "C",
  method     TEXT             NOT NULL CHECK (method IN ('CONNECT', 'HTTP')),
  host       JSON             NOT NULL,  -- a JSON string
  port       INTEGER          NOT NULL,
  decision   TEXT             NOT NULL,
  reason     JSON                        -- a JSON string, or NULL
);
CREATE INDEX egress_decisions_caller_day ON egress_decisions (caller, day);
CREATE INDEX egress_decisions_run ON egress_decisions (run_id);
CREATE INDEX egress_decisions_at ON egress_decisions (at);
