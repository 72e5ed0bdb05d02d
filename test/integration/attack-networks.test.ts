// Issue 23, finding 2 (networks), performed against a real Berth on real Podman with two callers: alice
// brings up a compose stack with Redis and keeps an agent with a listener; bob's plain run scans alice's
// stack by address and tries alice's agent, and reaches neither (alice's key is still hers); a stack
// service reaches nothing on the host (Berth's API, any host service, on either gateway), and an engine
// reaches Berth's model gateway on its network's gateway address but no other host service there. Berth's
// nftables tables exist while it runs and are gone after its stop (runtime/podman/network-isolation.ts).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { createConnection, createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import type { TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';
import { nftTableName } from '../../src/runtime/podman/network-isolation.js';

const exec = promisify(execFile);
const REDIS = 'localhost/berth-test-redis:bookworm';
const LISTENER_PORT = 7777;
const UDP_PORT = 9999;

async function podman(...args: string[]): Promise<string> {
  return (await exec('podman', args)).stdout.trim();
}

/** The IPv4 addresses of a container, on every network it joined. */
async function addressesOf(container: string): Promise<string[]> {
  return (await podman('inspect', container, '--format', '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}')).split(' ').filter(Boolean);
}

async function nftTables(): Promise<string> {
  return (await exec('nft', ['list', 'tables'])).stdout;
}

/**
 * A shell line that tries each host:port in parallel and prints `OPEN host:port` for those it connects to
 * (the addresses are expanded at run time: the shell's job messages, which echo commands, never hold them).
 */
function probeLine(targets: readonly string[], send = ''): string {
  const payload = send === '' ? '' : ` && printf '${send}\\n' >&3 && head -c 40 <&3`;
  return `for a in ${targets.join(' ')}; do (timeout 4 bash -c "exec 3<>/dev/tcp/\${a%:*}/\${a#*:}${payload}" && echo "OPEN $a") & done; wait; echo probe-done`;
}

/** Connects from the host; answers the first line the listener sends. */
function readLineFromHost(host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host, port, timeout: 5_000 });
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString('utf8');
      if (text.includes('\n')) socket.end();
    });
    socket.on('end', () => resolve(text.trim()));
    socket.on('timeout', () => socket.destroy(new Error(`no answer from ${host}:${port}`)));
    socket.on('error', reject);
  });
}

