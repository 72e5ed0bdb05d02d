// The web console in a real headless Chromium against a real Berth with authentication on: sign in with
// the API token, chat with a persistent agent over SSE, follow a job to its end, stream a run, page through
// a transcript, read images and health. No request may leave Berth's origin and the page may log no
// error. A screenshot of every page is saved to test/output/console/.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { startTestBerth, type TestBerth } from '../support/berth.js';

const exec = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..', '..');
const SCREENSHOTS = join(ROOT, 'test', 'output', 'console');
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const API_TOKEN = randomBytes(24).toString('hex');
/** Transcripts are read a page at a time; a small server page size shows "Load more" on a short session. */
const MAX_PAGE = 3;
const WAIT = { timeout: 60_000 };

let t: TestBerth;
let userDataDir: string;
let context: BrowserContext;
let page: Page;
const foreignRequests: string[] = [];
const pageErrors: string[] = [];

before(async () => {
  // The console under test is built from the sources as they are now.
  await exec('npm', ['run', 'build', '-w', '@berth/console'], { cwd: ROOT });
  await mkdir(SCREENSHOTS, { recursive: true });
  userDataDir = await mkdtemp(join(tmpdir(), 'console-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, { executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('request', (request) => {
    const url = request.url();
    if (url === 'about:blank') return; // the test's own navigation between servers
    if (t === undefined || new URL(url).origin !== new URL(t.url).origin) foreignRequests.push(url);
  });
  page.on('console', (message) => {
    if (message.type() === 'error') pageErrors.push(`${message.text()} (${message.location().url})`);
  });
  page.on('pageerror', (error) => pageErrors.push(error.message));
});

after(async () => {
  await context?.close();
  await t?.stop();
  if (userDataDir) await rm(userDataDir, { recursive: true, force: true });
});

const shoot = (name: string) => page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
const heading = () => page.getByRole('heading', { level: 1 });
const nav = (name: string) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name });

/** Berth's API with the console's own access token, for checks the page cannot show. */
async function api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const tokens = JSON.parse((await page.evaluate(() => sessionStorage.getItem('berth.console.tokens'))) ?? '{}') as { access_token?: string };
  return t.request(method, path, body, { authorization: `Bearer ${tokens.access_token}`, ...headers });
}

/** Clicks `button` and answers the text of the file the browser saved. */
async function downloaded(button: ReturnType<Page['getByRole']>): Promise<{ name: string; bytes: Buffer }> {
  const [download] = await Promise.all([page.waitForEvent('download', WAIT), button.click()]);
  return { name: download.suggestedFilename(), bytes: await readFile((await download.path())!) };
}

