-- Where a workspace's current content is, for several nodes (issue 26, SERVICE_SHARED_DIR): the node that
-- saved it last and the number of that saved copy (0: never saved; its content is only on its node's disk).
ALTER TABLE workspaces ADD COLUMN node TEXT;
ALTER TABLE workspaces ADD COLUMN copy INTEGER NOT NULL DEFAULT 0;
