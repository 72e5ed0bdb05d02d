// File operations on session directories that the store needs beyond mkdir and rm.
import { cp, lchown, lstat, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { UUID_PATTERN } from './session-id.js';

/** Removes transcripts (and their side directories) of session ids other than this one. */
// The tree was written from inside a container: a `projects` or project directory may be a link to a host
// directory, which must never be listed or emptied. rm itself removes links, never their targets.
export async function removeForeignTranscripts(dir: string, sessionId: string): Promise<void> {
  const projects = join(dir, 'projects');
  if (!(await isRealDirectory(projects))) return;
  for (const project of await readdir(projects).catch(() => [] as string[])) {
    if (!(await isRealDirectory(join(projects, project)))) continue;
    for (const name of await readdir(join(projects, project)).catch(() => [] as string[])) {
      const id = name.endsWith('.jsonl') ? name.slice(0, -'.jsonl'.length) : name;
      if (UUID_PATTERN.test(id) && id !== sessionId) await rm(join(projects, project, name), { recursive: true, force: true });
    }
  }
}

/**
 * Copies a session directory. The engine in the container wrote its files as the image's user with modes
 * such as 0600; a copy made by root would be root's and unreadable to that user, so when Berth runs as
 * root each copied entry gets its original's owner back.
 */
export async function copyTree(from: string, to: string): Promise<void> {
  await cp(from, to, { recursive: true, errorOnExist: true, force: false, preserveTimestamps: true });
  if (process.getuid?.() !== 0) return;
  const walk = async (relative: string): Promise<void> => {
    const info = await lstat(join(from, relative));
    await lchown(join(to, relative), info.uid, info.gid);
    if (info.isDirectory()) for (const name of await readdir(join(from, relative))) await walk(join(relative, name));
  };
  await walk('.');
}

async function isRealDirectory(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => undefined))?.isDirectory() ?? false;
}

export async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

export async function pathExists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}
