-- Async jobs on PostgreSQL (store/jobs/postgres-job-store.ts), the same records as the SQLite file's
-- (../001_create_jobs.sql, ../002_job_owner.sql) in one step. `seq` is the insertion order: pending jobs start
-- in it and listings are newest first by it, so a clock that steps back, or a node whose clock is behind,
-- cannot reorder jobs. Free text (output, error) and the JSON documents are `json` columns: the text type
-- cannot hold a NUL character and an engine's output may, while a JSON string holds it escaped; json (not
-- jsonb) keeps the document exactly as written. Identifiers compare byte-wise (COLLATE "C"), as in SQLite,
-- whatever the database's locale.
CREATE TABLE jobs (
  seq               BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id                TEXT        COLLATE "C" NOT NULL UNIQUE,
  status            TEXT        NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'crashed', 'cancelled')),
  output            JSON        NOT NULL DEFAULT '""',  -- a JSON string
  structured_output JSON,                              -- NULL when the run produced none
  session_id        TEXT        COLLATE "C" NOT NULL,
  run_id            TEXT        COLLATE "C" NOT NULL,
  crash_info        JSON,                              -- set only when status is crashed
  error             JSON,                              -- a JSON string, or NULL
  webhook_url       TEXT,
  -- NULL without webhook_url; 'pending' from the moment the job finishes until the delivery ends.
  webhook_state     TEXT        CHECK (webhook_state IN ('pending', 'delivered', 'failed')),
  request           JSON        NOT NULL,              -- the run request as received
  -- The caller that submitted it (its token's `sub`; '' with authentication off).
  owner             TEXT        COLLATE "C" NOT NULL,
  created_at        TIMESTAMPTZ NOT NULL,
  updated_at        TIMESTAMPTZ NOT NULL,
  finished_at       TIMESTAMPTZ
);

CREATE INDEX jobs_status_seq ON jobs (status, seq);
CREATE INDEX jobs_owner_seq ON jobs (owner, seq);
CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_webhook_pending ON jobs (seq) WHERE webhook_state = 'pending';
