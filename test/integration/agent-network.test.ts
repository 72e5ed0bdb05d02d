// The agent network (runtime/podman/agent-network.ts, network-isolation.ts), on real Podman: each Berth
// makes its own internal network without DNS and with a gateway address; a run on it reaches its own
// Berth's gateway port and nothing else of the host, not even another Berth's gateway, which listens on
// every address (two test Berths side by side, as the suite runs them); a network with a route out, or
// none, stops the start; the network and the nftables tables go at stop.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { nftTableName } from '../../src/runtime/podman/network-isolation.js';

const exec = promisify(execFile);

async function networkInspect(name: string): Promise<{ internal: boolean; dns_enabled: boolean; subnets: { gateway?: string }[]; labels: Record<string, string> }> {
  const [inspected] = JSON.parse((await exec('podman', ['network', 'inspect', name])).stdout) as [never];
  return inspected;
}

async function nftTables(): Promise<string> {
  return (await exec('nft', ['list', 'tables'])).stdout;
}

/** A bash line that prints `OPEN host:port` for each target it connects to, then `probe-done`. */
function probeLine(targets: readonly string[]): string {
  return `for a in ${targets.join(' ')}; do (timeout 4 bash -c "exec 3<>/dev/tcp/\${a%:*}/\${a#*:}" 2>/dev/null && echo "OPEN $a") & done; wait; echo probe-done`;
}

describe('each Berth\'s agent network has no way out but its own gateway', () => {
  let a: TestBerth;
  let b: TestBerth;
  before(async () => {
    const env = { SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' };
    // Both started side by side; one that started is kept for after()'s stop even when the other failed
    // (Promise.all lost it: in CI a failed start left the other Berth, its network and tables running).
    const [started, alsoStarted] = await Promise.allSettled([startTestBerth(env), startTestBerth(env)]);
    if (started.status === 'fulfilled') a = started.value;
    if (alsoStarted.status === 'fulfilled') b = alsoStarted.value;
    for (const result of [started, alsoStarted]) if (result.status === 'rejected') throw result.reason;
  });
  after(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  test('made internal, without DNS, with a gateway, labelled with its instance', async () => {
    for (const t of [a, b]) {
      const network = await networkInspect(t.config.agent.network);
      assert.equal(network.internal, true);
      assert.equal(network.dns_enabled, false);
      assert.equal(network.subnets[0]?.gateway, new URL(t.berth.gateway.url).hostname);
      assert.equal(network.labels['berth.instance'], t.config.instanceName);
    }
    assert.notEqual(a.config.agent.network, b.config.agent.network);
  });

  test('a run reaches its gateway, and neither the other Berth\'s gateway nor its API, on any address', async () => {
    const own = new URL(a.berth.gateway.url);
    const other = new URL(b.berth.gateway.url);
    const otherApiPort = new URL(b.url).port;
    const targets = [
      `${own.hostname}:${own.port}`,
      // B's gateway listens on every address: on A's gateway address only A's rules stand in the way.
      `${own.hostname}:${other.port}`,
      `${other.hostname}:${other.port}`,
      `${own.hostname}:${otherApiPort}`,
    ];
    const response = await a.request('POST', '/run', { prompt: `run: ${probeLine(targets)}; echo routes=$(tail -n +2 /proc/net/route | wc -l)` });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    const output: string = response.body.output;
    assert.match(output, /probe-done/);
    assert.match(output, new RegExp(`OPEN ${own.hostname.replaceAll('.', '\\.')}:${own.port}\\b`), 'its own gateway answers');
    assert.doesNotMatch(output, new RegExp(`OPEN ${own.hostname.replaceAll('.', '\\.')}:${other.port}\\b`), 'the other Berth\'s gateway port on its own gateway address is closed');
    assert.doesNotMatch(output, new RegExp(`OPEN ${other.hostname.replaceAll('.', '\\.')}:`), 'the other Berth\'s network is unreachable');
    assert.doesNotMatch(output, new RegExp(`:${otherApiPort}\\b`), 'Berth\'s API port is closed');
    assert.match(output, /routes=1\b/, 'only the subnet\'s own route: no default route');
    assert.deepEqual(await a.leftovers(), []);
  });

  test('the network and the nftables tables are gone after the stop', async () => {
    const t = await startTestBerth({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' });
    const table = nftTableName(t.config.instanceName);
    assert.match(await nftTables(), new RegExp(`table inet ${table}\\b`));
    await t.berth.stop();
    await assert.rejects(exec('podman', ['network', 'exists', t.config.agent.network]), 'the agent network is removed');
    assert.doesNotMatch(await nftTables(), new RegExp(`\\b${table}\\b`));
    await t.stop();
  });
});

describe('an agent network Berth cannot hold stops the start', () => {
  const routed = `berth-test-routed-${randomBytes(4).toString('hex')}`;
  before(async () => {
    await exec('podman', ['network', 'create', routed]);
  });
  after(async () => {
    await exec('podman', ['network', 'rm', '--force', routed]);
  });

  for (const [name, network, message] of [
    ['a network with a route out', routed, new RegExp(`^SERVICE_AGENT_NETWORK: network "${routed}" has a route out`)],
    ['none', 'none', /^SERVICE_AGENT_NETWORK: "none" cannot be the agent network/],
  ] as const) {
    test(name, async () => {
      await assert.rejects(startTestBerth({ SERVICE_AGENT_NETWORK: network, SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' }), (error: Error) => {
        assert.match(error.message, message);
        return true;
      });
    });
  }
});
