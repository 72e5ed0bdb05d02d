// The agent network's bridge keeps its hardware address while containers come and go (runtime/podman/
// bridge-address.ts). Without that, a Linux bridge takes the lowest address among its ports: an agent that
// learned the gateway's address while another container's port had the lowest one sends its next turn to
// nobody once that container is removed, and the turn hangs in TCP retransmissions for over a minute.
// Real Podman, a real agent: containers join the bridge before the agent starts (so the bridge's address
// is theirs), the agent answers a turn, the containers are removed, and the next turn must still end.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { follow, turnEnded } from '../support/agents.js';
import { waitFor } from '../support/wait.js';

const exec = promisify(execFile);

describe('the agent network bridge keeps its address', { timeout: 180_000 }, () => {
  let t: TestBerth;
  const fillers: string[] = [];

  before(async () => {
    t = await startTestBerth({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' });
  });
  after(async () => {
    for (const name of fillers) await exec('podman', ['rm', '-f', '-t', '0', name]).catch(() => undefined);
    await t?.stop();
  });

  const bridgeOf = async (network: string) =>
    (await exec('podman', ['network', 'inspect', network, '--format', '{{.NetworkInterface}}'])).stdout.trim();
  const sysfs = (bridge: string, file: string) => readFile(`/sys/class/net/${bridge}/${file}`, 'utf8').then((text) => text.trim());

  async function turn(id: string, prompt: string, withinMs: number): Promise<string> {
    const stream = follow(`${t.url}/agents/${id}/stream`);
    await stream.ready;
    const sent = await t.request('POST', `/agents/${id}/send`, { prompt });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    await waitFor(`the turn "${prompt}" to end`, async () => turnEnded(sent.body.turn_id)(stream.frames) || undefined, withinMs, 50);
    stream.stop();
    return stream.frames.filter((f) => f.event === 'output').map((f) => String(f.data.content)).join('\n');
  }

  test('an agent\'s next turn ends after the containers whose ports gave the bridge its address are removed', async () => {
    const network = t.config.agent.network;
    // Containers on the bridge before the agent: with eight random port addresses, the lowest (which an
    // unfixed bridge takes) is almost surely one of theirs.
    for (let i = 0; i < 8; i++) {
      const name = `berth-test-filler-${randomBytes(4).toString('hex')}`;
      fillers.push(name);
      await exec('podman', ['run', '-d', '--name', name, '--network', network, t.config.agent.image, 'sleep', '300']);
    }
    const bridge = await bridgeOf(network);
    assert.match(bridge, /^[\w.-]+$/, `the network ${network} is a bridge`);

    const spawned = await t.request('POST', '/agents', { disable_idle_timeout: true });
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    const id: string = spawned.body.id;
    await waitFor('the agent to be idle', async () => (await t.request('GET', `/agents/${id}`)).body.status === 'idle' || undefined, 60_000);
    assert.match(await turn(id, 'say: before the removals', 30_000), /before the removals/);
    assert.equal(await sysfs(bridge, 'addr_assign_type'), '3', 'Berth set the bridge\'s address explicitly');
    const address = await sysfs(bridge, 'address');

    for (const name of fillers.splice(0)) {
      await exec('podman', ['rm', '-f', '-t', '0', name]);
      assert.equal(await sysfs(bridge, 'address'), address, `the bridge kept its address when ${name} left`);
    }
    // The model answers in milliseconds: ten seconds is far beyond a turn, far below a stalled connection.
    assert.match(await turn(id, 'say: after the removals', 10_000), /after the removals/);

    assert.equal((await t.request('DELETE', `/agents/${id}`)).status, 204);
    assert.deepEqual(await t.leftovers(), []);
  });
});
