// A local directory as the tar.gz a workspace takes (POST /workspaces/{id}/archive), for Node only (the
// browser build swaps in pack-directory.browser.ts; see package.json's "browser" field).
//
// What goes in is what `git add -A` would add: every .gitignore on the way down is honoured (and
// .git/info/exclude), with git's precedence (a deeper file overrides a shallower one, `!` re-includes, an
// ignored directory is not entered), using `ignore`, the gitignore matcher eslint and others use. `.git`
// itself stays out unless asked for. Entries Berth would refuse are left out here, each reported, so one
// stray link does not cost the whole upload: links pointing outside the directory, sockets, FIFOs and
// devices. Hard links are stored as separate files and setuid/setgid/sticky bits dropped (Berth refuses
// both), owners are not recorded (portable mode). The archive is produced as it is read: nothing is
// buffered beyond the stream's own chunks.
import { Stats } from 'node:fs';
import { lstat, readFile, readdir, readlink } from 'node:fs/promises';
import { isAbsolute, join, posix, sep } from 'node:path';
import ignore, { type Ignore } from 'ignore';
import { Pack } from 'tar';
import type { PackOptions, PackPlan } from './local-tree-types.js';

export type { PackOptions, PackPlan };

interface Layer {
  /** The directory the rules are relative to, relative to the root ('' for the root). */
  readonly base: string;
  readonly rules: Ignore;
}

/** Walks `dir` and decides what goes into its archive (see the file's comment). */
export async function planDirectory(dir: string, options: PackOptions = {}): Promise<PackPlan> {
  const useGitignore = options.gitignore ?? true;
  const entries: string[] = [];
  let files = 0;
  let bytes = 0;
  const root: Layer[] = [];
  if (options.ignore && options.ignore.length > 0) root.push({ base: '', rules: ignore().add([...options.ignore]) });
  if (useGitignore) {
    const exclude = await readRules(join(dir, '.git', 'info', 'exclude'));
    if (exclude) root.push({ base: '', rules: exclude });
  }

  const walk = async (relDir: string, layers: readonly Layer[]): Promise<void> => {
    const here = useGitignore ? await readRules(join(dir, relDir, '.gitignore')) : undefined;
    const active = here ? [...layers, { base: relDir, rules: here }] : layers;
    const names = (await readdir(join(dir, relDir))).sort();
    for (const name of names) {
      const path = relDir === '' ? name : `${relDir}/${name}`;
      if (name === '.git' && !options.includeGit) continue;
      const stat = await lstat(join(dir, path));
      if (ignored(active, path, stat.isDirectory())) continue;
      if (stat.isDirectory()) {
        entries.push(path);
        await walk(path, active);
      } else if (stat.isFile()) {
        entries.push(path);
        files += 1;
        bytes += stat.size;
      } else if (stat.isSymbolicLink()) {
        const target = await readlink(join(dir, path));
        if (linkLeaves(path, target)) options.onSkip?.(path, `a symbolic link pointing outside the directory (${target})`);
        else entries.push(path);
      } else {
        options.onSkip?.(path, 'not a regular file, directory or symbolic link');
      }
    }
  };
  await walk('', root);
  return { dir, entries, files, bytes };
}

/** The plan's entries as a gzipped tar stream (a Node Readable; also an async iterable of Buffers). */
export function packDirectory(plan: PackPlan): Pack {
  const pack = new Pack({
    cwd: plan.dir,
    gzip: true,
    portable: true,
    noDirRecurse: true,
    follow: false,
    // Every entry's lstat passes here before its header is written (the entry reads the same object):
    // a link count of 1 makes every file a file, never a hard link to another entry, and the
    // setuid/setgid/sticky bits are dropped.
    filter: (_path, stat) => {
      if (stat instanceof Stats) {
        stat.nlink = 1;
        stat.mode &= ~0o7000;
      }
      return true;
    },
  });
  // Pack.add, not tar.c's file list: tar.c reads a name starting with '@' as an archive to copy from.
  for (const path of plan.entries) pack.add(path);
  pack.end();
  return pack;
}

/** Whether the deepest rule that speaks about `path` ignores it (git's precedence). */
function ignored(layers: readonly Layer[], path: string, isDirectory: boolean): boolean {
  for (let i = layers.length - 1; i >= 0; i -= 1) {
    const layer = layers[i]!;
    const relativePath = layer.base === '' ? path : path.slice(layer.base.length + 1);
    const verdict = layer.rules.test(isDirectory ? `${relativePath}/` : relativePath);
    if (verdict.ignored) return true;
    if (verdict.unignored) return false;
  }
  return false;
}

async function readRules(file: string): Promise<Ignore | undefined> {
  try {
    return ignore().add(await readFile(file, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
    throw error;
  }
}

/** Whether a link at `path` (relative to the root) with `target` points outside the root. */
export function linkLeaves(path: string, target: string): boolean {
  if (isAbsolute(target) || target.startsWith('/')) return true;
  const resolved = posix.normalize(posix.join(posix.dirname(path), target.split(sep).join('/')));
  return resolved === '..' || resolved.startsWith('../');
}
