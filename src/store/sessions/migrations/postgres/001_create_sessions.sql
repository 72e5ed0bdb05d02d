-- Sessions (docs/sessions.md) on PostgreSQL (store/sessions/postgres-session-record-store.ts): the index every
-- node lists and checks callers against, and the engine's transcripts, so that a session last run on one node
-- resumes on any other. A record is saved whole at the end of each run, its version one above the last.
-- Identifiers compare byte-wise (COLLATE "C"), as in SQLite, whatever the database's locale.
CREATE TABLE sessions (
  id               TEXT        COLLATE "C" PRIMARY KEY,
  owner            TEXT        COLLATE "C" NOT NULL,
  hidden           BOOLEAN     NOT NULL,
  title            TEXT        NOT NULL,
  node             TEXT        COLLATE "C" NOT NULL,
  version          BIGINT      NOT NULL CHECK (version > 0),
  last_activity_ms BIGINT      NOT NULL,
  saved_at         TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX sessions_owner_activity ON sessions (owner, last_activity_ms DESC);

CREATE TABLE session_transcripts (
  session_id    TEXT   COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  project       TEXT   COLLATE "C" NOT NULL,
  content       BYTEA  NOT NULL,
  written_at_ms BIGINT NOT NULL,
  PRIMARY KEY (session_id, project)
);
CREATE INDEX session_transcripts_project ON session_transcripts (project, written_at_ms DESC);
