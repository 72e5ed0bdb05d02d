import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { UUID_PATTERN, uuidNamed } from '../../src/uuid.js';

const ID = '0f8fad5b-d9cb-469f-a165-70867728950e';

test('a UUID is the canonical 8-4-4-4-12 hexadecimal form, in either case', () => {
  assert.ok(UUID_PATTERN.test(ID));
  assert.ok(UUID_PATTERN.test(ID.toUpperCase()));
  for (const text of ['../../etc', `urn:uuid:${ID}`, `{${ID}}`, ID.replaceAll('-', ''), `${ID}\n`, `${ID}/..`, ID.replace('0', 'g')]) {
    assert.equal(UUID_PATTERN.test(text), false, text);
  }
});

test('a file name Berth wrote from an id gives the id back, and only with that exact suffix', () => {
  const disk = uuidNamed('.disk');
  assert.equal(disk.exec(`${ID}.disk`)?.[1], ID);
  for (const name of [`${ID}xdisk`, `${ID}.disk.view`, `x${ID}.disk`, `${ID}`]) assert.equal(disk.exec(name), null, name);
});

test('no other module of src/ spells a UUID pattern of its own', () => {
  const src = resolve(import.meta.dirname, '..', '..', 'src');
  const files = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? files(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
    );
  // The 8-4 start of the pattern, however its hex class is written ([0-9a-f], [0-9a-fA-F], [a-f0-9], \da-f…).
  const spelled = /\{8\}-\[?[^\]]*\]?\{4\}/;
  const own = files(src).filter((file) => !file.endsWith(`${join('src', 'uuid.ts')}`) && spelled.test(readFileSync(file, 'utf8')));
  assert.deepEqual(own.map((file) => relative(src, file)), []);
});
