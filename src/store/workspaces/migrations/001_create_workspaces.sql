-- Workspaces (docs/workspaces.md): the index of the per-workspace disks, and which session uses which.
CREATE TABLE workspaces (
  id                   TEXT PRIMARY KEY NOT NULL,
  owner                TEXT NOT NULL,
  created_at           TEXT NOT NULL,
  last_used_at         TEXT NOT NULL,
  source               TEXT NOT NULL CHECK (source IN ('empty', 'upload', 'git', 'fork', 'session')),
  owned_by_session     TEXT,
  upload_checkpoint_at TEXT,
  run_checkpoint_at    TEXT,
  size_bytes           INTEGER NOT NULL DEFAULT 0,
  file_count           INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX workspaces_owner ON workspaces (owner);
CREATE INDEX workspaces_last_used ON workspaces (last_used_at);

CREATE TABLE session_workspaces (
  session_id   TEXT PRIMARY KEY NOT NULL,
  workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  owned        INTEGER NOT NULL CHECK (owned IN (0, 1))
);
CREATE INDEX session_workspaces_workspace ON session_workspaces (workspace_id);
