// Attacks on workspaces through runs, performed for real on Podman with the real engine: a run plants a link
// to /etc and a FIFO in its workspace, and the API reading the workspace afterwards follows neither and never
// hangs; another caller can neither run in a caller's workspace nor resume the caller's session to reach it;
// a run sees only its own workspace among its mounts; after every run nothing stays bound at a run disk's
// workdir; and after the stop no mount or loop device of the test Berth is left.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import { after, afterEach, before, describe, it } from 'node:test';
import { startBerthWithCallers } from '../support/callers.js';
import type { TestBerth } from '../support/berth.js';
import { mountsAndLoopsOf, rawRequest } from '../support/workspaces.js';

/** Mounts left at a run disk's workdir (a workspace bound there and never taken away). */
async function workdirBinds(t: TestBerth): Promise<string[]> {
  const table = await readFile('/proc/self/mountinfo', 'utf8');
  const runs = `${t.config.agent.sessionsDir}/.runs/`;
  return table.split('\n').map((line) => line.split(' ')[4] ?? '').filter((path) => path.startsWith(runs) && path.includes('/.berth-writable/'));
}

/** The names of a tar archive's entries and their type flags (ustar headers, 512-byte blocks). */
function tarEntries(tar: Buffer): { name: string; type: string; size: number }[] {
  const entries: { name: string; type: string; size: number }[] = [];
  for (let offset = 0; offset + 512 <= tar.length; ) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((byte) => byte === 0)) break;
    const text = (start: number, length: number) => header.subarray(start, start + length).toString('utf8').replace(/\0.*$/s, '');
    const prefix = text(345, 155);
    const name = `${prefix ? `${prefix}/` : ''}${text(0, 100)}`;
    const size = parseInt(text(124, 12).trim() || '0', 8);
    entries.push({ name, type: text(156, 1) || '0', size });
    offset += 512 + Math.ceil(size / 512) * 512;
  }
  return entries;
}

