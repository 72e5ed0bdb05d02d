// Following persistent agents from tests: their SSE event stream collected as frames, and polling for a status.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestBerth } from './berth.js';
import { messagesIn, readSse } from './sse.js';

export interface Frame {
  readonly event: string;
  readonly data: any;
  /** The frame's `id:` line (its id in the event log), when it has one. */
  readonly id?: number;
}

/** Follows an agent's event stream, collecting frames until it ends or `until` is satisfied. */
export function follow(url: string, until: (frames: Frame[]) => boolean = () => false, headers: Record<string, string> = {}) {
  const frames: Frame[] = [];
  const controller = new AbortController();
  const ready = fetch(url, { signal: controller.signal, headers });
  const done = (async () => {
    const response = await ready;
    assert.equal(response.status, 200);
    try {
      for await (const pieces of readSse(response)) {
        for (const { event, data, id } of messagesIn(pieces)) {
          if (event !== undefined) frames.push({ event, data: JSON.parse(data), ...(id !== undefined ? { id: Number(id) } : {}) });
        }
        if (until(frames)) {
          controller.abort();
          return frames;
        }
      }
      return frames;
    } catch (error) {
      if (controller.signal.aborted) return frames;
      throw error;
    }
  })();
  return { frames, done, ready, stop: () => controller.abort() };
}

export const types = (frames: Frame[]) => frames.map((f) => f.event);
export const turnEnded = (turnId: string) => (frames: Frame[]) => frames.some((f) => (f.event === 'turn_end' || f.event === 'error') && f.data.turn_id === turnId);

export async function waitForStatus(t: TestBerth, id: string, status: string, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await t.request('GET', `/agents/${id}`);
    if (body.status === status) return body;
    if (Date.now() > deadline) assert.fail(`agent ${id} is ${body.status}, not ${status}`);
    await delay(50);
  }
}
