// The workspace index, behind a small interface (SQLite, and PostgreSQL for several nodes): which
// workspaces exist, whose they are, when they were last used, and which session uses which.
// test/support/workspace-store-contract.ts is the suite every backend must pass.

export const WORKSPACE_SOURCES = ['empty', 'upload', 'git', 'fork', 'session'] as const;
/** How a workspace came to be: POST /workspaces (empty, upload, git), a fork's copy, or a session's own. */
export type WorkspaceSource = (typeof WORKSPACE_SOURCES)[number];

export interface WorkspaceRecord {
  readonly id: string;
  /** The caller that created it (its token's `sub`; '' with authentication off). */
  readonly owner: string;
  /** ISO 8601 timestamps (UTC, milliseconds). */
  readonly createdAt: string;
  readonly lastUsedAt: string;
  readonly source: WorkspaceSource;
  /** The session whose own workspace this is (removed with it); null for a caller's. */
  readonly ownedBySession: string | null;
  readonly uploadCheckpointAt: string | null;
  readonly runCheckpointAt: string | null;
  /** Usage of the tree as last measured (after each change through the API and after each run). */
  readonly sizeBytes: number;
  readonly fileCount: number;
}

export interface SessionLink {
  readonly sessionId: string;
  readonly workspaceId: string;
  /** Whether the workspace is the session's own (removed with the session). */
  readonly owned: boolean;
}

/**
 * Where a workspace's current content is, with several nodes (SERVICE_SHARED_DIR): the number of its last copy
 * saved to the shared directory (0: never saved) and the node that saved it (null: none yet).
 */
export interface WorkspaceCopy {
  readonly copy: number;
  readonly node: string | null;
}

export type WorkspaceChange = Partial<Pick<WorkspaceRecord, 'lastUsedAt' | 'uploadCheckpointAt' | 'runCheckpointAt' | 'sizeBytes' | 'fileCount' | 'source'>>;

export interface WorkspaceStore {
  insert(record: WorkspaceRecord): Promise<void>;
  get(id: string): Promise<WorkspaceRecord | undefined>;
  /** The owner's workspaces, newest first. */
  listByOwner(owner: string): Promise<WorkspaceRecord[]>;
  /** Workspaces the owner created itself (not session-owned): what SERVICE_WORKSPACE_MAX_PER_CALLER counts. */
  countCallerOwned(owner: string): Promise<number>;
  update(id: string, change: WorkspaceChange): Promise<void>;
  /** Deletes the workspace and its session links. */
  delete(id: string): Promise<void>;
  /** Workspaces last used before `isoTime`. */
  unusedSince(isoTime: string): Promise<WorkspaceRecord[]>;
  /** Every workspace id (for reconciling with the disks at start). */
  ids(): Promise<string[]>;

  /** The workspace's saved copy, undefined for an unknown workspace. */
  copyOf(id: string): Promise<WorkspaceCopy | undefined>;
  /** Records a copy `node` has just saved; answers its number (one above the last), undefined for an unknown workspace. */
  recordCopy(id: string, node: string): Promise<number | undefined>;

  link(link: SessionLink): Promise<void>;
  linkOf(sessionId: string): Promise<SessionLink | undefined>;
  /** Sessions linked to the workspace. */
  sessionsOf(workspaceId: string): Promise<string[]>;
  unlink(sessionId: string): Promise<void>;

  close(): void;
}
