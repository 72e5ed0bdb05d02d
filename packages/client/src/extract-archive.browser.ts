// The browser's stand-in for extract-archive.ts (in dist/browser, the package's "browser" export condition;
// scripts/browser-tree.mjs): a web page has no local directory to unpack into, so downloadDirectory is a
// Node-only call. Download the archive instead.
import type { ExtractedArchive } from './local-tree-types.js';

export type { ExtractedArchive };

export class UnsafeArchiveError extends Error {
  constructor(
    readonly entry: string,
    readonly reason: string,
  ) {
    super(`refused the archive: entry ${JSON.stringify(entry)} ${reason}; nothing was written`);
  }
}

export function extractArchive(_source: unknown, _target: string): Promise<ExtractedArchive> {
  return Promise.reject(new Error('downloadDirectory needs Node: in a browser, download the archive'));
}
