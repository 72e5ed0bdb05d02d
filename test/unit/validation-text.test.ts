import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError } from '../../src/errors.js';
import {
  checkHookCommands, checkModel, checkOptionalText, checkPrompt, checkSessionId, checkToolNames, checkWebhookUrl,
} from '../../src/core/validation/text.js';
import { refused } from './support/refused.js';

describe('prompt', () => {
  const allowed = ['hello', 'line one\nline two\r\n\ttabbed', 'émoji 🚀 and 中文', ' padded ', '\u200b zero width', 'x'.repeat(100)];
  for (const prompt of allowed) it(`allows ${JSON.stringify(prompt.slice(0, 30))}`, () => assert.equal(checkPrompt(prompt, 100), prompt));

  it('allows exactly the byte limit', () => assert.equal(checkPrompt('é'.repeat(50), 100), 'é'.repeat(50)));
  it('counts UTF-8 bytes, not characters: 51 × é is 102 bytes → 413', () => {
    assert.throws(() => checkPrompt('é'.repeat(51), 100),
      (error: unknown) => error instanceof BerthError && error.status === 413 && error.code === 'BERTH_ERR_REQUEST_TOO_LARGE'
        && error.message === 'prompt: is 102 bytes of UTF-8, over the limit of 100 bytes (SERVICE_MAX_PROMPT_BYTES)');
  });
  it('checks the size before the characters', () => assert.throws(() => checkPrompt('\u0000'.repeat(101), 100), refused(/over the limit/, 413)));

  const rejected: [string | undefined, RegExp][] = [
    [undefined, /^prompt: is required and must not be empty$/],
    ['', /is required and must not be empty/],
    ['  \n\t ', /is required and must not be empty/],
    ['a\u0000b', /^prompt: contains the control character U\+0000; only tab, newline and carriage return are allowed$/],
    ['a\u0001', /U\+0001/], ['a\u0008', /U\+0008/], ['a\u000b', /U\+000B/], ['a\u000c', /U\+000C/], ['a\u001b[31m', /U\+001B/],
    ['a\u001f', /U\+001F/], ['a\u007f', /U\+007F/], ['a\u0080', /U\+0080/], ['a\u009b', /U\+009B/], ['a\u009f', /U\+009F/],
    ['a\uD800', /^prompt: is not valid UTF-8/], ['\uDFFFa', /not valid UTF-8/], ['a\uDC00\uD800', /not valid UTF-8/],
  ];
  for (const [prompt, pattern] of rejected) {
    it(`refuses ${JSON.stringify(prompt)}`, () => assert.throws(() => checkPrompt(prompt, 100), refused(pattern)));
  }
  it('allows a proper surrogate pair', () => assert.equal(checkPrompt('\uD83D\uDE80', 100), '🚀'));
  it('allows U+00A0 (the first character after C1)', () => assert.equal(checkPrompt('a\u00a0b', 100), 'a\u00a0b'));
});

describe('system_prompt and append_system_prompt', () => {
  it('allows an absent value', () => assert.equal(checkOptionalText(undefined, 'engine.system_prompt', 10), undefined));
  it('allows an empty value', () => assert.equal(checkOptionalText('', 'engine.system_prompt', 10), ''));
  it('allows newlines', () => assert.equal(checkOptionalText('a\nb', 'engine.system_prompt', 10), 'a\nb'));
  it('refuses control characters, naming the field', () => {
    assert.throws(() => checkOptionalText('a\u0007', 'engine.append_system_prompt', 10), refused(/^engine\.append_system_prompt: contains the control character U\+0007/));
  });
  it('refuses over the size limit with 413', () => {
    assert.throws(() => checkOptionalText('x'.repeat(11), 'engine.system_prompt', 10), refused(/^engine\.system_prompt: is 11 bytes/, 413));
  });
});

describe('tool names', () => {
  const allowed = ['Bash', 'Read', 'Bash(git:*)', 'Bash(npm run test:*)', 'Bash(git diff *)', 'Read(~/src/**)', 'Edit(/srv/app/**)',
    'mcp__github__get_issue', 'WebFetch(domain:example.com)', 'Bash(a, b)', 'Write(./x=y+z@w)', '_private', 'NotebookEdit'];
  for (const name of allowed) it(`allows ${name}`, () => assert.deepEqual(checkToolNames([name], 'engine.allowed_tools'), [name]));

  const rejected: [string, RegExp][] = [
    ['', /is not a tool name/], ['-x', /is not a tool name/], ['--dangerously-skip-permissions', /is not a tool name/], ['1Bash', /is not a tool name/],
    [' Bash', /is not a tool name/], ['Bash;rm', /is not a tool name/], ['Bash($(id))', /is not a tool name/], ['Bash(`id`)', /is not a tool name/],
    ['Bash("x")', /is not a tool name/], ['Bash|x', /is not a tool name/], ['Bash\nRead', /control character U\+000A/], ['Bash\t', /control character U\+0009/],
    ['Bash\u0000', /U\+0000/], ['Bäsh', /is not a tool name/], ['B'.repeat(513), /longer than 512/],
  ];
  for (const [name, pattern] of rejected) {
    it(`refuses ${JSON.stringify(name.slice(0, 40))}`, () => {
      assert.throws(() => checkToolNames(['Read', name], 'engine.disallowed_tools'), refused(new RegExp(`^engine\\.disallowed_tools\\[1\\]: .*${pattern.source}`)));
    });
  }
  it('allows an absent list', () => assert.equal(checkToolNames(undefined, 'engine.allowed_tools'), undefined));
});

