// Every SERVICE_* variable the code reads is in the configuration table of docs/configuration.md, and the
// table names no variable the code does not read.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..', '..');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourceFiles(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

test('the configuration table of docs/configuration.md and the variables the code reads are the same set', () => {
  const read = new Set<string>();
  for (const file of sourceFiles(join(ROOT, 'src'))) {
    for (const match of readFileSync(file, 'utf8').matchAll(/read\.\w+\(\s*'(SERVICE_[A-Z0-9_]+)'/g)) read.add(match[1]!);
  }
  assert.ok(read.size > 40, `found the variables in src/config.ts (${read.size})`);
  const page = readFileSync(join(ROOT, 'docs', 'configuration.md'), 'utf8');
  const start = page.indexOf('# Configuration');
  assert.ok(start >= 0, 'docs/configuration.md has its # Configuration section');
  const end = page.indexOf('\n## ', start);
  const section = page.slice(start, end < 0 ? undefined : end);
  const documented = new Set<string>();
  for (const line of section.split('\n').filter((l) => l.startsWith('| `SERVICE_'))) {
    for (const match of line.split('|')[1]!.matchAll(/`(SERVICE_[A-Z0-9_]+)`/g)) documented.add(match[1]!);
  }
  assert.deepEqual([...read].filter((name) => !documented.has(name)).sort(), [], 'read by the code but missing from the table of docs/configuration.md');
  assert.deepEqual([...documented].filter((name) => !read.has(name)).sort(), [], 'in the table of docs/configuration.md but read by no code');
});
