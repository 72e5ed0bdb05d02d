// How a Berth tool's outcome becomes an MCP tool result: a value as JSON text (and as structuredContent for
// clients that read it), and a refusal of Berth as a tool error carrying Berth's own error text, so the model
// reads `session … not found` exactly as an HTTP client would. Files travel as UTF-8 text or base64.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { BerthError, BerthNetworkError } from '@berth/client';

/** A tool's answer: a JSON object. */
export type ToolValue = Record<string, unknown>;

/**
 * Runs a tool's work and answers its MCP result. Berth's errors (and a Berth that cannot be reached) are
 * tool errors, which the model sees and can act on; anything else (a bug, an abort) is thrown, and the MCP
 * server answers it as the protocol prescribes.
 */
export async function toolResult(work: () => Promise<ToolValue>): Promise<CallToolResult> {
  try {
    const value = await work();
    return { content: [{ type: 'text', text: JSON.stringify(value, null, 2) }], structuredContent: value };
  } catch (error) {
    if (error instanceof BerthError) {
      return { isError: true, content: [{ type: 'text', text: error.error }], structuredContent: { error: error.error, status: error.status } };
    }
    if (error instanceof BerthNetworkError) {
      return { isError: true, content: [{ type: 'text', text: error.message }] };
    }
    throw error;
  }
}

/** A file's bytes as a tool gives them back: UTF-8 text when they are text, base64 otherwise. */
export interface FileContent {
  readonly encoding: 'utf8' | 'base64';
  readonly content: string;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

export function fileContent(bytes: Uint8Array): FileContent {
  if (!bytes.includes(0)) {
    try {
      return { encoding: 'utf8', content: strictUtf8.decode(bytes) };
    } catch {
      // Not UTF-8: base64 below.
    }
  }
  return { encoding: 'base64', content: Buffer.from(bytes).toString('base64') };
}

/** A tool's `content` argument as bytes. */
export function contentBytes(content: string, encoding: 'utf8' | 'base64'): Uint8Array {
  return encoding === 'base64' ? Buffer.from(content, 'base64') : Buffer.from(content, 'utf8');
}

/**
 * Reads at most `limit` bytes of a stream and cancels the rest; `truncated` says whether bytes were left.
 * A file larger than a tool answer should carry is cut, not held whole.
 */
export async function readAtMost(stream: ReadableStream<Uint8Array>, limit: number): Promise<{ bytes: Uint8Array; truncated: boolean }> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { bytes: Buffer.concat(chunks), truncated: false };
      const room = limit - size;
      if (value.byteLength > room) {
        chunks.push(value.subarray(0, room));
        return { bytes: Buffer.concat(chunks), truncated: true };
      }
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}
