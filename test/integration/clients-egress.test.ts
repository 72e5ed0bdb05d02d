// The clients on issue 25's egress policy and usage records, against a real Berth (Podman, the engine, the
// offline model behind the gateway, local servers standing for outside hosts):
//  - `berth run --allow HOST` and `--network none` reach the run's egress proxy as its policy: the allowed
//    host answers, another is refused, none refuses everything;
//  - `berth usage` and `berth usage --run` print what the gateway and the proxy recorded;
//  - the attack: code in a container chooses text that lands in its egress records (a Host header with a C1
//    control character and HTML, a TLS server name with HTML). `berth usage --run` shows the control
//    character instead of sending it to the terminal, and the web console shows the HTML as text: no element
//    is made from it, nothing runs.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { Berth, type EgressDecisionRecord } from '../../packages/client/src/index.js';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { probeResult, probeRun, startOutsideHosts, type OutsideHosts } from '../support/outside-hosts.js';

const exec = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
const BERTH = join(REPO, 'node_modules/.bin/berth');
const SCREENSHOTS = join(REPO, 'test', 'output', 'console');
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const WAIT = { timeout: 60_000 };

/** Markup a container puts in its records: the console must show it as these characters. */
const MARKUP = '<img/src=x/onerror=window.__pwned=1>';
/** Any character a terminal acts on (C0 but newline and tab, DEL, C1). */
const ACTED_ON = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;

