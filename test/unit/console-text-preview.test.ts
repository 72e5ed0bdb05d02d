// The console's file view shows a workspace file as text only when it is text: NUL bytes or invalid UTF-8
// make it a download; a preview cut at the limit neither breaks a character nor hides that it was cut.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { preview, PREVIEW_BYTES } from '../../packages/console/src/workspaces/text-preview.js';

const bytes = (text: string) => new TextEncoder().encode(text);

test('text is shown whole when it fits', () => {
  assert.deepEqual(preview(bytes('const x = 1;\n')), { kind: 'text', text: 'const x = 1;\n', truncated: false });
});

test('a NUL byte or invalid UTF-8 makes a file binary', () => {
  assert.deepEqual(preview(new Uint8Array([0x41, 0, 0x42])), { kind: 'binary' });
  assert.deepEqual(preview(new Uint8Array([0xff, 0xfe, 0x41])), { kind: 'binary' });
});

test('a file longer than the preview is cut at the limit, never inside a character', () => {
  const text = `${'a'.repeat(PREVIEW_BYTES - 1)}é and more`; // é is 2 bytes and straddles the limit
  const shown = preview(bytes(text).subarray(0, PREVIEW_BYTES + 1));
  assert.equal(shown.kind, 'text');
  assert.ok(shown.kind === 'text' && shown.truncated);
  assert.ok(shown.kind === 'text' && shown.text === 'a'.repeat(PREVIEW_BYTES - 1));
});