describe('workspaces attacked through runs', () => {
  let t: TestBerth;
  let as: (name: 'alice' | 'mallory') => Record<string, string>;
  let berthDir: string;

  const post = (caller: 'alice' | 'mallory', path: string, body: unknown) => t.request('POST', path, body, as(caller));
  const workspaceOf = async (caller: 'alice' | 'mallory') => {
    const created = await post(caller, '/workspaces', {});
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return created.body.id as string;
  };

  before(async () => {
    ({ t, as } = await startBerthWithCallers(['alice', 'mallory'], { SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' }));
    berthDir = t.dir;
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), []);
    assert.deepEqual(await workdirBinds(t), [], 'no workspace stays bound at a run disk\'s workdir after its run');
  });
  after(async () => {
    await t?.stop();
    if (berthDir) assert.deepEqual(await mountsAndLoopsOf(berthDir), { mounts: [], loops: [] }, 'no mount or loop device left after the stop');
  });

  it('a link to /etc and a FIFO a run planted are neither followed nor waited on by the API', async () => {
    const workspace = await workspaceOf('alice');
    const planted = await post('alice', '/run', {
      prompt: 'run: ln -s /etc escape && ln -s /etc/passwd passwd-link && mkfifo pipe && echo planted',
      workspace,
    });
    assert.equal(planted.status, 200, JSON.stringify(planted.body));
    assert.match(planted.body.output, /planted/);
    const get = (path: string) => rawRequest(t.url, 'GET', `/workspaces/${workspace}/${path}`, { headers: as('alice'), timeoutMs: 5_000 });
    for (const path of ['files/escape/passwd', 'files/passwd-link', 'files/escape/']) {
      const answer = await get(path);
      assert.ok(answer.status >= 400 && answer.status < 500, `GET ${path} is refused: ${answer.status} ${answer.text}`);
      assert.doesNotMatch(answer.text, /root:x:0:0/, `GET ${path} did not read the host's /etc/passwd`);
    }
    const fifo = await get('files/pipe');
    assert.equal(fifo.status, 400, `a FIFO is refused at once: ${fifo.status} ${fifo.text}`);
    const listing = await get('files/');
    assert.equal(listing.status, 200, listing.text);
    const types = Object.fromEntries((JSON.parse(listing.text).entries as { name: string; type: string }[]).map((entry) => [entry.name, entry.type]));
    assert.deepEqual(types, { escape: 'symlink', 'passwd-link': 'symlink', pipe: 'other' });
    const archive = await get('archive');
    assert.equal(archive.status, 200, archive.text);
    const entries = tarEntries(gunzipSync(archive.body));
    assert.ok(entries.every((entry) => entry.type === '2' || entry.type === '5' || entry.size < 100), `links stored as links, nothing of /etc: ${JSON.stringify(entries)}`);
    assert.ok(!entries.some((entry) => /passwd$/.test(entry.name) && entry.type === '0'), 'no /etc/passwd in the archive');
    assert.ok(!entries.some((entry) => entry.name.includes('pipe') && entry.type !== '2'), 'the FIFO is left out');
  });

  it('another caller can neither run in a caller\'s workspace nor resume the caller\'s session to reach it', async () => {
    const workspace = await workspaceOf('alice');
    const own = await post('alice', '/run', { prompt: 'run: echo alice-secret > secret.txt', workspace });
    assert.equal(own.status, 200, JSON.stringify(own.body));
    const named = await post('mallory', '/run', { prompt: 'run: cat secret.txt', workspace });
    assert.equal(named.status, 404, JSON.stringify(named.body));
    assert.equal(named.body.error, `workspace ${workspace} not found`);
    const agent = await post('mallory', '/agents', { workspace });
    assert.equal(agent.status, 404, JSON.stringify(agent.body));
    for (const engine of [{ session_id: own.body.session_id, resume: true }, { session_id: own.body.session_id, fork_session: true }]) {
      const resumed = await post('mallory', '/run', { prompt: 'run: cat secret.txt', engine });
      assert.equal(resumed.status, 404, JSON.stringify(resumed.body));
      assert.doesNotMatch(JSON.stringify(resumed.body), /alice-secret/);
    }
    const streamed = await rawRequest(t.url, 'GET', `/run/stream?${new URLSearchParams({ prompt: 'run: cat secret.txt', workspace })}`, { headers: as('mallory'), timeoutMs: 10_000 });
    assert.equal(streamed.status, 404, streamed.text);
    assert.equal((await t.request('GET', `/workspaces/${workspace}`, undefined, as('alice'))).body.sessions.length, 1, 'nobody else was linked to it');
  });

  it('a run sees its own workspace at its workdir and no other workspace anywhere', async () => {
    const mine = await workspaceOf('alice');
    const other = await workspaceOf('alice');
    const upload = await rawRequest(t.url, 'PUT', `/workspaces/${other}/files/other-workspace-marker`, { body: 'x', headers: { ...as('alice'), 'content-type': 'application/octet-stream' } });
    assert.equal(upload.status, 201, upload.text);
    const run = await post('alice', '/run', {
      prompt: [
        // Mount root and mount point of every mount whose source is a loop device (run disk and workspaces).
        "run: awk '{ for (i = 7; i <= NF; i++) if ($i == \"-\") source = $(i + 2); if (source ~ /^\\/dev\\/loop/) print \"mount\", $4, $5 }' /proc/self/mountinfo",
        'run: find / -name other-workspace-marker -not -path "/proc/*" -not -path "/sys/*" -not -path "/opt/claude/*" 2>/dev/null; echo searched',
      ].join('\n'),
      workspace: mine,
    });
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const mounts = (run.body.output as string).split('\n').filter((line) => line.startsWith('mount ')).map((line) => line.slice('mount '.length));
    // The run disk is also the engine's configuration directory, mounted with what is below it: the same tree
    // appears there once more, at the disk's workdir directory.
    assert.deepEqual(
      mounts.filter((line) => line.startsWith('/tree ')).sort(),
      ['/tree /var/lib/berth/engine/.berth-writable/workdir', '/tree /workspace'],
      `only its own workspace's tree, at the workdir: ${mounts.join('; ')}`,
    );
    assert.ok(mounts.every((line) => line.startsWith('/tree ') || line.startsWith('/ ') || line.startsWith('/.berth-writable/')), `nothing but the run disk and the tree: ${mounts.join('; ')}`);
    assert.ok(!mounts.some((line) => line.includes('.workspaces')), 'nothing of the workspaces directory is mounted');
    assert.doesNotMatch(run.body.output, /other-workspace-marker/, 'the other workspace\'s file is nowhere in the container');
    assert.match(run.body.output, /searched/);
  });

  it('a request for a workspace with a volume at the workdir, or not a UUID, is refused before any container exists', async () => {
    const workspace = await workspaceOf('alice');
    const notUuid = await post('alice', '/run', { prompt: 'say: x', workspace: '../../etc' });
    assert.equal(notUuid.status, 400, JSON.stringify(notUuid.body));
    assert.match(notUuid.body.error, /^workspace: /);
    const underTmp = await post('alice', '/run', { prompt: 'say: x', workspace, workdir: '/tmp/work' });
    assert.equal(underTmp.status, 400, JSON.stringify(underTmp.body));
    assert.match(underTmp.body.error, /^workspace: /);
    assert.equal((await t.request('GET', `/workspaces/${workspace}`, undefined, as('alice'))).body.in_use, false);
  });
});
