-- Async jobs. A row is written (pending) before its container exists and is only ever moved forward by
-- compare-and-set updates (job-store.ts). `seq` is the insertion order: pending jobs start in it and
-- listings are newest first by it, so a clock that steps back cannot reorder jobs.
CREATE TABLE jobs (
  seq               INTEGER PRIMARY KEY AUTOINCREMENT,
  id                TEXT    NOT NULL UNIQUE,
  status            TEXT    NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'crashed', 'cancelled')),
  output            TEXT    NOT NULL DEFAULT '',
  structured_output TEXT,                     -- JSON, NULL when the run produced none
  session_id        TEXT    NOT NULL,
  run_id            TEXT    NOT NULL,
  crash_info        TEXT,                     -- JSON, set only when status is crashed
  error             TEXT,
  webhook_url       TEXT,
  -- NULL without webhook_url; 'pending' from the moment the job finishes until the delivery ends.
  webhook_state     TEXT    CHECK (webhook_state IN ('pending', 'delivered', 'failed')),
  request           TEXT    NOT NULL,         -- the run request as received (JSON)
  created_at        TEXT    NOT NULL,         -- ISO 8601, UTC, milliseconds
  updated_at        TEXT    NOT NULL,
  finished_at       TEXT
);

CREATE INDEX jobs_status_seq ON jobs (status, seq);
CREATE INDEX jobs_finished_at ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX jobs_webhook_pending ON jobs (seq) WHERE webhook_state = 'pending';
