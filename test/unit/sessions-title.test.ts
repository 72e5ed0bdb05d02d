// Session titles: derived from the first prompt, handed to the engine by a UserPromptSubmit hook that
// only needs /bin/sh, and read back from the engine's custom-title records.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { deriveSessionTitle, TITLE_FILE_NAME, TITLE_HOOK_SETTINGS, TITLE_MAX_CHARS, titleHookOutput } from '../../src/engine/session-title.js';
import { sessionTitle } from '../../src/engine/transcript.js';
import { buildEngineInvocation, type EngineSession } from '../../src/engine/command.js';
import { INPUT_DIR } from '../../src/engine/layout.js';

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

describe('the title hook', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-title-hook-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const hookCommand = (JSON.parse(TITLE_HOOK_SETTINGS) as { hooks: { UserPromptSubmit: [{ hooks: [{ command: string }] }] } }).hooks.UserPromptSubmit[0].hooks[0]
    .command;

  it('is a UserPromptSubmit command hook reading the uploaded title file', () => {
    assert.ok(hookCommand.includes(`${INPUT_DIR}/${TITLE_FILE_NAME}`));
  });

  const awkward = ['plain', 'quotes " and \' and `backticks` $HOME $(id)', 'back\\slash \\n %s %d', 'ünïcødé ✓ 😀 中文'];
  for (const title of awkward) {
    it(`prints the engine's hook answer for ${JSON.stringify(title)} with /bin/sh builtins only`, () => {
      writeFileSync(join(dir, TITLE_FILE_NAME), titleHookOutput(title));
      const output = execFileSync('/bin/sh', ['-c', hookCommand.replaceAll(INPUT_DIR, dir)], { env: { PATH: '' }, stdio: ['ignore', 'pipe', 'pipe'] }).toString();
      assert.deepEqual(JSON.parse(output), { hookSpecificOutput: { hookEventName: 'UserPromptSubmit', sessionTitle: title } });
    });
  }

  it('answers on one line', () => {
    assert.equal(titleHookOutput('a\u2028b').split('\n').length, 2);
  });
});

describe('installing the hook', () => {
  const engine = {};
  const invoke = (session: EngineSession, prompt = 'Fix the login bug') =>
    buildEngineInvocation({ engine, session, prompt, modelBaseUrl: 'http://model', offlineModel: true, engineBinary: '/opt/claude/claude' });
  const id = '11111111-1111-4111-8111-111111111111';

  it('happens for a new session, with the title as an input file', () => {
    const invocation = invoke({ kind: 'new', sessionId: id });
    const args = invocation.command.slice(4);
    assert.equal(args[args.indexOf('--settings') + 1], TITLE_HOOK_SETTINGS);
    assert.equal(invocation.inputFiles[TITLE_FILE_NAME], titleHookOutput('Fix the login bug'));
  });

  for (const session of [
    { kind: 'resume', sessionId: id },
    { kind: 'fork', fromSessionId: id, sessionId: '22222222-1111-4111-8111-111111111111' },
    { kind: 'ephemeral', sessionId: id },
  ] as const) {
    it(`does not happen for a ${session.kind} run`, () => {
      const invocation = invoke(session);
      assert.ok(!invocation.command.includes('--settings'));
      assert.equal(invocation.inputFiles[TITLE_FILE_NAME], undefined);
    });
  }

  it('does not happen when the prompt has no text', () => {
    assert.ok(!invoke({ kind: 'new', sessionId: id }, '   ').command.includes('--settings'));
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
