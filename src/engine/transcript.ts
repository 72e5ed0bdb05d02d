// Reads the engine's session transcripts: $CLAUDE_CONFIG_DIR/projects/<project>/<session id>.jsonl.
import { access, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { toTokenUsage, type TokenUsage } from './stream-json.js';

export type TranscriptRecord = Record<string, unknown> & { type?: string };

/** Every transcript file of a session directory for that session id (one per workdir it ran in). */
export async function transcriptFiles(configDir: string, sessionId: string): Promise<string[]> {
  const projects = join(configDir, 'projects');
  let entries: string[];
  try {
    entries = await readdir(projects);
  } catch {
    return [];
  }
  const files: string[] = [];
  for (const project of entries) {
    const candidate = join(projects, project, `${sessionId}.jsonl`);
    try {
      await access(candidate);
      files.push(candidate);
    } catch {
      // This project directory has no transcript of the session.
    }
  }
  return files;
}

export async function readTranscript(configDir: string, sessionId: string): Promise<TranscriptRecord[]> {
  const records: TranscriptRecord[] = [];
  for (const file of await transcriptFiles(configDir, sessionId)) {
    for (const line of (await readFile(file, 'utf8')).split('\n')) {
      if (line.trim() === '') continue;
      try {
        records.push(JSON.parse(line) as TranscriptRecord);
      } catch {
        // A line cut off by a crash; the rest of the transcript is still good.
      }
    }
  }
  return records;
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
