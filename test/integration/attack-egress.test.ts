// Issue 25, performed against a real Berth on real Podman with two callers: code in a run (a prompt's `run:`
// directives, as a prompt injection would run them) looks for the model key in its environment, its files
// and every process's environment, replays its per-run credential once the run has answered, and tries
// every way out of its container: hosts its caller did not allow (plain HTTP, CONNECT, a forged Host
// header, another TLS server name or none, no TLS at all), raw TCP and UDP to the host and beyond, DNS,
// the metadata address, Berth's own API, and internal names the proxy would resolve. Local servers
// stand for outside hosts (test/support/outside-hosts.ts); a trap on every host address records anything
// that gets through.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { promisify } from 'node:util';
import { setTimeout as delay } from 'node:timers/promises';
import { after, afterEach, before, describe, test } from 'node:test';
import type { TestBerth } from '../support/berth.js';
import { startBerthWithCallers } from '../support/callers.js';
import { OUTSIDE_COMMIT, probeRun, requireProbeResult, startHostTrap, startOutsideHosts, type HostTrap, type OutsideHosts } from '../support/outside-hosts.js';

const exec = promisify(execFile);

/** The value of one labelled series in a Prometheus text exposition; fails when the series is missing (a rename must not read as 0). */
function series(text: string, name: string): number {
  const escaped = name.replace(/[{}"]/g, (c) => `\\${c}`);
  const match = new RegExp(`^${escaped} (\\d+(?:\\.\\d+)?)$`, 'm').exec(text);
  assert.ok(match, `metric ${name} is exposed`);
  return Number(match[1]);
}

/** An IPv4 address of the host outside Podman's bridges (its own network card), if it has one. */
function hostAddress(): string | undefined {
  for (const [name, addresses] of Object.entries(networkInterfaces())) {
    if (name === 'lo' || name.startsWith('podman') || name.startsWith('veth') || name.startsWith('cni')) continue;
    const v4 = addresses?.find((address) => address.family === 'IPv4' && !address.internal);
    if (v4) return v4.address;
  }
  return undefined;
}

describe('egress: the model key stays outside the container, a run reaches only what its caller allowed', () => {
  let t: TestBerth;
  let as: (name: 'alice' | 'bob') => Record<string, string>;
  let outside: OutsideHosts;
  let trap: HostTrap;
  /** The agent network's gateway address: the host, as containers see it. */
  let gatewayHost: string;
  let apiPort: number;
  /** The gateway address of Podman's default network (another bridge of the host, with a route out). */
  let podmanBridge: string;
  let allowedHttp: string;
  let allowedHttps: string;
  /** Patterns admitting the two outside servers of allowed.test (their ports are not 80/443). */
  let allowList: string[];
  /** Alice's first run: its per-run credential, taken from its own environment. */
  let deadToken = '';

  before(async () => {
    outside = await startOutsideHosts(['allowed.test', 'other.test']);
    trap = await startHostTrap();
    ({ t, as } = await startBerthWithCallers(
      ['alice', 'bob'],
      {
        // Berth's API on every address, so a run could try it at the agent network's gateway.
        SERVICE_ADDRESS: '0.0.0.0:0',
        SERVICE_POOL_SIZE: '0',
        SERVICE_AGENT_POOL_SIZE: '0',
      },
      { egressHosts: outside.addresses },
    ));
    gatewayHost = new URL(t.berth.gateway.url).hostname;
    podmanBridge = (await exec('podman', ['network', 'inspect', 'podman', '--format', '{{range .Subnets}}{{.Gateway}} {{end}}'])).stdout.trim().split(' ')[0] ?? '';
    assert.match(podmanBridge, /^\d+\.\d+\.\d+\.\d+$/);
    apiPort = Number(new URL(t.url).port);
    allowedHttp = outside.url('http', 'allowed.test');
    allowedHttps = outside.url('https', 'allowed.test');
    allowList = [`allowed.test:${outside.httpPort}`, `allowed.test:${outside.httpsPort}`];
  });
  afterEach(async () => {
    assert.deepEqual(await t.leftovers(), []);
    // Nothing a run did reached the host outside the gateway's port, by any path.
    await delay(300);
    assert.deepEqual(trap.contacts, [], 'nothing reached the host trap');
  });
  after(async () => {
    // stop() fails when the instance's agent network or nftables tables are left behind.
    await t?.stop();
    await trap?.close();
    await outside?.close();
  });

  test('a run finds no model credential in its environment, its files or any process; its own credential is refused once it answered', async () => {
    const key = t.berth.engineAccess.current().upstream.credential.value;
    assert.ok(key.length >= 16, 'the offline model has a key of its own');
    // The key is split in the command so the engine's own transcript (a file of the container) cannot hold it.
    const half = Math.floor(key.length / 2);
    const run = await t.request(
      'POST',
      '/run',
      {
        prompt: [
          'run: env | sort',
          // Every file and every process's environment and command line, searched for the key and (the
          // positive control) for the run's own credential, which its input file and processes do hold.
          `run: K='${key.slice(0, half)}''${key.slice(half)}'; P=$(printf '%s\\n%s\\n' "$K" "$ANTHROPIC_API_KEY"); ` +
            `{ grep -rsaoF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev -f <(echo "$P") /; grep -saoF -f <(echo "$P") /proc/[0-9]*/environ /proc/[0-9]*/cmdline; } ` +
            `| sort -u | sed "s/$ANTHROPIC_API_KEY/run-credential/; s/^/found: /"; echo grep-done`,
          probeRun('model live "$ANTHROPIC_API_KEY"'),
        ].join('\n'),
      },
      as('alice'),
    );
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const output: string = run.body.output;
    assert.match(output, /grep-done/);
    assert.ok(!output.includes(key), 'the model key is in no environment variable, no file and no process of the container');
    const found = output.split('\n').filter((line) => line.startsWith('found: '));
    assert.ok(found.length > 0 && found.every((line) => line.endsWith(':run-credential')), `only the run's own credential was found:\n${found.join('\n')}`);
    assert.ok(found.some((line) => line.startsWith('found: /proc/')), 'the search reads the processes\' environments');
    assert.ok(found.some((line) => !line.startsWith('found: /proc/')), 'the search reads the files');
    // What the engine has instead: the gateway's address and a credential of this run.
    assert.match(output, new RegExp(`^ANTHROPIC_BASE_URL=${t.berth.gateway.url.replace(/[.:/]/g, '\\$&')}/?$`, 'm'));
    const token = /^ANTHROPIC_API_KEY=(brt_[0-9a-f]{64})$/m.exec(output)?.[1];
    assert.ok(token, `the engine's key is a per-run credential:\n${output.slice(0, 2000)}`);
    assert.match(output, new RegExp(`^HTTPS?_PROXY=http://berth:${token}@`, 'm'), 'the proxy credential is the same per-run one');
    // Positive control: while the run lives, its credential works for a hand-written request.
    assert.match(requireProbeResult(output, 'live'), /^HTTP\/1\.1 200 /);
    deadToken = token;

    // Once the run has answered, its credential is refused, by the model gateway and by the proxy.
    const replay = await fetch(`${t.berth.gateway.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }),
    });
    assert.equal(replay.status, 401, await replay.clone().text());
    const refusal = (await replay.json()) as { type: string; error: { type: string; message: string } };
    assert.equal(refusal.error.type, 'authentication_error');

    // A host process reaches the gateway only from the agent network: on loopback its connection is closed.
    const fromLoopback = await fetch(`http://127.0.0.1:${t.berth.gateway.port}/v1/messages`, { method: 'POST', headers: { 'x-api-key': token }, body: '{}' }).then(
      (response) => `answered ${response.status}`,
      (error: Error) => `refused: ${(error.cause as Error | undefined)?.message ?? error.message}`,
    );
    assert.match(fromLoopback, /^refused/, fromLoopback);
  });

  test('an allowed host answers over HTTP and HTTPS; another host, port or Host header is refused and never contacted', async () => {
    const run = await t.request(
      'POST',
      '/run',
      {
        prompt: [
          probeRun(
            `http allowed-http ${allowedHttp}/page`,
            `http other-http ${outside.url('http', 'other.test')}/page`,
            `http other-port http://allowed.test:${trap.port}/page`,
            `http forged-host ${allowedHttp}/page other.test:${outside.httpPort}`,
            `http no-credential ${allowedHttp}/page allowed.test:${outside.httpPort} -`,
          ),
          `run: git ls-remote ${allowedHttp}/repo.git 2>&1 | sed 's/^/git-http: /'`,
          `run: GIT_SSL_NO_VERIFY=1 git ls-remote ${allowedHttps}/repo.git 2>&1 | sed 's/^/git-https: /'`,
          `run: GIT_SSL_NO_VERIFY=1 git ls-remote ${outside.url('https', 'other.test')}/repo.git 2>&1 | sed 's/^/git-other: /'`,
        ].join('\n'),
        container: { network: { mode: 'allowlist', allow: allowList } },
      },
      as('alice'),
    );
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const output: string = run.body.output;
    assert.match(requireProbeResult(output, 'allowed-http'), new RegExp(`^HTTP/1\\.1 200 .*outside-host http host=allowed\\.test:${outside.httpPort} path=/page`));
    assert.match(output, new RegExp(`^git-http: ${OUTSIDE_COMMIT}\\s+refs/heads/main$`, 'm'), 'git over plain HTTP through the proxy');
    assert.match(output, new RegExp(`^git-https: ${OUTSIDE_COMMIT}\\s+refs/heads/main$`, 'm'), 'git over HTTPS (CONNECT) through the proxy');

    assert.match(requireProbeResult(output, 'other-http'), /^HTTP\/1\.1 403 .*Berth egress proxy: other\.test:\d+ refused/);
    assert.match(requireProbeResult(output, 'other-port'), /^HTTP\/1\.1 403 .*Berth egress proxy: allowed\.test:\d+ refused/);
    assert.match(requireProbeResult(output, 'forged-host'), /^HTTP\/1\.1 4\d\d /);
    assert.match(requireProbeResult(output, 'no-credential'), /^HTTP\/1\.1 407 /);
    assert.doesNotMatch(output, new RegExp(`^git-other: ${OUTSIDE_COMMIT}`, 'm'));
    assert.match(output, /^git-other: .*403/m, 'git shows the proxy\'s refusal');
    assert.deepEqual(outside.seen('other.test'), [], 'other.test was never contacted');
    assert.ok(!outside.serverNames.includes('other.test'));
    assert.ok(outside.serverNames.includes('allowed.test'), 'git\'s TLS reached allowed.test with its name');

    // Every decision is recorded for the caller, and counted.
    const usage = await t.request('GET', `/usage/runs/${run.body.id}`, undefined, as('alice'));
    assert.equal(usage.status, 200, JSON.stringify(usage.body));
    const decisions = (usage.body.egress as { host: string; port: number; decision: string }[]).map((d) => `${d.decision} ${d.host}:${d.port}`);
    assert.ok(decisions.includes(`allowed allowed.test:${outside.httpPort}`), decisions.join(', '));
    assert.ok(decisions.includes(`allowed allowed.test:${outside.httpsPort}`), decisions.join(', '));
    assert.ok(decisions.includes(`refused_host other.test:${outside.httpPort}`), decisions.join(', '));
    assert.ok(decisions.includes(`refused_host other.test:${outside.httpsPort}`), decisions.join(', '));
    assert.ok(decisions.includes(`refused_host allowed.test:${trap.port}`), decisions.join(', '));
    const metrics = await (await fetch(t.berth.metricsUrl)).text();
    assert.ok(series(metrics, 'berth_egress_requests_total{decision="allowed"}') >= 3);
    assert.ok(series(metrics, 'berth_egress_requests_total{decision="refused_host"}') >= 3);
    assert.ok(series(metrics, 'berth_egress_requests_total{decision="refused_credential"}') >= 1);
  });

  test('a tunnel to an allowed host carries only TLS for that name: another server name, none, or plain bytes are cut off', async () => {
    const hello = {
      allowed: (await outside.clientHello('allowed.test')).toString('base64'),
      other: (await outside.clientHello('other.test')).toString('base64'),
      none: (await outside.clientHello(undefined)).toString('base64'),
      plain: Buffer.from(`GET /page HTTP/1.1\r\nHost: other.test\r\n\r\n`).toString('base64'),
    };
    const httpsTarget = `allowed.test:${outside.httpsPort}`;
    const namesBefore = outside.serverNames.length;
    const run = await t.request(
      'POST',
      '/run',
      {
        prompt: probeRun(
          `tunnel sni-match ${httpsTarget} ${hello.allowed}`,
          `tunnel sni-other ${httpsTarget} ${hello.other}`,
          `tunnel sni-none ${httpsTarget} ${hello.none}`,
          `tunnel not-tls allowed.test:${outside.httpPort} ${hello.plain}`,
          `tunnel connect-other other.test:${outside.httpsPort} ${hello.other}`,
        ),
        container: { network: { mode: 'allowlist', allow: allowList } },
      },
      as('alice'),
    );
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const output: string = run.body.output;
    // Positive control: the right name gets the server's first TLS record (a handshake record, 0x16).
    assert.match(requireProbeResult(output, 'sni-match'), /^HTTP\/1\.1 200 .*\| reply=16/);
    for (const label of ['sni-other', 'sni-none', 'not-tls']) {
      assert.match(requireProbeResult(output, label), /reply=none$|^closed$/, `${label}: nothing comes back from the outside host`);
    }
    assert.match(requireProbeResult(output, 'connect-other'), /^HTTP\/1\.1 403 /);
    assert.deepEqual(outside.serverNames.slice(namesBefore), ['allowed.test'], 'only the allowed name reached the TLS server');
    assert.ok(!outside.requests.some((request) => request.host === 'other.test'), 'the plain request through the tunnel never arrived');
    const usage = await t.request('GET', `/usage/runs/${run.body.id}`, undefined, as('alice'));
    const decisions = (usage.body.egress as { decision: string }[]).map((d) => d.decision);
    assert.ok(decisions.includes('refused_sni') && decisions.includes('refused_protocol'), decisions.join(', '));
  });

  test('no way around the proxy: raw TCP and UDP, DNS, the metadata address, the host\'s bridge and Berth\'s own addresses', async () => {
    assert.ok(deadToken, 'the first test left alice\'s spent credential');
    const ownAddress = hostAddress();
    const rawTargets: [label: string, host: string, port: number][] = [
      ['raw-gateway-trap', gatewayHost, trap.port],
      ['raw-gateway-api', gatewayHost, apiPort],
      ['raw-podman-bridge', podmanBridge, trap.port],
      ['raw-metadata', '169.254.169.254', 80],
      ['raw-outside', '1.1.1.1', 443],
      ...(ownAddress ? [['raw-host-address', ownAddress, trap.port] as [string, string, number]] : []),
    ];
    const udpTargets = [gatewayHost, podmanBridge, ...(ownAddress ? [ownAddress] : [])];
    const proxyAuthOfDead = Buffer.from(`berth:${deadToken}`).toString('base64');
    const run = await t.request(
      'POST',
      '/run',
      {
        prompt: [
          probeRun(rawTargets.map(([label, host, port]) => `tcp ${label} ${host} ${port} &`).join(' ') + ' wait'),
          probeRun(
            ...udpTargets.map((host, index) => `udp udp-${index} ${host} ${trap.port}`),
            `dns dns-gateway ${gatewayHost}`,
            `dns dns-podman-bridge ${podmanBridge}`,
            `if getent hosts allowed.test >/dev/null; then echo "resolve ANSWERED"; else echo "resolve silent"; fi`,
          ),
          // Internal destinations the caller listed: only the proxy's address check stands in the way.
          probeRun(
            `http proxy-metadata http://169.254.169.254/latest/meta-data/`,
            `http proxy-localhost http://localhost:${outside.httpPort}/page`,
            `http proxy-loopback-api http://127.0.0.1:${apiPort}/health`,
            `http proxy-gateway-api http://${gatewayHost}:${apiPort}/health`,
            `model dead-model-key ${deadToken}`,
            `http dead-proxy-key ${allowedHttp}/page allowed.test:${outside.httpPort} ${proxyAuthOfDead}`,
          ),
        ].join('\n'),
        container: {
          network: { mode: 'allowlist', allow: ['169.254.169.254', `localhost:${outside.httpPort}`, `127.0.0.1:${apiPort}`, `${gatewayHost}:${apiPort}`, ...allowList] },
        },
      },
      as('bob'),
    );
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const output: string = run.body.output;
    for (const [label] of rawTargets) assert.equal(requireProbeResult(output, label), 'closed', `${label}: no direct connection`);
    for (const label of ['dns-gateway', 'dns-podman-bridge', 'resolve']) assert.equal(requireProbeResult(output, label), 'silent', `${label}: no DNS`);
    for (const label of ['proxy-metadata', 'proxy-localhost', 'proxy-loopback-api', 'proxy-gateway-api']) {
      assert.match(requireProbeResult(output, label), /^HTTP\/1\.1 403 .*Berth egress proxy/, `${label}: refused after resolution`);
    }
    assert.deepEqual(outside.seen('localhost'), [], 'localhost resolved to loopback: never connected');
    assert.match(requireProbeResult(output, 'dead-model-key'), /^HTTP\/1\.1 401 /, 'alice\'s spent credential does not work for bob');
    assert.match(requireProbeResult(output, 'dead-proxy-key'), /^HTTP\/1\.1 407 /);
    const usage = await t.request('GET', `/usage/runs/${run.body.id}`, undefined, as('bob'));
    const refused = (usage.body.egress as { host: string; decision: string }[]).filter((d) => d.decision === 'refused_address').map((d) => d.host);
    for (const host of ['169.254.169.254', 'localhost', '127.0.0.1', gatewayHost]) assert.ok(refused.includes(host), `${host}: refused_address in ${refused.join(', ')}`);
  });

  test('mode none: the proxy admits no host, the model still answers', async () => {
    const seenBefore = outside.seen('allowed.test').length;
    const hello = (await outside.clientHello('allowed.test')).toString('base64');
    const run = await t.request(
      'POST',
      '/run',
      {
        prompt: [probeRun(`http none-http ${allowedHttp}/page`, `tunnel none-tls allowed.test:${outside.httpsPort} ${hello}`), 'say: model reached'].join('\n'),
        container: { network: { mode: 'none' } },
      },
      as('bob'),
    );
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const output: string = run.body.output;
    assert.match(output, /model reached/);
    assert.match(requireProbeResult(output, 'none-http'), /^HTTP\/1\.1 403 .*Berth egress proxy/);
    assert.match(requireProbeResult(output, 'none-tls'), /^HTTP\/1\.1 403 /);
    assert.equal(outside.seen('allowed.test').length, seenBefore);
  });

  test('lifecycle hooks go through the same proxy: an allowed host serves them, another host stops the run', async () => {
    const hook = (url: string) => ({ post_start: ['bash', '-c', `git ls-remote ${url}/hook.git`] });
    const network = { mode: 'allowlist', allow: allowList };
    const allowed = await t.request('POST', '/run', { prompt: 'say: hooked', container: { network, lifecycle: hook(allowedHttp) } }, as('alice'));
    assert.equal(allowed.status, 200, JSON.stringify(allowed.body));
    assert.ok(outside.requests.some((request) => request.path.startsWith('/hook.git/') && request.host.startsWith('allowed.test')), 'the hook reached allowed.test');
    const refused = await t.request('POST', '/run', { prompt: 'say: hooked', container: { network, lifecycle: hook(outside.url('http', 'other.test')) } }, as('alice'));
    assert.equal(refused.status, 500, JSON.stringify(refused.body));
    assert.match(refused.body.error, /container\.lifecycle: [\s\S]*403/);
    assert.deepEqual(outside.seen('other.test'), []);
  });
});
