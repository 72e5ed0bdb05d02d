// Sessions as records (issue 26): what a node must know of a session to serve it — whose it is, whether it is
// a persistent agent's, its title, when it was last active, and the engine's transcripts themselves — behind
// one interface with two backends. PostgreSQL (postgres-session-record-store.ts) is the cluster's copy, read
// by every node; the directory backend (directory-session-records.ts) is a node's own session directories,
// where the engine's runs find their transcripts. core/sessions/shared-sessions.ts copies records from one to
// the other. test/support/session-record-store-contract.ts is the suite both must pass.

/** One transcript file of a session: `projects/<project>/<session id>.jsonl` of the engine's directory. */
export interface SessionTranscript {
  /** The engine's project directory name (its workdir with every non-alphanumeric character made '-'). */
  readonly project: string;
  /** The file's bytes, as Berth carried them back from the run (bounded by SERVICE_SESSIONS_MAX_BYTES). */
  readonly content: Buffer;
  /** When Berth last wrote it (epoch ms): what `continue` and the listing order go by. */
  readonly writtenAtMs: number;
}

export interface SessionRecord {
  /** A lower-case UUID (checked by core before it reaches a store). */
  readonly id: string;
  /** The caller (token `sub`) that created the session. */
  readonly owner: string;
  /** A persistent agent's session: not listed, not continued, its messages not served. */
  readonly hidden: boolean;
  /** From the transcript's last custom-title record; '' when none. */
  readonly title: string;
  /** The node whose run wrote this version (SERVICE_NODE_NAME). */
  readonly node: string;
  /**
   * Increases by one with every save. A store keeps a record only over an older version, so of two nodes
   * saving the same next version (two runs of one session at once, one per node), one is refused.
   */
  readonly version: number;
  readonly transcripts: readonly SessionTranscript[];
}

/** A listed session, without its transcripts. */
export interface SessionListing {
  readonly id: string;
  readonly title: string;
  /** The latest writtenAtMs of its transcripts. */
  readonly lastActivityMs: number;
}

/** Transcript projects are what projectDirName makes: nothing else may become a path or a row. */
export const PROJECT_NAME = /^[A-Za-z0-9-]{1,255}$/;

export interface SessionRecordStore {
  /**
   * Keeps the record whole (its transcripts replace the stored ones) when no record of that id is stored or
   * the stored one has a lower version; answers whether it was kept.
   */
  put(record: SessionRecord): Promise<boolean>;
  get(id: string): Promise<SessionRecord | undefined>;
  /** The stored version, 0 when there is none: the cheap check before a copy. */
  version(id: string): Promise<number>;
  /** The owner's sessions that are not hidden, most recently active first (ties by id). */
  list(owner: string): Promise<SessionListing[]>;
  /** The owner's visible session whose transcript for `project` was written last (`continue`). */
  latestForProject(owner: string, project: string): Promise<string | undefined>;
  remove(id: string): Promise<void>;
  close(): void;
}
