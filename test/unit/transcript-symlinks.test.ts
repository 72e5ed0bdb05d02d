// The session directory is writable by code in the container: links planted there must never make Berth
// (root on the host) read or write a host file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readTranscript, transcriptFiles } from '../../src/engine/transcript.js';
import { SessionStore } from '../../src/core/sessions/session-store.js';

const ID = '0f3a9767-ed7f-4e3d-8a0f-e662c36dce6d';
const RECORD = JSON.stringify({ type: 'user', message: { role: 'user', content: 'host secret' }, uuid: 'u1' });

function tree() {
  const root = mkdtempSync(join(tmpdir(), 'berth-links-'));
  const outside = join(root, 'outside');
  mkdirSync(join(outside, 'proj'), { recursive: true });
  writeFileSync(join(outside, 'secret.jsonl'), `${RECORD}\n`);
  writeFileSync(join(outside, 'proj', `${ID}.jsonl`), `${RECORD}\n`);
  const session = join(root, 'sessions', ID);
  mkdirSync(session, { recursive: true });
  return { root, outside, session };
}

test('a transcript that is a symlink to a host file is not read', async () => {
  const { root, outside, session } = tree();
  try {
    mkdirSync(join(session, 'projects', '-workspace'), { recursive: true });
    symlinkSync(join(outside, 'secret.jsonl'), join(session, 'projects', '-workspace', `${ID}.jsonl`));
    assert.deepEqual(await transcriptFiles(session, ID), []);
    assert.deepEqual(await readTranscript(session, ID), []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('a projects directory (or project directory) that links out of the session is not followed', async () => {
  const { root, outside, session } = tree();
  try {
    symlinkSync(outside, join(session, 'projects'));
    assert.deepEqual(await readTranscript(session, ID), []);
    rmSync(join(session, 'projects'));
    mkdirSync(join(session, 'projects'));
    symlinkSync(join(outside, 'proj'), join(session, 'projects', '-workspace'));
    assert.deepEqual(await readTranscript(session, ID), []);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('a real transcript is read', async () => {
  const { root, session } = tree();
  try {
    mkdirSync(join(session, 'projects', '-workspace'), { recursive: true });
    writeFileSync(join(session, 'projects', '-workspace', `${ID}.jsonl`), `${RECORD}\n`);
    assert.equal((await readTranscript(session, ID)).length, 1);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('marking a session hidden does not write through a planted link', async () => {
  const { root, outside, session } = tree();
  try {
    symlinkSync(join(outside, 'secret.jsonl'), join(session, '.berth-agent'));
    const store = new SessionStore(join(root, 'sessions'), join(root, 'sessions'), { transcriptLimitBytes: 1024 * 1024 });
    await assert.rejects(store.hide(ID), /ELOOP|symbolic link/);
    assert.equal(readFileSync(join(outside, 'secret.jsonl'), 'utf8'), `${RECORD}\n`);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
