// What the berth command prints from the server reaches a terminal with its control characters shown,
// never obeyed: the sanitizer itself (a property over any text) and each printing path the server's text
// takes (tables, records, lines, JSON, styled messages, transcripts, an agent's engine lines, error reports).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { terminalJson, visible } from '../../packages/cli/src/terminal-text.js';
import { Output, styled, type Sink } from '../../packages/cli/src/output.js';
import { renderEngineLine, TranscriptPrinter } from '../../packages/cli/src/transcript.js';
import { PullBar } from '../../packages/cli/src/pull-bar.js';

/** Every code point a terminal acts on: C0 but newline and tab, DEL, C1. */
function acted(text: string): string[] {
  return [...text].filter((c) => {
    const code = c.codePointAt(0)!;
    return (code < 0x20 && c !== '\n' && c !== '\t') || (code >= 0x7f && code <= 0x9f);
  });
}

// Text rich in what hostile output is made of: escape sequences, C1, CR, DEL, next to ordinary text.
const hostileText = fc
  .array(
    fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.integer({ min: 0, max: 0x9f }).map((code) => String.fromCharCode(code)),
      fc.constantFrom('\x1b]52;c;aGk=\x07', '\x1b]8;;https://evil.test\x1b\\link\x1b]8;;\x1b\\', '\x1b[2J\x1b[H', '\x9b31m', 'a\rb', '\r\n', '\x7f'),
    ),
  )
  .map((parts) => parts.join(''));

test('after visible() no control character is left but newline and tab', () => {
  fc.assert(
    fc.property(hostileText, (text) => {
      assert.deepEqual(acted(visible(text)), []);
    }),
    { numRuns: 2000 },
  );
});

test('visible() keeps every other character, newline and tab in place, and changes nothing twice', () => {
  fc.assert(
    fc.property(hostileText, (text) => {
      const shown = visible(text);
      assert.equal(visible(shown), shown);
      const ordinary = [...text.replace(/\r+\n/g, '\n')].filter((c) => acted(c).length === 0).join('');
      const kept = [...shown].filter((c) => acted(c).length === 0).join('');
      assert.ok(kept.length >= ordinary.length);
    }),
  );
  assert.equal(visible('tab\there\nnext line'), 'tab\there\nnext line');
  assert.equal(visible('naïve ✓ 日本'), 'naïve ✓ 日本');
});

test('control characters are shown in caret notation, DEL as ^?, C1 as \\u escapes; a Windows line end is a newline', () => {
  assert.equal(visible('\x1b]52;c;aGk=\x07'), '^[]52;c;aGk=^G');
  assert.equal(visible('\x1b]8;;https://evil.test\x1b\\x\x1b]8;;\x1b\\'), '^[]8;;https://evil.test^[\\x^[]8;;^[\\');
  assert.equal(visible('\x1b[1A\x1b[2K'), '^[[1A^[[2K');
  assert.equal(visible('safe\rFORGED'), 'safe^MFORGED');
  assert.equal(visible('line\r\nnext'), 'line\nnext');
  assert.equal(visible('\x00\x7f'), '^@^?');
  assert.equal(visible('\x9b2J\x9d0;title\x9c'), '\\u009b2J\\u009d0;title\\u009c');
});

test('terminalJson escapes DEL and C1 as well as C0, and still parses to the same value', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.string(), hostileText)), (pairs) => {
      const value = { items: pairs.map(([key, text]) => ({ key, text })) };
      const json = terminalJson(value);
      assert.deepEqual(acted(json.replace(/\n/g, '')), []);
      assert.deepEqual(JSON.parse(json), value);
    }),
  );
  assert.equal(terminalJson({ csi: '\x9b' }), '{\n  "csi": "\\u009b"\n}');
});

function sink(isTTY: boolean): Sink & { text: string } {
  const written = { text: '', isTTY, write: (text: string) => ((written.text += text), true) };
  return written;
}

const OSC52 = '\x1b]52;c;aGk=\x07';

test("Output's tables, records, lines and JSON show what the server sent", () => {
  for (const format of ['table', 'json'] as const) {
    const out = sink(false);
    const output = new Output(format, out);
    output.list({ raw: OSC52 }, [{ name: `img${OSC52}` }], [{ header: 'NAME', value: (row) => row.name }], 'none');
    output.record({ raw: `\x9b2J` }, [['error', `boom\x9b2J\rover`]]);
    output.line(`done${OSC52}`);
    output.json({ output: `x${OSC52}\x9b` });
    assert.deepEqual(acted(out.text.replace(/\n/g, '')), [], `${format}: ${JSON.stringify(out.text)}`);
  }
  const table = sink(false);
  new Output('table', table).record({}, [['error', `boom${OSC52}`]]);
  assert.equal(table.text, 'error:  boom^[]52;c;aGk=^G\n');
});

test('styled text on a terminal carries the style codes and nothing else', () => {
  const tty = sink(true);
  const previous = process.env.NO_COLOR;
  delete process.env.NO_COLOR;
  try {
    assert.equal(styled(tty, 'red', `not sent: ${OSC52}`), '\x1b[31mnot sent: ^[]52;c;aGk=^G\x1b[39m');
  } finally {
    if (previous !== undefined) process.env.NO_COLOR = previous;
  }
});

test("an agent's engine lines and a session's transcript show tool results and text, not escape sequences", () => {
  const out = sink(false);
  const lines = [
    JSON.stringify({ type: 'assistant', message: { content: [{ type: 'text', text: `hi${OSC52}` }, { type: 'tool_use', name: 'Bash', input: { command: `printf '${OSC52}'` } }] } }),
    JSON.stringify({ type: 'user', message: { content: [{ type: 'tool_result', content: `${OSC52}\x1b[2J\rforged`, is_error: false }] } }),
    `not json ${OSC52}`,
  ];
  const rendered = lines.map((line) => renderEngineLine(out, line)).join('');
  assert.deepEqual(acted(rendered.replace(/\n/g, '')), []);
  assert.match(rendered, /\^\[\]52;c;aGk=\^G/);

  const printer = new TranscriptPrinter(out);
  printer.message({ role: 'user', content: `ask ${OSC52}` });
  printer.message({ role: 'assistant', content: `[tool call Bash] {"command":"x"}\n[tool result] ${OSC52}\nmore\x9b2J\n[tool error] bad\x1b[1A` });
  assert.deepEqual(acted(out.text.replace(/\n/g, '')), []);
});

test("a pull's progress lines away from a terminal show control characters", () => {
  let written = '';
  const stream = { isTTY: false, write: (text: string) => ((written += text), true) } as unknown as NodeJS.WriteStream;
  new PullBar('r.test/app:1', stream).progress({ phase: 'progress', image: 'r.test/app:1', elapsed_ms: 1, message: `Copying blob ${OSC52}`, blobs_started: 1 });
  assert.equal(written, 'Copying blob ^[]52;c;aGk=^G\n');
});