describe('model', () => {
  const allowed = ['sonnet', 'opus', 'haiku', 'claude-sonnet-4-5', 'claude-sonnet-4-5[1m]', 'claude-3-5-sonnet@20241022',
    'us.anthropic.claude-sonnet-4-5-20250929-v1:0', 'arn:aws:bedrock:us-east-1:123:inference-profile/x', 'a'.repeat(200), 'x_y.z'];
  for (const model of allowed) it(`allows ${model.slice(0, 50)}`, () => assert.equal(checkModel(model), model));
  const rejected: [string, RegExp][] = [
    ['', /1 to 200 characters/], ['a'.repeat(201), /1 to 200 characters/], ['-sonnet', /must not start with -/], ['son net', /may contain only/],
    ['sonnet;id', /may contain only/], ['sonnet$', /may contain only/], ['sönnet', /may contain only/], ['sonnet\n', /control character/],
    ['sonnet\u0000', /control character/],
  ];
  for (const [model, pattern] of rejected) {
    it(`refuses ${JSON.stringify(model.slice(0, 30))}`, () => assert.throws(() => checkModel(model), refused(new RegExp(`^engine\\.model: .*${pattern.source}`))));
  }
});

describe('session_id', () => {
  const allowed: [string, string][] = [
    ['123e4567-e89b-12d3-a456-426614174000', '123e4567-e89b-12d3-a456-426614174000'],
    ['123E4567-E89B-12D3-A456-426614174000', '123e4567-e89b-12d3-a456-426614174000'],
    ['00000000-0000-0000-0000-000000000000', '00000000-0000-0000-0000-000000000000'],
    ['01890a5d-ac96-774b-bcce-b302099a8057', '01890a5d-ac96-774b-bcce-b302099a8057'],
  ];
  for (const [id, expected] of allowed) it(`allows ${id}`, () => assert.equal(checkSessionId(id), expected));
  const rejected = ['', 'abc', '123e4567e89b12d3a456426614174000', '{123e4567-e89b-12d3-a456-426614174000}', '123e4567-e89b-12d3-a456-42661417400',
    '123e4567-e89b-12d3-a456-4266141740000', '123e4567-e89b-12d3-a456-42661417400g', ' 123e4567-e89b-12d3-a456-426614174000',
    '../../etc/passwd', '123e4567-e89b-12d3-a456-426614174000\n'];
  for (const id of rejected) {
    it(`refuses ${JSON.stringify(id)}`, () => assert.throws(() => checkSessionId(id), refused(/^engine\.session_id: /)));
  }
});

describe('webhook_url', () => {
  const allowed = ['https://example.com/hook', 'http://127.0.0.1:8080/x?y=1#z', 'https://hooks.example.com:8443/a/b', 'https://[::1]/x'];
  for (const url of allowed) it(`allows ${url}`, () => assert.equal(checkWebhookUrl(url), url));
  const rejected: [string, RegExp][] = [
    ['ftp://example.com/x', /scheme "ftp" is not allowed/], ['file:///etc/passwd', /scheme "file"/], ['javascript:alert(1)', /scheme "javascript"/],
    ['https://user:pass@example.com/', /must not contain a user name or password/], ['https://user@example.com/', /user name or password/],
    ['example.com/hook', /is not a valid absolute URL/], ['/hook', /not a valid absolute URL/], ['', /not a valid absolute URL/],
    ['https://exa mple.com', /whitespace/], [' https://example.com', /whitespace/], ['https://example.com/\tx', /control character U\+0009/],
    ['https://example.com/\nx', /control character/], [`https://example.com/${'x'.repeat(2030)}`, /longer than 2048/], ['http://', /not a valid absolute URL/],
  ];
  for (const [url, pattern] of rejected) {
    it(`refuses ${JSON.stringify(url.slice(0, 40))}`, () => assert.throws(() => checkWebhookUrl(url), refused(new RegExp(`^webhook_url: .*${pattern.source}`))));
  }
  it('allows exactly 2048 characters', () => {
    const url = `https://example.com/${'x'.repeat(2048 - 20)}`;
    assert.equal(checkWebhookUrl(url), url);
  });
});

describe('lifecycle commands', () => {
  it('allows commands with quotes and operators', () => {
    const commands = ['apt-get update && apt-get install -y git', "echo 'hi' > /tmp/x", 'x'.repeat(4096)];
    assert.deepEqual(checkHookCommands(commands, 'container.lifecycle.post_start'), commands);
  });
  it('allows 64 commands', () => assert.equal(checkHookCommands(Array(64).fill('true'), 'f').length, 64));
  const rejected: [string[], RegExp][] = [
    [Array(65).fill('true'), /^f: has 65 commands; at most 64 are allowed$/],
    [['true', ''], /^f\[1\]: is empty$/],
    [['  '], /^f\[0\]: is empty$/],
    [['x'.repeat(4097)], /^f\[0\]: is longer than 4096 bytes$/],
    [['é'.repeat(2049)], /longer than 4096 bytes/],
    [['echo a\u0000'], /^f\[0\]: contains the control character U\+0000$/],
    [['echo a\necho b'], /U\+000A/],
    [['echo\ta'], /U\+0009/],
    [['echo \uD800'], /not valid UTF-8/],
  ];
  for (const [commands, pattern] of rejected) {
    it(`refuses ${JSON.stringify(commands[commands.length - 1]!.slice(0, 20))} (${commands.length})`, () => assert.throws(() => checkHookCommands(commands, 'f'), refused(pattern)));
  }
});
