// berth diff prints what code in a container wrote: its control characters are shown, never obeyed, and the
// only escape codes on the screen are the CLI's own colours, on a terminal with NO_COLOR unset.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { colouredDiff } from '../../packages/cli/src/diff-text.js';

const DIFF = ['diff --git a/x b/x', '--- a/x', '+++ b/x', '@@ -1 +1 @@', '-old', '+new \x1b]52;c;cGF3bmVk\x07\x1b[2J', ' same\rover', ''].join('\n');

test('off a terminal the diff is plain, with control characters made visible', () => {
  const shown = colouredDiff(DIFF, { write: () => true, isTTY: false }, {});
  assert.ok(!shown.includes('\x1b'), 'no escape character reaches the output');
  assert.match(shown, /^\+new \^\[\]52;c;cGF3bmVk\^G\^\[\[2J$/m);
  assert.match(shown, /^ same\^Mover$/m, 'a bare CR is shown, it cannot overwrite the line');
});

test('on a terminal the lines are coloured by kind, and only the colours are escape codes', () => {
  const shown = colouredDiff(DIFF, { write: () => true, isTTY: true }, {});
  assert.match(shown, /^\x1b\[1m--- a\/x\x1b\[0m$/m);
  assert.match(shown, /^\x1b\[36m@@ -1 \+1 @@\x1b\[0m$/m);
  assert.match(shown, /^\x1b\[31m-old\x1b\[0m$/m);
  assert.match(shown, /^\x1b\[32m\+new \^\[\]52;c;cGF3bmVk\^G\^\[\[2J\x1b\[0m$/m);
  const escapes = shown.match(/\x1b\[[0-9;]*m/g) ?? [];
  assert.equal(shown.replace(/\x1b\[[0-9;]*m/g, '').includes('\x1b'), false, 'no escape but the colours');
  assert.ok(escapes.length > 0);
});

test('NO_COLOR turns the colours off on a terminal', () => {
  assert.ok(!colouredDiff(DIFF, { write: () => true, isTTY: true }, { NO_COLOR: '1' }).includes('\x1b'));
});
