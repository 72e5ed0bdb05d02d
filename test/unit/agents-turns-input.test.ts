// The turns FIFO of a persistent agent: written from the event loop, never from libuv's thread pool, and
// within a bound (core/containers/turns-input.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { openTurnsInput, TurnNotTaken, writeWithin } from '../../src/core/containers/turns-input.js';

async function fifoIn(dir: string, name: string): Promise<string> {
  const path = join(dir, name);
  await promisify(execFile)('mkfifo', ['-m', '0600', path]);
  return path;
}

async function withDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-turns-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('a turn larger than the pipe reaches a reader whole, and the write resolves once it has it', () =>
  withDir(async (dir) => {
    const path = await fifoIn(dir, 'turns');
    const turns = await openTurnsInput(path);
    const line = `${'x'.repeat(300 * 1024)}\n`;
    const reader = spawn('head', ['-c', String(line.length), path]);
    const chunks: Buffer[] = [];
    reader.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    const exited = new Promise((resolve) => reader.on('close', resolve));
    await writeWithin(turns, line, 10_000);
    await exited;
    turns.destroy();
    assert.equal(Buffer.concat(chunks).toString(), line);
  }));

test('eight turns nobody reads hold none of the thread pool, and each ends with TurnNotTaken after the bound', () =>
  withDir(async (dir) => {
    const inputs = await Promise.all(Array.from({ length: 8 }, async (_, i) => openTurnsInput(await fifoIn(dir, `turns-${i}`))));
    try {
      const started = Date.now();
      const writes = inputs.map((turns) => writeWithin(turns, 'y'.repeat(300 * 1024), 1_500).then(() => 'written', (error: unknown) => error));
      // File reads run on the same 4 threads a blocking FIFO write would hold.
      const reads = Promise.all(Array.from({ length: 8 }, () => readFile(new URL(import.meta.url), 'utf8')));
      // An order, not a duration: the reads answer before any of the writes has given up (at its 1.5 s bound).
      const first = await Promise.race([reads.then(() => 'reads'), Promise.race(writes).then(() => 'a write ended')]);
      assert.equal(first, 'reads', 'file reads answer while the turns wait');
      const outcomes = await Promise.all(writes);
      for (const outcome of outcomes) {
        assert.ok(outcome instanceof TurnNotTaken, String(outcome));
        assert.equal(outcome.timeoutMs, 1_500);
      }
      assert.ok(Date.now() - started < 5_000);
    } finally {
      for (const turns of inputs) turns.destroy();
    }
  }));

test('a write to a destroyed input fails at once', () =>
  withDir(async (dir) => {
    const turns = await openTurnsInput(await fifoIn(dir, 'turns'));
    turns.destroy();
    await assert.rejects(writeWithin(turns, 'z\n', 5_000), (error: Error) => !(error instanceof TurnNotTaken));
  }));

test('only a FIFO is opened: a regular file and a link are refused', () =>
  withDir(async (dir) => {
    const file = join(dir, 'file');
    await writeFile(file, '');
    await assert.rejects(openTurnsInput(file), /is not a FIFO/);
    const fifo = await fifoIn(dir, 'turns');
    await symlink(fifo, join(dir, 'link'));
    await assert.rejects(openTurnsInput(join(dir, 'link')), /ELOOP/);
  }));
