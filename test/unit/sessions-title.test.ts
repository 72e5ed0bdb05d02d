// Session titles: derived from the first prompt, recorded by Berth in the transcript as the engine's own
// custom-title record (no hook in the engine), and read back from the last such record.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deriveSessionTitle, TITLE_MAX_CHARS, titleRecord, withTitle } from '../../src/engine/session-title.js';
import { sessionTitle, type TranscriptRecord } from '../../src/engine/transcript.js';
import { buildEngineInvocation, type EngineSession } from '../../src/engine/command.js';

describe('deriving a title from the first prompt', () => {
  it('takes the first line that has text', () => {
    assert.equal(deriveSessionTitle('\n   \nFix the login bug\nrun: npm test'), 'Fix the login bug');
  });

  it('collapses whitespace and drops control characters', () => {
    assert.equal(deriveSessionTitle('  Fix\tthe \u0007 login   bug  '), 'Fix the login bug');
  });

  it('cuts a long line at a word boundary with an ellipsis', () => {
    const title = deriveSessionTitle('Please fix the flaky login test in the payments service before Friday afternoon');
    assert.equal(title, 'Please fix the flaky login test in the payments service…');
    assert.ok([...title!].length <= TITLE_MAX_CHARS);
  });

  it('cuts one very long word inside it', () => {
    const title = deriveSessionTitle('x'.repeat(200))!;
    assert.equal([...title].length, TITLE_MAX_CHARS);
    assert.ok(title.endsWith('…'));
  });

  it('counts characters, not UTF-16 units', () => {
    const emoji = '😀'.repeat(TITLE_MAX_CHARS);
    assert.equal(deriveSessionTitle(emoji), emoji);
  });

  it('gives no title for a prompt without text', () => {
    assert.equal(deriveSessionTitle(' \n\t\n'), undefined);
    assert.equal(deriveSessionTitle(''), undefined);
  });
});

describe('the title record Berth writes into a new session\'s transcript', () => {
  const id = '11111111-1111-4111-8111-111111111111';
  const conversation = Buffer.from('{"type":"user","message":{"role":"user","content":"x"}}\n');

  const awkward = ['plain', 'quotes " and \' and `backticks` $HOME $(id)', 'back\\slash \\n %s %d', 'ünïcødé ✓ 😀 中文', 'line\u2028separator'];
  for (const title of awkward) {
    it(`is the engine's custom-title record, one line, read back as ${JSON.stringify(title)}`, () => {
      const titled = withTitle(conversation, title, id).toString('utf8');
      const lines = titled.trimEnd().split('\n');
      assert.equal(lines.length, 2);
      assert.deepEqual(JSON.parse(lines[1]!), { type: 'custom-title', customTitle: title, sessionId: id });
      assert.equal(sessionTitle(lines.map((line) => JSON.parse(line) as TranscriptRecord)), title);
    });
  }

  it('is appended on a line of its own after a last line the engine did not finish', () => {
    const titled = withTitle(Buffer.from('{"type":"user"}\n{"type":"assis'), 'T', id).toString('utf8');
    assert.equal(titled, `{"type":"user"}\n{"type":"assis\n${titleRecord('T', id)}`);
  });

  it('is not added when the transcript has a title record already (the engine\'s own is kept)', () => {
    const own = Buffer.from(`${titleRecord('renamed', id)}{"type":"user"}\n`);
    assert.equal(withTitle(own, 'from the prompt', id), own);
  });

  it('is added when "custom-title" appears only inside a message', () => {
    const mention = Buffer.from('{"type":"user","message":{"role":"user","content":"what is a \\"custom-title\\" record?"}}\n');
    assert.equal(withTitle(mention, 'T', id).toString('utf8'), `${mention.toString('utf8')}${titleRecord('T', id)}`);
  });
});

describe('the engine command', () => {
  const engine = {};
  const invoke = (session: EngineSession, options: { readonly pooled?: boolean } = {}) =>
    buildEngineInvocation({ engine, session, prompt: 'Fix the login bug', modelBaseUrl: 'http://model', offlineModel: true, engineBinary: '/opt/claude/claude', ...options });
  const id = '11111111-1111-4111-8111-111111111111';

  for (const session of [
    { kind: 'new', sessionId: id },
    { kind: 'resume', sessionId: id },
    { kind: 'fork', fromSessionId: id, sessionId: '22222222-1111-4111-8111-111111111111' },
    { kind: 'ephemeral', sessionId: id },
  ] as const) {
    it(`installs no hook for a ${session.kind} run: the title costs the engine nothing`, () => {
      const invocation = invoke(session);
      assert.ok(!invocation.command.includes('--settings'));
      assert.deepEqual(Object.keys(invocation.inputFiles), ['prompt']);
    });
  }

  it('installs no hook in a pooled engine', () => {
    assert.ok(!invoke({ kind: 'new', sessionId: id }, { pooled: true }).command.includes('--settings'));
  });
});

describe('reading the title back', () => {
  it('is the last custom-title record', () => {
    const records = [
      { type: 'custom-title', customTitle: 'first' },
      { type: 'user', message: { role: 'user', content: 'x' } },
      { type: 'custom-title', customTitle: 'renamed' },
    ];
    assert.equal(sessionTitle(records), 'renamed');
  });

  it('is empty without one', () => {
    assert.equal(sessionTitle([{ type: 'user' }, { type: 'custom-title' }]), '');
  });
});
