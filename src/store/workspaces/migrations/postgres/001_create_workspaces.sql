-- Workspaces (docs/workspaces.md) on PostgreSQL (store/workspaces/postgres-workspace-store.ts): the index of
-- the workspaces and which session uses which, as in the SQLite file (../001_create_workspaces.sql).
-- Identifiers compare byte-wise (COLLATE "C"), as in SQLite, whatever the database's locale.
CREATE TABLE workspaces (
  id                   TEXT        COLLATE "C" PRIMARY KEY,
  owner                TEXT        COLLATE "C" NOT NULL,
  created_at           TIMESTAMPTZ NOT NULL,
  last_used_at         TIMESTAMPTZ NOT NULL,
  source               TEXT        NOT NULL CHECK (source IN ('empty', 'upload', 'git', 'fork', 'session')),
  owned_by_session     TEXT        COLLATE "C",
  upload_checkpoint_at TIMESTAMPTZ,
  run_checkpoint_at    TIMESTAMPTZ,
  size_bytes           BIGINT      NOT NULL DEFAULT 0,
  file_count           BIGINT      NOT NULL DEFAULT 0
);
CREATE INDEX workspaces_owner ON workspaces (owner);
CREATE INDEX workspaces_last_used ON workspaces (last_used_at);

CREATE TABLE session_workspaces (
  session_id   TEXT    COLLATE "C" PRIMARY KEY,
  workspace_id TEXT    COLLATE "C" NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  owned        BOOLEAN NOT NULL
);
CREATE INDEX session_workspaces_workspace ON session_workspaces (workspace_id);