describe('the web console in headless Chromium, on a Berth with authentication', () => {
  before(async () => {
    t = await startTestBerth({
      SERVICE_AUTH_ENABLED: 'true',
      SERVICE_JWT_SECRET: randomBytes(32).toString('hex'),
      SERVICE_API_TOKENS: `ada:${API_TOKEN}`,
      SERVICE_SESSIONS_MAX_PAGE_SIZE: String(MAX_PAGE),
    });
  });
  after(async () => {
    // The page stops polling before its Berth goes away (a refused request is an error in the page's console).
    await page.goto('about:blank');
    try {
      // The agent was deleted from its page; the job and the streamed run have ended.
      assert.deepEqual(await t.leftovers(), []);
    } finally {
      await t.stop();
    }
  });

  it('serves the sign-in page without a token and signs in with the API token, keeping only access and refresh tokens in the tab', async () => {
    await page.goto(`${t.url}/console`);
    await heading().filter({ hasText: 'Sign in' }).waitFor(WAIT);
    await page.getByLabel('API token or access token').fill(API_TOKEN);
    await shoot('sign-in');
    await page.getByRole('button', { name: 'Sign in' }).click();
    // The name of the API token, not the console's client_id: every API token is an owner of its own.
    await page.getByText('Signed in as ada').waitFor(WAIT);
    await heading().filter({ hasText: 'Runs & jobs' }).waitFor(WAIT);
    assert.equal(new URL(page.url()).pathname, '/console/jobs');
    const stored = await page.evaluate(() => JSON.stringify(sessionStorage));
    assert.match(stored, /access_token/);
    assert.match(stored, /refresh_token/);
    assert.doesNotMatch(stored, new RegExp(API_TOKEN));
    assert.equal(await page.evaluate(() => localStorage.length), 0);
  });

  it('spawns an agent and chats with it: turns stream in over SSE and the agent remembers the first prompt', async () => {
    await nav('Agents').click();
    await heading().filter({ hasText: 'Agents' }).waitFor(WAIT);
    await shoot('agents');
    await page.getByRole('button', { name: 'Spawn agent' }).click();
    await page.waitForURL(/\/console\/agents\/agent-/, WAIT);
    const agentId = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);

    const send = page.getByRole('button', { name: 'Send' });
    const message = page.getByLabel('Message');
    const log = page.getByTestId('chat-log');
    await message.fill('say: hello console');
    await page.waitForFunction(() => !(document.querySelector('.message-box button[type=submit]') as HTMLButtonElement).disabled, undefined, WAIT);
    await send.click();
    await log.locator('.turn[data-status=done] .message-assistant .content', { hasText: 'hello console' }).waitFor(WAIT);
    assert.equal(await log.locator('.turn').count(), 1);
    assert.equal(await log.locator('.message-user .content').first().textContent(), 'say: hello console');

    await message.fill('recall:');
    await page.waitForFunction(() => !(document.querySelector('.message-box button[type=submit]') as HTMLButtonElement).disabled, undefined, WAIT);
    await send.click();
    const second = log.locator('.turn').nth(1);
    await second.locator('.message-assistant .content', { hasText: 'say: hello console' }).waitFor(WAIT);
    await log.locator('.turn[data-status=done]').nth(1).waitFor(WAIT);
    // The snapshot follows the turns.
    await page.getByRole('status').filter({ hasText: 'idle' }).waitFor(WAIT);
    await page.locator('.facts dd').first().filter({ hasText: '2' }).waitFor(WAIT);
    await shoot('agent');

    const snapshot = await api('GET', `/agents/${agentId}`);
    assert.equal(snapshot.status, 200);
    assert.equal(snapshot.body.turns_completed, 2);

    await page.getByRole('button', { name: 'Delete agent' }).click();
    await page.waitForURL(/\/console\/agents$/, WAIT);
    const deleted = await api('GET', `/agents/${agentId}`);
    assert.ok(deleted.status === 404 || deleted.body.status === 'exited', JSON.stringify(deleted.body));
  });

  let sessionId = '';

  it('starts a job and follows it on its page from running to completed, with its output', async () => {
    await nav('Runs & jobs').click();
    await heading().filter({ hasText: 'Runs & jobs' }).waitFor(WAIT);
    await page.getByLabel('Prompt').fill('slow: 300\nrun: echo from-the-job\nsay: watched by the console');
    await page.getByLabel('Queue as an async job').check();
    await page.getByRole('button', { name: 'Start job' }).click();
    await page.waitForURL(/\/console\/jobs\/job-/, WAIT);
    const jobId = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);

    const status = page.locator('.job-status');
    await status.filter({ hasText: /pending|running/ }).waitFor(WAIT);
    await shoot('job-running');
    await status.filter({ hasText: 'completed' }).waitFor(WAIT);
    const output = await page.getByTestId('job-output').textContent();
    assert.match(output ?? '', /watched by the console/);
    const job = await api('GET', `/jobs/${jobId}`);
    assert.equal(job.body.status, 'completed');
    assert.equal(job.body.output, output);
    sessionId = job.body.session_id;
    await shoot('job');

    await page.getByRole('link', { name: '← All jobs' }).click();
    await page.getByRole('row').filter({ hasText: jobId }).filter({ hasText: 'completed' }).waitFor(WAIT);
    await shoot('jobs');
  });

  it('streams a run into the page as it is answered', async () => {
    await page.getByLabel('Prompt').fill('slow: 200\nsay: streamed into the page');
    await page.getByLabel('Stream the answer here').check();
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await page.getByTestId('stream-output').filter({ hasText: 'streamed into the page' }).waitFor(WAIT);
    await page.getByText(/Run run-\S+ completed/).waitFor(WAIT);
    await shoot('run-stream');
  });

  it('lists sessions with titles and pages through a transcript with "Load more"', async () => {
    await nav('Sessions').click();
    await heading().filter({ hasText: 'Sessions' }).waitFor(WAIT);
    const link = page.locator(`a[href="/console/sessions/${sessionId}"]`);
    await link.waitFor(WAIT);
    assert.match((await link.textContent()) ?? '', /slow: 300/);
    await shoot('sessions');

    await link.click();
    await heading().filter({ hasText: 'Session' }).waitFor(WAIT);
    const messages = page.locator('.transcript > li');
    await page.getByText(`Showing ${MAX_PAGE} of 4.`).waitFor(WAIT);
    assert.equal(await messages.count(), MAX_PAGE);
    assert.match((await messages.first().textContent()) ?? '', /slow: 300/);
    await page.getByRole('button', { name: 'Load more' }).click();
    await page.getByText('Showing 4 of 4.').waitFor(WAIT);
    assert.match((await messages.last().textContent()) ?? '', /watched by the console/);
    assert.equal(await page.getByRole('button', { name: 'Load more' }).count(), 0);
    await shoot('session');
  });

  it('shows images with their compatibility ranks, and one image in detail', async () => {
    await nav('Images').click();
    await heading().filter({ hasText: 'Images' }).waitFor(WAIT);
    const agentImage = t.config.agent.image;
    const row = page.getByRole('row').filter({ hasText: agentImage });
    await row.waitFor(WAIT);
    assert.match((await row.textContent()) ?? '', /1 official agent image/);
    await shoot('images');
    await row.getByRole('link').click();
    await heading().filter({ hasText: agentImage }).waitFor(WAIT);
    await page.getByText('official agent image').waitFor(WAIT);
    await shoot('image');
  });

  it('shows health, version and the engine status', async () => {
    await nav('Health').click();
    await heading().filter({ hasText: 'Health' }).waitFor(WAIT);
    await page.getByRole('status').filter({ hasText: /Berth is (ok|degraded)/ }).waitFor(WAIT);
    await page.getByText('container-runtime').waitFor(WAIT);
    await page.getByText(/offline model/i).first().waitFor(WAIT);
    await page.getByText(t.config.version, { exact: true }).first().waitFor(WAIT);
    await shoot('health');
  });

  it("browses a session's workspace and a workspace's files: folders, a text file opened read-only, downloads", async () => {
    const created = await api('POST', '/workspaces', {});
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id: string = created.body.id;
    const tokens = JSON.parse((await page.evaluate(() => sessionStorage.getItem('berth.console.tokens'))) ?? '{}') as { access_token?: string };
    const put = async (path: string, body: string | Buffer) => {
      const answer = await fetch(`${t.url}/workspaces/${id}/files/${encodeURIComponent(path)}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${tokens.access_token}`, 'content-type': 'application/octet-stream' },
        body: typeof body === 'string' ? body : new Uint8Array(body),
      });
      assert.equal(answer.status, 201, await answer.text());
    };
    await put('src/app.js', 'console.log("from the workspace");\n');
    await put('README.md', '# notes\n');
    await put('blob.bin', Buffer.from([0, 1, 2, 0, 255]));
    // A name that is markup: shown as text, never rendered.
    await put('<img src=x onerror=alert(1)>.txt', 'x');
    const run = await api('POST', '/run', { prompt: 'run: echo written by a run > from-run.txt', workspace: id });
    assert.equal(run.body.status, 'completed', JSON.stringify(run.body));

    // The run's session shows its workspace, with what the run wrote.
    await page.goto(`${t.url}/console/sessions/${run.body.session_id}`);
    await page.getByRole('region', { name: 'Files' }).getByRole('link', { name: 'from-run.txt' }).waitFor(WAIT);
    await shoot('session-workspace');

    await nav('Workspaces').click();
    await heading().filter({ hasText: 'Workspaces' }).waitFor(WAIT);
    await page.getByRole('link', { name: id }).click();
    await heading().filter({ hasText: `Workspace ${id.slice(0, 8)}` }).waitFor(WAIT);
    const files = page.getByRole('region', { name: 'Files' });
    await files.getByRole('link', { name: 'src/' }).waitFor(WAIT);
    assert.equal(await files.getByText('<img src=x onerror=alert(1)>.txt').count(), 1, 'the name is text');
    assert.equal(await page.locator('img[src=x]').count(), 0, 'and no element');
    await files.getByRole('link', { name: 'src/' }).click();
    await page.waitForURL(/\?path=src$/, WAIT);
    await files.getByRole('link', { name: 'app.js' }).click();
    await page.getByTestId('file-text').filter({ hasText: 'console.log("from the workspace");' }).waitFor(WAIT);
    await shoot('workspace-file');
    const file = await downloaded(page.getByRole('button', { name: 'Download file' }));
    assert.deepEqual([file.name, file.bytes.toString()], ['app.js', 'console.log("from the workspace");\n']);

    // Back at the root: a binary file is offered as a download, not shown; the whole tree as tar.gz.
    await files.getByRole('navigation', { name: 'Folder' }).getByRole('link', { name: 'workspace' }).click();
    await files.getByRole('link', { name: 'blob.bin' }).click();
    await page.getByText('A binary file: download it to open it.').waitFor(WAIT);
    assert.deepEqual([...(await downloaded(page.getByRole('button', { name: 'Download blob.bin' }))).bytes], [0, 1, 2, 0, 255]);
    const tree = await downloaded(page.getByRole('button', { name: 'Download all (tar.gz)' }));
    assert.match(tree.name, /\.tar\.gz$/);
    const tar = gunzipSync(tree.bytes).toString('latin1');
    for (const name of ['src/app.js', 'README.md', 'blob.bin', 'from-run.txt']) assert.ok(tar.includes(name), `${name} is in the archive`);
    await shoot('workspace');
    assert.equal((await api('DELETE', `/workspaces/${id}`)).status < 300, true);
  });

  it('signs out: the tokens leave the tab and the sign-in page is shown again', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await heading().filter({ hasText: 'Sign in' }).waitFor(WAIT);
    assert.equal(await page.evaluate(() => sessionStorage.getItem('berth.console.tokens')), null);
  });

});

describe('the web console on a Berth without authentication', () => {
  before(async () => {
    t = await startTestBerth();
  });
  after(async () => {
    await page.goto('about:blank');
    await t.stop();
  });

  it('opens without asking for a token', async () => {
    await page.goto(`${t.url}/console/health`);
    await heading().filter({ hasText: 'Health' }).waitFor(WAIT);
    await page.getByText('No sign-in needed').waitFor(WAIT);
    await page.getByRole('status').filter({ hasText: /Berth is (ok|degraded)/ }).waitFor(WAIT);
    assert.equal(await page.getByRole('button', { name: 'Sign out' }).count(), 0);
    await nav('Runs & jobs').click();
    await heading().filter({ hasText: 'Runs & jobs' }).waitFor(WAIT);
    await page.getByText('No jobs yet').waitFor(WAIT);
  });
});

// Last: over every page the tests above opened.
describe('every page of the console', () => {
  it('made no request outside Berth\'s origin and logged no error', () => {
    assert.deepEqual(foreignRequests, []);
    assert.deepEqual(pageErrors, []);
  });
});
