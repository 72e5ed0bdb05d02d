// The browser's stand-in for pack-directory.ts (in dist/browser, the package's "browser" export condition;
// scripts/browser-tree.mjs): a web page has no local directory to walk, so uploadDirectory is a Node-only
// call. Upload files one at a time, or an archive.
import type { PackOptions, PackPlan } from './local-tree-types.js';

export type { PackOptions, PackPlan };

export function planDirectory(_dir: string, _options?: PackOptions): Promise<PackPlan> {
  return Promise.reject(new Error('uploadDirectory needs Node: in a browser, upload files or an archive'));
}

export function packDirectory(_plan: PackPlan): AsyncIterable<Uint8Array> {
  throw new Error('uploadDirectory needs Node: in a browser, upload files or an archive');
}

export function linkLeaves(_path: string, _target: string): boolean {
  throw new Error('linkLeaves needs Node');
}
