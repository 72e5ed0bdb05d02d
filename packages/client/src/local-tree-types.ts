// The types of the Node-only parts (pack-directory.ts, extract-archive.ts), apart from them so that their
// browser stand-ins (*.browser.ts) share them without importing Node code.

export interface PackOptions {
  /** Honour .gitignore files and .git/info/exclude (default true). */
  gitignore?: boolean;
  /** More gitignore-style patterns, relative to the directory (e.g. `['*.log', 'dist/']`). */
  ignore?: readonly string[];
  /** Include the `.git` directory (default false). */
  includeGit?: boolean;
  /** Told of each entry left out because Berth could not take it (not of ignored ones). */
  onSkip?: (path: string, reason: string) => void;
}

/** What will be packed: the entries (relative POSIX paths, parents before children) and their totals. */
export interface PackPlan {
  readonly dir: string;
  readonly entries: readonly string[];
  readonly files: number;
  /** Bytes of the regular files (before compression). */
  readonly bytes: number;
}

/** What a local unpack wrote. */
export interface ExtractedArchive {
  readonly files: number;
  readonly directories: number;
  readonly links: number;
  /** Bytes of the regular files. */
  readonly bytes: number;
}