describe('the clients on egress policy and usage', { timeout: 240_000 }, () => {
  let outside: OutsideHosts;
  let t: TestBerth;
  let sdk: Berth;
  let dir: string;
  let context: BrowserContext;
  let page: Page;
  const pageErrors: string[] = [];
  /** The run whose container wrote hostile text into its egress records. */
  let hostileRun: string;

  /** Runs berth with pipes for stdout and stderr; answers what it wrote, decoded as UTF-8. */
  function berth(...args: string[]): Promise<{ stdout: string; stderr: string; code: number | null }> {
    return new Promise((done, fail) => {
      const child = spawn(BERTH, args, { cwd: REPO, env: { ...process.env, BERTH_URL: t.url, BERTH_CONFIG_DIR: join(dir, 'config'), NO_COLOR: '1' } });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
      child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
      child.on('error', fail);
      child.on('close', (code) => done({ stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), code }));
    });
  }

  /** `berth run --json ARGS PROMPT`: the answer. */
  async function cliRun(args: string[], prompt: string): Promise<{ id: string; output: string }> {
    const { stdout, stderr, code } = await berth('run', '--json', ...args, prompt);
    assert.equal(code, 0, stderr);
    return JSON.parse(stdout) as { id: string; output: string };
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'berth-test-clients-egress-'));
    outside = await startOutsideHosts(['allowed.test', 'other.test']);
    t = await startTestBerth({ SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' }, { egressHosts: outside.addresses });
    sdk = new Berth({ url: t.url });
    // The console under test is built from the sources as they are now.
    await exec('npm', ['run', 'build', '-w', '@berth/console'], { cwd: REPO });
    await mkdir(SCREENSHOTS, { recursive: true });
    context = await chromium.launchPersistentContext(join(dir, 'chromium'), { executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
    page = context.pages()[0] ?? (await context.newPage());
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text());
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
  });

  after(async () => {
    await context?.close();
    await t?.stop();
    await outside?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('berth run --allow HOST lets the run reach that host only; --network none no host', async () => {
    const allowed = `allowed.test:${outside.httpPort}`;
    const probes = probeRun(`http allowed ${outside.url('http', 'allowed.test')}/a`, `http other ${outside.url('http', 'other.test')}/b`);
    const listed = await cliRun(['--allow', allowed], probes);
    assert.match(probeResult(listed.output, 'allowed') ?? '', /^HTTP\/1\.1 200 .*outside-host http host=allowed\.test/, listed.output);
    assert.match(probeResult(listed.output, 'other') ?? '', /^HTTP\/1\.1 403 .*Berth egress proxy: other\.test:\d+ refused/, listed.output);
    assert.equal(outside.seen('other.test').length, 0, 'the refused host was never contacted');
    const decisions = (await sdk.usage.run(listed.id)).egress.map((d) => [d.host, d.decision]);
    assert.deepEqual(decisions, [['allowed.test', 'allowed'], ['other.test', 'refused_host']]);

    const none = await cliRun(['--network', 'none'], probeRun(`http allowed ${outside.url('http', 'allowed.test')}/c`));
    assert.match(probeResult(none.output, 'allowed') ?? '', /^HTTP\/1\.1 403 /, none.output);
    assert.deepEqual((await sdk.usage.run(none.id)).egress.map((d) => [d.host, d.decision]), [['allowed.test', 'refused_mode']]);
    assert.equal(outside.seen('allowed.test').filter((r) => r.path === '/c').length, 0);
  });

  it('a streamed run takes the policy too: berth run --allow streams (GET /run/stream?allow=…), a bad host is a 400 naming it', async () => {
    const allowed = `allowed.test:${outside.httpPort}`;
    const probes = probeRun(`http allowed ${outside.url('http', 'allowed.test')}/streamed`, `http other ${outside.url('http', 'other.test')}/streamed`);
    // Without --json the CLI streams: the policy must travel with the stream, not make it fall back to POST /run.
    const streamed = await berth('run', '--allow', allowed, probes);
    assert.equal(streamed.code, 0, streamed.stderr);
    assert.match(probeResult(streamed.stdout, 'allowed') ?? '', /^HTTP\/1\.1 200 /, streamed.stdout);
    assert.match(probeResult(streamed.stdout, 'other') ?? '', /^HTTP\/1\.1 403 /, streamed.stdout);
    assert.equal(outside.seen('allowed.test').filter((r) => r.path === '/streamed').length, 1);
    assert.equal(outside.seen('other.test').length, 0);

    const none = await t.request('GET', `/run/stream?${new URLSearchParams({ prompt: probeRun(`http allowed ${outside.url('http', 'allowed.test')}/streamed-none`), network: 'none' })}`);
    assert.equal(none.status, 200);
    assert.match(String(none.body), /allowed HTTP\/1\.1 403 /, 'network=none refuses the host');
    assert.equal(outside.seen('allowed.test').filter((r) => r.path === '/streamed-none').length, 0);

    const bad = await t.request('GET', `/run/stream?${new URLSearchParams({ prompt: 'say: hi', allow: 'pypi.org,http://x/y' })}`);
    assert.equal(bad.status, 400, JSON.stringify(bad.body));
    assert.deepEqual(Object.keys(bad.body).sort(), ['error', 'status']);
    assert.match(bad.body.error, /container\.network\.allow\[1\]/);
    const mode = await t.request('GET', `/run/stream?${new URLSearchParams({ prompt: 'say: hi', network: 'everything' })}`);
    assert.equal(mode.status, 400, JSON.stringify(mode.body));
    assert.match(mode.body.error, /network/);
  });

  it('berth agents spawn --allow HOST: the agent reaches that host only; other container options are refused', async () => {
    const probes = probeRun(`http allowed ${outside.url('http', 'allowed.test')}/agent`, `http other ${outside.url('http', 'other.test')}/agent`);
    const spawned = await berth('--output', 'json', 'agents', 'spawn', '--allow', `allowed.test:${outside.httpPort}`, '--prompt', probes);
    assert.equal(spawned.code, 0, spawned.stderr);
    const agent = JSON.parse(spawned.stdout) as { id: string };
    try {
      const deadline = Date.now() + 90_000;
      while ((await sdk.agents.get(agent.id)).turns_completed < 1) {
        assert.ok(Date.now() < deadline, 'the agent finished its first turn');
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      const run = (await sdk.usage.get()).runs.find((r) => r.agent_id === agent.id);
      assert.ok(run, 'the agent\'s usage is listed with its id');
      assert.deepEqual((await sdk.usage.run(run.run_id)).egress.map((d) => [d.host, d.decision]), [['allowed.test', 'allowed'], ['other.test', 'refused_host']]);
      assert.equal(outside.seen('allowed.test').filter((r) => r.path === '/agent').length, 1);
    } finally {
      await sdk.agents.delete(agent.id);
    }
    const refused = await t.request('POST', '/agents', { container: { memory: '1g' } });
    assert.equal(refused.status, 400, JSON.stringify(refused.body));
    assert.match(refused.body.error, /container/);
  });

  it("a container's hostile text reaches its egress records (the attack is real)", async () => {
    const hello = (await outside.clientHello(`${MARKUP}.test`)).toString('base64');
    // The Host header's byte 0x9b is the one-character CSI (C1) once read; the SNI carries markup.
    const probes = probeRun(
      `http host-header ${outside.url('http', 'allowed.test')}/ "x${MARKUP}"$'\\x9b'"2Jy"`,
      `tunnel sni allowed.test:${outside.httpsPort} ${hello}`,
    );
    const answer = await sdk.run({ prompt: probes, container: { network: { allow: [`allowed.test:${outside.httpPort}`, `allowed.test:${outside.httpsPort}`] } } });
    hostileRun = answer.id;
    const egress: EgressDecisionRecord[] = (await sdk.usage.run(hostileRun)).egress;
    const reasons = egress.map((d) => `${d.decision}: ${d.reason ?? ''}`).join('\n');
    assert.ok(egress.some((d) => d.decision === 'refused_host' && d.reason?.includes('\u009b')), `a C1 control character is in a reason:\n${reasons}\n${answer.output}`);
    assert.ok(egress.some((d) => d.decision === 'refused_sni' && d.reason?.includes(MARKUP)), `markup is in a reason:\n${reasons}\n${answer.output}`);
  });

  it('berth usage --run shows those control characters instead of obeying them; berth usage lists the runs', async () => {
    const run = await berth('usage', '--run', hostileRun);
    assert.equal(run.code, 0, run.stderr);
    assert.ok(!ACTED_ON.test(run.stdout), `nothing a terminal acts on: ${JSON.stringify(run.stdout)}`);
    assert.match(run.stdout, /\\u009b2Jy/, 'the C1 character is shown in its visible form');
    assert.ok(run.stdout.includes(MARKUP), 'the markup is printed as the characters it is');
    assert.match(run.stdout, /^run: +run-/m);
    assert.match(run.stdout, /^Egress\nAT +METHOD +HOST +DECISION +REASON$/m);
    assert.match(run.stdout, / HTTP +allowed\.test:\d+ +refused_host /);
    assert.match(run.stdout, / CONNECT +allowed\.test:\d+ +refused_sni /);

    const report = await sdk.usage.get();
    const all = await berth('usage');
    assert.equal(all.code, 0, all.stderr);
    assert.ok(!ACTED_ON.test(all.stdout));
    assert.match(all.stdout, new RegExp(`^total +${report.total.requests} `, 'm'), all.stdout);
    for (const listed of report.runs) assert.match(all.stdout, new RegExp(`^${listed.run_id} `, 'm'));
    assert.ok(report.runs.some((r) => r.run_id === hostileRun));

    const json = await berth('--output', 'json', 'usage', '--run', hostileRun);
    assert.deepEqual(JSON.parse(json.stdout), await sdk.usage.run(hostileRun), 'json is the answer, exactly');
  });

  it("the console's Usage page opens the run, whose egress decisions show the markup as text", async () => {
    await page.goto(`${t.url}/console/usage`);
    await page.getByRole('heading', { level: 1, name: 'Usage' }).waitFor(WAIT);
    await page.getByRole('heading', { name: 'By run' }).waitFor(WAIT);
    await page.getByRole('link', { name: hostileRun }).click();
    await page.getByRole('heading', { level: 1, name: `Run ${hostileRun}` }).waitFor(WAIT);
    const egress = page.locator('section[aria-labelledby="run-egress"]');
    await egress.getByRole('table').waitFor(WAIT);
    await page.screenshot({ path: join(SCREENSHOTS, 'usage-run.png'), fullPage: true });

    const text = await egress.innerText();
    assert.ok(text.includes(MARKUP), `the markup is shown as text: ${text}`);
    assert.match(text, /refused: TLS name mismatch/);
    assert.match(text, /refused: host not allowed/);
    assert.equal(await page.locator('main img').count(), 0, 'no element was made from the markup');
    assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: unknown }).__pwned), undefined);
    assert.deepEqual(pageErrors, []);
  });
});
