// Reads the engine's session transcripts: $CLAUDE_CONFIG_DIR/projects/<project>/<session id>.jsonl.
// The session directory is writable from inside the container, so code run by a prompt can plant symlinks
// there (`projects/x/<id>.jsonl -> /etc/shadow`). Berth runs as root on the host: it must never follow
// them. Transcripts are listed without following any link and opened with O_NOFOLLOW, and the opened file
// must be exactly the listed one (checked through /proc/self/fd), so a link swapped in meanwhile is refused.
import { constants } from 'node:fs';
import { lstat, open, readdir, readlink, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { toTokenUsage, type TokenUsage } from './stream-json.js';

export type TranscriptRecord = Record<string, unknown> & { type?: string };

/** Every transcript file of a session in its config directory (normally one, under the workdir it was created in). */
export async function transcriptFiles(configDir: string, sessionId: string): Promise<string[]> {
  const projects = join(configDir, 'projects');
  if (!(await isRealEntry(projects, 'directory'))) return [];
  const files: string[] = [];
  for (const project of await readdir(projects).catch(() => [] as string[])) {
    const candidate = join(projects, project, `${sessionId}.jsonl`);
    if ((await isRealEntry(join(projects, project), 'directory')) && (await isRealEntry(candidate, 'file'))) {
      files.push(await realpath(candidate));
    }
  }
  return files;
}

/** A directory or regular file that is not a symlink (lstat never follows one). */
async function isRealEntry(path: string, kind: 'directory' | 'file'): Promise<boolean> {
  const info = await lstat(path).catch(() => undefined);
  return info !== undefined && (kind === 'directory' ? info.isDirectory() : info.isFile());
}

/** Reads a file listed by transcriptFiles, refusing anything that is not that very file now. */
async function readListedFile(file: string): Promise<string> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const opened = await readlink(`/proc/self/fd/${handle.fd}`);
    if (opened !== file || !(await handle.stat()).isFile()) {
      throw new Error(`transcript ${file} was replaced by a link to ${opened}; not reading it`);
    }
    return await handle.readFile('utf8');
  } finally {
    await handle.close();
  }
}

/** The records of one transcript file, in file order; a line cut off by a crash is skipped. */
export async function readTranscriptFile(file: string): Promise<TranscriptRecord[]> {
  const records: TranscriptRecord[] = [];
  for (const line of (await readListedFile(file)).split('\n')) {
    if (line.trim() === '') continue;
    try {
      const record: unknown = JSON.parse(line);
      if (record !== null && typeof record === 'object' && !Array.isArray(record)) records.push(record as TranscriptRecord);
    } catch {
      // A line cut off by a crash; the rest of the transcript is still good.
    }
  }
  return records;
}

/**
 * Every record of a session, in conversation order. The engine appends to one file per session (a resume
 * from another workdir appends to the existing file), so there is normally one; should there be several,
 * they are ordered by the time of their first record.
 */
export async function readTranscript(configDir: string, sessionId: string): Promise<TranscriptRecord[]> {
  const files = await Promise.all((await transcriptFiles(configDir, sessionId)).map((file) => readTranscriptFile(file)));
  if (files.length > 1) files.sort((a, b) => firstTimestamp(a).localeCompare(firstTimestamp(b)));
  return files.flat();
}

function firstTimestamp(records: readonly TranscriptRecord[]): string {
  for (const record of records) if (typeof record.timestamp === 'string') return record.timestamp;
  return '';
}

/** The session's title: the last `custom-title` record's text (the engine re-appends it on resume), '' when none. */
export function sessionTitle(records: readonly TranscriptRecord[]): string {
  let title = '';
  for (const record of records) {
    if (record.type === 'custom-title' && typeof record.customTitle === 'string') title = record.customTitle;
  }
  return title;
}

/**
 * Sums usage over the session's assistant messages. The engine writes one record per content block,
 * each repeating its message's usage, so records are de-duplicated by message id.
 */
export function cumulativeUsage(records: readonly TranscriptRecord[]): { usage: TokenUsage; model: string | undefined } | undefined {
  const seen = new Set<string>();
  const total: TokenUsage = { input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 };
  let model: string | undefined;
  let any = false;
  for (const record of records) {
    if (record.type !== 'assistant') continue;
    const message = record.message as { id?: string; usage?: unknown; model?: string } | undefined;
    if (!message?.usage) continue;
    const key = message.id ?? String(record.uuid);
    if (seen.has(key)) continue;
    seen.add(key);
    const usage = toTokenUsage(message.usage);
    if (!usage) continue;
    any = true;
    model = message.model ?? model;
    total.input_tokens += usage.input_tokens;
    total.output_tokens += usage.output_tokens;
    total.cache_creation_input_tokens += usage.cache_creation_input_tokens;
    total.cache_read_input_tokens += usage.cache_read_input_tokens;
  }
  return any ? { usage: total, model } : undefined;
}