describe('callers\' networks are isolated', () => {
  let t: TestBerth;
  let as: (name: 'alice' | 'bob') => Record<string, string>;
  let project: string;
  let hostService: Server;
  let hostPort: number;
  let apiPort: number;
  // An agent network made by the operator (internal: Berth refuses one with a route out), not Berth's own.
  const agentNetwork = `berth-test-agents-${randomBytes(4).toString('hex')}`;

  before(async () => {
    project = await mkdtemp(join(tmpdir(), 'berth-attack-networks-'));
    await podman('network', 'create', '--internal', agentNetwork);
    // A service on the host that listens everywhere, as the offline model and many host services do.
    hostService = createServer((socket) => {
      // A probe's timeout resets its connection: that is its end, not a failure.
      socket.on('error', () => undefined);
      socket.end('host-service\n');
    });
    await new Promise<void>((resolve) => hostService.listen(0, '0.0.0.0', resolve));
    hostPort = (hostService.address() as AddressInfo).port;
    ({ t, as } = await startBerthWithCallers(['alice', 'bob'], {
      // Berth's API on every address, so a stack service could try it on its gateway.
      SERVICE_ADDRESS: '0.0.0.0:0',
      SERVICE_AGENT_NETWORK: agentNetwork,
      SERVICE_AGENT_ALLOWED_VOLUMES: project,
      SERVICE_COMPOSE_HEALTH_TIMEOUT: '60s',
      SERVICE_POOL_SIZE: '0',
      SERVICE_AGENT_POOL_SIZE: '0',
    }));
    apiPort = Number(new URL(t.url).port);
  });
  after(async () => {
    await t?.stop();
    await new Promise((resolve) => hostService?.close(resolve));
    await rm(project, { recursive: true, force: true });
    await podman('network', 'rm', '--force', agentNetwork);
    if (t) assert.doesNotMatch(await nftTables(), new RegExp(`\\b${nftTableName(t.config.instanceName)}\\b`), 'no nft table is left after stop');
  });

  /** Waits until alice's agent is idle (started, or its turn ended). */
  async function idle(agentId: string): Promise<void> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const { body } = await t.request('GET', `/agents/${agentId}`, undefined, as('alice'));
      if (body.status === 'idle') return;
      assert.ok(Date.now() < deadline && ['starting', 'generating'].includes(body.status), `agent ${agentId} is ${body.status}`);
      await delay(100);
    }
  }

  test('another caller reaches neither a stack nor an agent; a stack reaches nothing on the host', async () => {
    const table = nftTableName(t.config.instanceName);
    const tables = await nftTables();
    assert.match(tables, new RegExp(`table inet ${table}\\b`));
    assert.match(tables, new RegExp(`table bridge ${table}\\b`));

    // Alice: a stack whose agent service is the Redis image (it has redis-cli), and a key of hers.
    await mkdir(join(project, 'alice'));
    const composePath = join(project, 'alice', 'compose.yaml');
    await writeFile(
      composePath,
      stringify({
        services: {
          app: { image: REDIS },
          cache: { image: REDIS, healthcheck: { test: ['CMD', 'redis-cli', 'ping'], interval: '1s', retries: 30 } },
        },
      }),
    );
    const environment = { type: 'compose', path: composePath, service: 'app' };
    const set = await t.request('POST', '/run', { prompt: 'run: redis-cli -h cache set owner alice', container: { environment } }, as('alice'));
    assert.equal(set.status, 200, JSON.stringify(set.body));
    assert.match(set.body.output, /OK/);
    const sessionId: string = set.body.session_id;
    const cache = `berth-stack-${sessionId}-cache`;
    const [cacheAddress] = await addressesOf(cache);
    assert.ok(cacheAddress, 'the cache has an address');
    const stackNetwork = `berth-stack-${sessionId}`;
    const stackGateway = await podman('network', 'inspect', stackNetwork, '--format', '{{range .Subnets}}{{.Gateway}}{{end}}');
    const agentGateway = await podman('network', 'inspect', agentNetwork, '--format', '{{range .Subnets}}{{.Gateway}}{{end}}');
    const subnetBase = cacheAddress!.split('.').slice(0, 3).join('.');
    // A UDP receiver in alice's cache: one-way datagrams need no route back, so they show what the host
    // forwards into a stack even where a TCP handshake could not complete.
    const receiver = `perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => ${UDP_PORT}, Proto => "udp") or die; open(my $f, ">>", "/tmp/udp-received") or die; $f->autoflush(1); while ($s->recv($m, 100)) { print $f $m }'`;
    await podman('exec', '--detach', cache, 'bash', '-c', receiver);

    // Alice's agent with a listener on every address of its container.
    const agent = await t.request('POST', '/agents', {}, as('alice'));
    assert.equal(agent.status, 200, JSON.stringify(agent.body));
    const listener = `perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => ${LISTENER_PORT}, Listen => 5, ReuseAddr => 1) or die; while ($c = $s->accept) { print $c "alice-agent\\n"; close $c }'`;
    await idle(agent.body.id);
    const started = await t.request('POST', `/agents/${agent.body.id}/send`, { prompt: `run: setsid -f ${listener} >/dev/null 2>&1; sleep 1; echo listener-started` }, as('alice'));
    assert.equal(started.status, 200, JSON.stringify(started.body));
    await idle(agent.body.id);
    const agentContainer = (await podman('ps', '--filter', `label=berth.instance=${t.config.instanceName}`, '--format', '{{.Names}}'))
      .split('\n')
      .filter((name) => name !== '' && !name.startsWith('berth-stack-'));
    assert.equal(agentContainer.length, 1, `one running agent container: ${agentContainer.join(', ')}`);
    const [agentAddress] = await addressesOf(agentContainer[0]!);
    // Positive control: the listener answers (from the host, which is not a forwarded path).
    assert.equal(await readLineFromHost(agentAddress!, LISTENER_PORT), 'alice-agent');

    // Bob's plain run: alice's cache by address and its neighbours, alice's agent, a host service on bob's
    // own gateway address, and Berth's model gateway there (the positive control: bob's engine is not cut off).
    const gatewayPort = t.berth.gateway.port;
    const scanned = [cacheAddress!, ...[2, 3, 4, 5, 6].map((n) => `${subnetBase}.${n}`)].map((address) => `${address}:6379`);
    const attack = await t.request(
      'POST',
      '/run',
      {
        prompt: [
          `run: ${probeLine(scanned, 'SET owner OWNED-BY-BOB')}`,
          `run: ${probeLine([`${agentAddress}:${LISTENER_PORT}`, `${agentGateway}:${hostPort}`, `${agentGateway}:${gatewayPort}`])}`,
          `run: for i in 1 2 3; do echo udp-OWNED-BY-BOB > /dev/udp/${cacheAddress}/${UDP_PORT}; sleep 0.2; done; echo udp-sent`,
        ].join('\n'),
      },
      as('bob'),
    );
    assert.equal(attack.status, 200, JSON.stringify(attack.body));
    assert.match(attack.body.output, /probe-done[\s\S]*probe-done/);
    assert.doesNotMatch(attack.body.output, /OPEN [\d.]+:6379/, 'bob reaches no Redis of alice\'s');
    assert.doesNotMatch(attack.body.output, new RegExp(`OPEN ${agentAddress!.replaceAll('.', '\\.')}:${LISTENER_PORT}`), 'bob does not reach alice\'s agent');
    assert.doesNotMatch(attack.body.output, new RegExp(`OPEN ${agentGateway.replaceAll('.', '\\.')}:${hostPort}\\b`), 'bob\'s engine reaches no host service but the gateway');
    assert.match(attack.body.output, new RegExp(`OPEN ${agentGateway.replaceAll('.', '\\.')}:${gatewayPort}\\b`), 'bob\'s engine still reaches Berth\'s gateway');

    // Alice's own next run reaches her cache, and her key is still hers.
    const get = await t.request(
      'POST',
      '/run',
      { prompt: `run: redis-cli -h cache get owner; echo udp-from-alice > /dev/udp/cache/${UDP_PORT}`, engine: { session_id: sessionId, resume: true }, container: { environment } },
      as('alice'),
    );
    assert.equal(get.status, 200, JSON.stringify(get.body));
    assert.match(get.body.output, /alice/);
    assert.doesNotMatch(get.body.output, /OWNED-BY-BOB/);
    // The receiver got alice's datagram (positive control) and none of bob's.
    assert.equal(await podman('exec', cache, 'cat', '/tmp/udp-received'), 'udp-from-alice');

    // Code in a stack service: Berth's API and a host service, on the stack's gateway and the agent
    // network's; nothing answers (DNS on the stack's gateway, which alice's runs used, is all it has).
    const fromService = await exec(
      'podman',
      ['exec', cache, 'bash', '-c', probeLine([`${stackGateway}:${apiPort}`, `${stackGateway}:${hostPort}`, `${agentGateway}:${apiPort}`, `${agentGateway}:${hostPort}`])],
      { timeout: 30_000 },
    );
    assert.match(fromService.stdout, /probe-done/);
    assert.doesNotMatch(fromService.stdout, /OPEN/, 'a stack service reaches nothing on the host');

    assert.equal((await t.request('DELETE', `/agents/${agent.body.id}`, undefined, as('alice'))).status, 204);
    assert.equal((await t.request('DELETE', `/sessions/${sessionId}`, undefined, as('alice'))).status, 200);
  });
});
