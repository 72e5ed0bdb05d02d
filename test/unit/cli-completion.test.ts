// The completion scripts offer the workspace commands: their subcommands and choices from the command
// tree, and local directories where a command takes one (`berth push DIR`, `berth pull ID DIR`).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { completionScript } from '../../packages/cli/src/completion.js';
import { buildProgram } from '../../packages/cli/src/main.js';

describe('berth completion bash', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-completion-'));
    await writeFile(join(dir, 'script.sh'), completionScript(buildProgram(), 'bash'));
    await mkdir(join(dir, 'repo-a'));
    await writeFile(join(dir, 'repo-file'), '');
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** What the bash script offers for `words`, the last one being completed. */
  const complete = (...words: string[]) =>
    execFileSync('bash', ['-c', `source script.sh; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _berth_completion; echo "\${COMPREPLY[*]}"`], { cwd: dir, encoding: 'utf8' }).trim();

  it('offers the workspace commands at the top and their subcommands', () => {
    const top = complete('berth', '').split(' ');
    for (const command of ['push', 'pull', 'diff', 'workspaces']) assert.ok(top.includes(command), command);
    assert.equal(complete('berth', 'workspaces', ''), 'ls show files rm');
  });

  it('offers the checkpoints of diff --since and the options of push', () => {
    assert.equal(complete('berth', 'diff', 'id', '--since', ''), 'last_run upload');
    assert.match(complete('berth', 'push', '--'), /--include-git/);
    assert.match(complete('berth', 'run', '--work'), /--workspace/);
  });

  it('offers directories, not files, where a command takes a local directory', () => {
    assert.equal(complete('berth', 'push', 'repo'), 'repo-a');
    assert.equal(complete('berth', 'pull', 'some-id', 'repo'), 'repo-a');
    assert.equal(complete('berth', 'sessions', 'show', 'repo'), '', 'an id is not a directory');
  });
});
