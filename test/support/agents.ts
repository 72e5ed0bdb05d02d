// Following persistent agents from tests: their SSE event stream collected as frames, and polling for a status.
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestBerth } from './berth.js';

export interface Frame {
  readonly event: string;
  readonly data: any;
}

/** Follows an agent's event stream, collecting frames until it ends or `until` is satisfied. */
export function follow(url: string, until: (frames: Frame[]) => boolean = () => false, headers: Record<string, string> = {}) {
  const frames: Frame[] = [];
  const controller = new AbortController();
  const ready = fetch(url, { signal: controller.signal, headers });
  const done = (async () => {
    const response = await ready;
    assert.equal(response.status, 200);
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    try {
      for (;;) {
        const { value, done: ended } = await reader.read();
        if (ended) return frames;
        buffer += value;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event !== undefined && data !== undefined) frames.push({ event, data: JSON.parse(data) });
        }
        if (until(frames)) {
          controller.abort();
          return frames;
        }
      }
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
