-- Where a workspace's current content is (issue 26, SERVICE_SHARED_DIR; ../002_workspace_copies.sql): the
-- node that saved it last and the number of that saved copy (0: never saved; only on its node's disk).
ALTER TABLE workspaces ADD COLUMN node TEXT COLLATE "C";
ALTER TABLE workspaces ADD COLUMN copy BIGINT NOT NULL DEFAULT 0;
