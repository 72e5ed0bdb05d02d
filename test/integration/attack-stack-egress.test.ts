// Issue 25, for compose stacks: code in a stack's service (a compromised image, or a service that runs
// what the run wrote) tries every way out, against a real Berth on real Podman with two callers. The
// service's only way out is Berth's egress proxy, with the stack's own credential bound to the current run's
// caller and egress policy: an allowed host answers, another host is refused, the policy follows the
// session's latest run, and the credential dies with the stack. Nothing else leaves: no DNS server (not on
// the stack's gateway, not the host's resolver), no raw TCP or UDP to the host, no model. The services still
// know each other, and the engine knows them, by name. Local servers stand for outside hosts
// (test/support/outside-hosts.ts); a trap on every host address records anything that gets through.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import type { TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';
import { requireProbeResult, startHostTrap, startOutsideHosts, type HostTrap, type OutsideHosts } from '../support/outside-hosts.js';

const exec = promisify(execFile);
const REDIS = 'localhost/berth-test-redis:bookworm';
const PROBES = readFileSync(join(import.meta.dirname, '..', 'support', 'egress-probes.sh'), 'utf8');

async function podman(...args: string[]): Promise<string> {
  return (await exec('podman', args, { timeout: 60_000 })).stdout.trim();
}

/** Runs the egress probes (test/support/egress-probes.sh) inside a service container, with its own environment. */
async function probeInService(container: string, ...commands: string[]): Promise<string> {
  const script = `${PROBES}\n${commands.join('\n')}\necho probes-done`;
  const { stdout } = await exec('podman', ['exec', container, 'bash', '-c', script], { timeout: 120_000 });
  assert.match(stdout, /probes-done/, stdout);
  return stdout;
}

