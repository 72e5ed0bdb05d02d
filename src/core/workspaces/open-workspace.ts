// The shape of a mounted workspace that the file, archive, diff, clone and checkpoint modules work on: its own
// module so that they need not import the service that opens it (which itself takes checkpoints).

/** A mounted workspace, for Berth's own file operations. */
export interface OpenWorkspace {
  readonly id: string;
  /** Host path of the nosymfollow view root (use for ALL API file access). */
  readonly view: string;
  /** join(view, 'tree') */
  readonly tree: string;
  /** join(view, '.berth'): checkpoints, tmp */
  readonly internal: string;
  readonly maxBytes: number;
  readonly maxFiles: number;
  /** Host ids for files Berth writes. */
  readonly fileOwner: { uid: number; gid: number };
  /** Entries of the tree (files, directories, links) when this operation began: what maxFiles bounds. */
  readonly fileCount: number;
  /**
   * A write that knows exactly what it changed (one upload, one delete) reports it here; the tree is then not
   * walked after it (a walk costs about 25 ms per 1,000 entries). Writes that report nothing are measured.
   */
  readonly adjustUsage?: (bytes: number, files: number) => void;
}
