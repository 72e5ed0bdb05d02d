// Reads the engine's session transcripts: <config dir>/projects/<project>/<session id>.jsonl.
// Transcripts are written by the engine inside a container, in a directory it can fill with anything
// (links to host files, FIFOs, huge files), and Berth reads them as root. So a transcript is listed without
// following any link, opened with O_NOFOLLOW and O_NONBLOCK (a FIFO must not block a thread of the pool),
// accepted only when fstat says regular file and /proc/self/fd says it is the very path that was listed
// (no component swapped for a link meanwhile), and read up to a byte limit.
import { constants } from 'node:fs';
import { lstat, open, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { toTokenUsage, type TokenUsage } from './stream-json.js';

export type TranscriptRecord = Record<string, unknown> & { type?: string };

/** Transcripts larger than this are not read (nor carried between runs): the per-session storage cap. */
export const DEFAULT_TRANSCRIPT_LIMIT_BYTES = 64 * 1024 * 1024;

/** The engine names a project directory after its cwd with every non-alphanumeric character replaced by '-'. */
const PROJECT_NAME = /^[A-Za-z0-9-]{1,255}$/;

/**
 * Every transcript file of a session in a config directory (normally one, under the workdir it was created
 * in), as lexical paths below `configDir`, which must itself be a real (symlink-free) path.
 */
export async function transcriptFiles(configDir: string, sessionId: string): Promise<string[]> {
  const projects = join(configDir, 'projects');
  if (!(await isRealEntry(projects, 'directory'))) return [];
  const files: string[] = [];
  for (const project of await readdir(projects).catch(() => [] as string[])) {
    if (!PROJECT_NAME.test(project)) continue;
    const candidate = join(projects, project, `${sessionId}.jsonl`);
    if ((await isRealEntry(join(projects, project), 'directory')) && (await isRealEntry(candidate, 'file'))) files.push(candidate);
  }
  return files.sort();
}

/** A directory or regular file that is not a symlink (lstat never follows one). */
async function isRealEntry(path: string, kind: 'directory' | 'file'): Promise<boolean> {
  const info = await lstat(path).catch(() => undefined);
  return info !== undefined && (kind === 'directory' ? info.isDirectory() : info.isFile());
}

/** A transcript that is not what was listed, or too large: not read. */
export class TranscriptRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TranscriptRefused';
  }
}

/** Reads a file listed by transcriptFiles, refusing anything that is not that very regular file now. */
export async function readListedFile(file: string, limitBytes = DEFAULT_TRANSCRIPT_LIMIT_BYTES): Promise<Buffer> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw new TranscriptRefused(`transcript ${file} is not a regular file; not reading it`);
    const opened = await readlink(`/proc/self/fd/${handle.fd}`);
    if (opened !== file) throw new TranscriptRefused(`transcript ${file} resolved to ${opened}; not reading it`);
    if (info.size > limitBytes) throw new TranscriptRefused(`transcript ${file} is ${info.size} bytes, over the ${limitBytes}-byte limit`);
    // Read at most limit + 1 bytes, whatever the file grows to meanwhile.
    const buffer = Buffer.alloc(Math.min(info.size, limitBytes) + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length === buffer.length) break;
    }
    if (length > limitBytes) throw new TranscriptRefused(`transcript ${file} grew over the ${limitBytes}-byte limit`);
    return buffer.subarray(0, length);
  } finally {
    await handle.close();
  }
}

/** The records of one transcript file, in file order; a line cut off by a crash is skipped. */
export async function readTranscriptFile(file: string): Promise<TranscriptRecord[]> {
  const records: TranscriptRecord[] = [];
  for (const line of (await readListedFile(file)).toString('utf8').split('\n')) {
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
