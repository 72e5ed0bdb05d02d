// A workspace's tar.gz (GET /workspaces/{id}/archive) unpacked into a local directory, for Node only (the
// browser build swaps in extract-archive.browser.ts). The archive comes from a server, and what is in a
// workspace was written by code in a container: it is checked as hostile, the way Berth checks uploads.
// Every entry is checked BEFORE anything is written, and the whole archive is refused when one entry is
// not a plain file, directory or link staying inside: an absolute path, a `..` segment, a symbolic link
// pointing outside (or an entry beneath a link, which would be written through it), a hard link, a device,
// a FIFO, setuid/setgid bits. Nothing of a refused archive reaches the directory.
//
// How, without holding the archive in memory: it is written to a private staging directory beside the
// target (same file system), listed and checked there, unpacked there, and the unpacked tree renamed to the
// target, which must not exist or be empty. Owners are not taken from the archive (the files are the
// caller's), and node-tar's own guards (no absolute paths, no `..`, no writing through links) stay on.
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, rename, rm, rmdir } from 'node:fs/promises';
import { basename, dirname, join, posix, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { list, extract, type ReadEntry } from 'tar';
import type { ExtractedArchive } from './local-tree-types.js';
import { linkLeaves } from './pack-directory.js';

export type { ExtractedArchive };

/** An archive the client will not unpack: `entry` is the offending entry's path as the archive names it. */
export class UnsafeArchiveError extends Error {
  override readonly name = 'UnsafeArchiveError';

  constructor(
    readonly entry: string,
    readonly reason: string,
  ) {
    super(`refused the archive: entry ${JSON.stringify(entry)} ${reason}; nothing was written`);
  }
}

const FILE_TYPES = new Set(['File', 'OldFile', 'ContiguousFile']);

/** Unpacks a tar or tar.gz `source` into `target` (see the file's comment). */
export async function extractArchive(source: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>, target: string): Promise<ExtractedArchive> {
  const destination = resolve(target);
  await assertEmptyOrAbsent(destination);
  const staging = await mkdtemp(join(dirname(destination), `.${basename(destination)}.berth-`));
  try {
    const archive = join(staging, 'archive');
    const input = source instanceof ReadableStream ? Readable.fromWeb(source as import('node:stream/web').ReadableStream<Uint8Array>) : Readable.from(source);
    await pipeline(input, createWriteStream(archive, { mode: 0o600 }));
    const summary = await checkArchive(archive);
    const tree = join(staging, 'tree');
    await mkdir(tree);
    await extract({ file: archive, cwd: tree, strict: true, preservePaths: false, preserveOwner: false, noChmod: false });
    await assertEmptyOrAbsent(destination);
    await rmdir(destination).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
    });
    await rename(tree, destination);
    return summary;
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** Lists the archive and checks every entry (see the file's comment); throws UnsafeArchiveError at the first bad one. */
export async function checkArchive(file: string): Promise<ExtractedArchive> {
  const counts = { files: 0, directories: 0, links: 0, bytes: 0 };
  const links = new Set<string>();
  let refusal: UnsafeArchiveError | undefined;
  await list({
    file,
    strict: true,
    onReadEntry: (entry: ReadEntry) => {
      if (refusal) return;
      try {
        checkEntry(entry, links, counts);
      } catch (error) {
        refusal = error as UnsafeArchiveError;
      }
    },
  });
  if (refusal) throw refusal;
  return counts;
}

function checkEntry(entry: ReadEntry, links: Set<string>, counts: { files: number; directories: number; links: number; bytes: number }): void {
  const raw = entry.path;
  // The archive's own root (`./`, as `tar -C dir -c .` writes it) is the target itself: nothing to check.
  if (entry.type === 'Directory' && isRoot(raw)) return;
  const path = safePath(raw);
  for (let parent = posix.dirname(path); parent !== '.'; parent = posix.dirname(parent)) {
    if (links.has(parent)) throw new UnsafeArchiveError(raw, `lies beneath the symbolic link ${JSON.stringify(parent)}`);
  }
  if (links.has(path)) throw new UnsafeArchiveError(raw, 'replaces a symbolic link of the same archive');
  if (((entry.mode ?? 0) & 0o6000) !== 0) throw new UnsafeArchiveError(raw, 'has the setuid or setgid bit');
  if (FILE_TYPES.has(entry.type)) {
    counts.files += 1;
    counts.bytes += entry.size ?? 0;
  } else if (entry.type === 'Directory') {
    counts.directories += 1;
  } else if (entry.type === 'SymbolicLink') {
    const target = entry.linkpath ?? '';
    if (target === '' || linkLeaves(path, target)) throw new UnsafeArchiveError(raw, `is a symbolic link pointing outside the directory (${target})`);
    links.add(path);
    counts.links += 1;
  } else if (entry.type === 'Link') {
    throw new UnsafeArchiveError(raw, 'is a hard link');
  } else {
    throw new UnsafeArchiveError(raw, `is a ${entry.type} entry (only files, directories and symbolic links are taken)`);
  }
}

/** The entry's path without a leading `./` or trailing `/`; refused when absolute or with a `..` segment. */
function safePath(raw: string): string {
  if (raw.includes('\0')) throw new UnsafeArchiveError(raw, 'has a NUL byte in its path');
  if (raw.startsWith('/')) throw new UnsafeArchiveError(raw, 'has an absolute path');
  const segments = raw.split('/').filter((segment) => segment !== '' && segment !== '.');
  if (segments.includes('..')) throw new UnsafeArchiveError(raw, 'has a ".." segment');
  if (segments.length === 0) throw new UnsafeArchiveError(raw, 'has an empty path');
  return segments.join('/');
}

function isRoot(raw: string): boolean {
  return raw.split('/').every((segment) => segment === '' || segment === '.') && !raw.startsWith('/');
}

async function assertEmptyOrAbsent(dir: string): Promise<void> {
  try {
    const names = await readdir(dir);
    if (names.length > 0) throw new Error(`${dir} is not empty: pull into a new or empty directory`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') throw new Error(`${dir} is not a directory`);
    throw error;
  }
}