describe('egress of compose services: only the proxy, with the run\'s policy', () => {
  let t: TestBerth;
  let as: (name: 'alice' | 'bob') => Record<string, string>;
  let outside: OutsideHosts;
  let trap: HostTrap;
  let project: string;

  before(async () => {
    project = await mkdtemp(join(tmpdir(), 'berth-attack-stack-egress-'));
    outside = await startOutsideHosts(['allowed.test', 'other.test']);
    trap = await startHostTrap();
    ({ t, as } = await startBerthWithCallers(
      ['alice', 'bob'],
      {
        SERVICE_AGENT_ALLOWED_VOLUMES: project,
        SERVICE_COMPOSE_HEALTH_TIMEOUT: '60s',
        SERVICE_POOL_SIZE: '0',
        SERVICE_AGENT_POOL_SIZE: '0',
      },
      { egressHosts: outside.addresses },
    ));
  });
  after(async () => {
    await t?.stop();
    await trap?.close();
    await outside?.close();
    await rm(project, { recursive: true, force: true });
  });

  test('a service reaches an allowed host through the proxy and nothing else; its credential follows the run and dies with the stack', async () => {
    await mkdir(join(project, 'alice'));
    const composePath = join(project, 'alice', 'compose.yaml');
    await writeFile(
      composePath,
      stringify({
        services: {
          app: { image: REDIS },
          cache: { image: REDIS, healthcheck: { test: ['CMD', 'redis-cli', 'ping'], interval: '1s', retries: 30 } },
          worker: { image: REDIS, command: ['sleep', 'infinity'], environment: { NO_PROXY: 'intranet.example' } },
        },
      }),
    );
    const environment = { type: 'compose', path: composePath, service: 'app' };
    const allowed = [`allowed.test:${outside.httpPort}`];
    const allowedUrl = `${outside.url('http', 'allowed.test')}/from-service`;
    const otherUrl = `${outside.url('http', 'other.test')}/from-service`;

    // Alice's run allows one host. The engine knows the services by name (no DNS on the stack's network).
    const first = await t.request(
      'POST',
      '/run',
      { prompt: 'run: redis-cli -h cache ping; getent hosts worker', container: { environment, network: { mode: 'allowlist', allow: allowed } } },
      as('alice'),
    );
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.match(first.body.output, /PONG/);
    assert.match(first.body.output, /worker/);
    const sessionId: string = first.body.session_id;
    const worker = `berth-stack-${sessionId}-worker`;
    const stackGateway = await podman('network', 'inspect', `berth-stack-${sessionId}`, '--format', '{{range .Subnets}}{{.Gateway}}{{end}}');
    assert.match(stackGateway, /^\d+\.\d+\.\d+\.\d+$/);
    const hostResolver = /^nameserver\s+(\S+)/m.exec(readFileSync('/etc/resolv.conf', 'utf8'))?.[1] ?? '127.0.0.53';

    // In the worker: the allowed host through the proxy (positive control), another host, the model with
    // the stack's credential, raw TCP and UDP to the host's trap, DNS to the stack's gateway and to the
    // host's resolver, and a name lookup; and the other services by name.
    const seen = await probeInService(
      worker,
      `http allowed ${allowedUrl}`,
      `http other ${otherUrl}`,
      `ANTHROPIC_BASE_URL="http://$phost:$pport" model model "\${creds#berth:}"`,
      `tcp raw-trap ${stackGateway} ${trap.port}`,
      `udp udp-trap ${stackGateway} ${trap.port}`,
      `dns dns-gateway ${stackGateway}`,
      `dns dns-resolver ${hostResolver}`,
      `if getent hosts allowed.test >/dev/null; then echo "lookup RESOLVED"; else echo "lookup none"; fi`,
      `if getent hosts cache >/dev/null && redis-cli -h cache ping | grep -q PONG; then echo "sibling PONG"; else echo "sibling none"; fi`,
      'echo "noproxy $NO_PROXY"',
      'echo "token ${creds#berth:}"',
    );
    assert.match(requireProbeResult(seen, 'allowed'), /^HTTP\/1\.1 200 .*allowed\.test/, 'the allowed host answers through the proxy');
    assert.match(requireProbeResult(seen, 'other'), /^HTTP\/1\.1 403 /, 'a host the run did not allow is refused');
    assert.equal(outside.seen('other.test').length, 0, 'the refused host was never contacted');
    assert.match(requireProbeResult(seen, 'model'), /^HTTP\/1\.1 403 .*permission_error/, 'a service\'s credential cannot call the model');
    assert.equal(requireProbeResult(seen, 'raw-trap'), 'closed');
    assert.equal(requireProbeResult(seen, 'dns-gateway'), 'silent', 'no DNS server on the stack\'s gateway');
    assert.equal(requireProbeResult(seen, 'dns-resolver'), 'silent', 'the host\'s resolver is out of reach');
    assert.equal(requireProbeResult(seen, 'lookup'), 'none', 'outside names do not resolve in a service');
    assert.equal(requireProbeResult(seen, 'sibling'), 'PONG', 'services know each other by name');
    assert.match(requireProbeResult(seen, 'noproxy'), /(^|,)cache(,|$)/, 'traffic between services does not go through the proxy');
    assert.match(requireProbeResult(seen, 'noproxy'), /,intranet\.example$/, 'the compose file\'s NO_PROXY is kept');
    const token = requireProbeResult(seen, 'token');
    assert.match(token, /^brt_[0-9a-f]{64}$/);
    await delay(300);
    assert.deepEqual(trap.contacts, [], 'nothing reached the host trap');

    // The stack's decisions are alice's, under the stack's id; bob gets a 404.
    const grantId = `berth-stack-${sessionId}`;
    const usage = await t.request('GET', `/usage/runs/${grantId}`, undefined, as('alice'));
    assert.equal(usage.status, 200, JSON.stringify(usage.body));
    const decisions = (usage.body.egress as { host: string; decision: string }[]).map((entry) => `${entry.host} ${entry.decision}`);
    assert.ok(decisions.includes('allowed.test allowed') && decisions.includes('other.test refused_host'), decisions.join('; '));
    assert.equal((await t.request('GET', `/usage/runs/${grantId}`, undefined, as('bob'))).status, 404);

    // Alice's next run of the session allows nothing: from then on the services get nothing either.
    const second = await t.request(
      'POST',
      '/run',
      { prompt: 'run: redis-cli -h cache ping', engine: { session_id: sessionId, resume: true }, container: { environment, network: { mode: 'none' } } },
      as('alice'),
    );
    assert.equal(second.status, 200, JSON.stringify(second.body));
    const closed = await probeInService(worker, `http allowed ${allowedUrl}`);
    assert.match(requireProbeResult(closed, 'allowed'), /^HTTP\/1\.1 403 /, 'the latest run\'s policy holds for the services');

    // Once the stack is gone, its credential is refused: bob's run tries it as his proxy credential.
    assert.equal((await t.request('DELETE', `/sessions/${sessionId}`, undefined, as('alice'))).status, 200);
    const stolen = Buffer.from(`berth:${token}`).toString('base64');
    const replay = await t.request(
      'POST',
      '/run',
      { prompt: `run: eval "$(printf %s ${Buffer.from(PROBES).toString('base64')} | base64 -d)"; http replay ${allowedUrl} '' ${stolen}; echo probes-done`, container: { network: { mode: 'allowlist', allow: allowed } } },
      as('bob'),
    );
    assert.equal(replay.status, 200, JSON.stringify(replay.body));
    assert.match(requireProbeResult(replay.body.output, 'replay'), /^HTTP\/1\.1 407 /, 'a removed stack\'s credential is refused');
    assert.deepEqual(await t.leftovers(), []);
    assert.equal((await podman('network', 'ls', '--filter', `label=berth.stack=${sessionId}`, '--format', '{{.Name}}')), '');
  });
});
