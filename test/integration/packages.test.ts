// The packages a user installs and Berth compiled (issue 27), as someone outside this repository meets them:
// `npm pack` of @berth/client, @berth/mcp and @berth/cli (their prepack builds them), the SDK installed from
// its tarball into an empty project and used by a five-line ESM script with plain node, its types under
// moduleResolution node16 and bundler, a Vite browser bundle of it without Node built-ins, the CLI
// installed globally from its tarball (with the SDK's and the MCP tools') with no tsx anywhere, serving
// Berth's tools over stdio (`berth mcp`) to the official MCP client, and the compiled server (node dist/main.js,
// started with the test environment and authentication on) answering the README's curl. All of it is
// built in a temporary copy of the sources, never in this checkout (other tests read its dist/), with
// npm's cache in that directory too (the registry is used, ~/.npm is not).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdir, mkdtemp, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { BERTH_TOOL_NAMES } from '@berth/mcp';
import { containersOf, removeAgentNetworkOf, testEnvironment } from '../support/berth.js';
import { removeTestDir } from '../support/test-dir.js';
import { waitFor } from '../support/wait.js';

const execFileAsync = promisify(execFile);
const REPO = resolve(import.meta.dirname, '..', '..');
const README_MARKER = '<!-- newcomer-test: runs this block verbatim -->';
const TYPESCRIPT = JSON.parse(await readFile(join(REPO, 'node_modules', 'typescript', 'package.json'), 'utf8')).version as string;

interface Ran {
  readonly stdout: string;
  readonly stderr: string;
  readonly code: number;
}

/** Runs a command; answers its output and exit code (never throws for a non-zero exit). */
async function run(command: string, args: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv; input?: string; timeoutMs?: number }): Promise<Ran> {
  return new Promise((done, fail) => {
    const child = execFile(command, args, { cwd: options.cwd, env: options.env, timeout: options.timeoutMs ?? 120_000, maxBuffer: 32 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      if (error && typeof error.code !== 'number') fail(new Error(`${command} ${args.join(' ')}: ${error.message}\n${stderr}`));
      else done({ stdout, stderr, code });
    });
    // A command that exits before reading its input (a bin that cannot start) must fail on its own output.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(options.input ?? '');
  });
}

/** Like run, and fails with the command's output unless it exited 0. */
async function succeed(command: string, args: readonly string[], options: Parameters<typeof run>[2]): Promise<Ran> {
  const ran = await run(command, args, options);
  assert.equal(ran.code, 0, `${command} ${args.join(' ')} exited ${ran.code}:\n${ran.stdout}\n${ran.stderr}`);
  return ran;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  await new Promise((done) => server.close(done));
  return port;
}

/**
 * The environment of a user's shell: nothing of Berth's, nothing npm or the test runner set for this process
 * (its NODE_OPTIONS, npm_* of an `npm test`). The machine's own settings stay (NODE_EXTRA_CA_CERTS: a TLS
 * proxy's certificate authority in front of the registry).
 */
function plainEnvironment(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!/^(npm_|SERVICE_|BERTH_)/.test(name) && !['NODE_OPTIONS', 'NODE_PATH', 'NODE_TEST_CONTEXT'].includes(name)) env[name] = value;
  }
  return { ...env, ...extra };
}

/**
 * A copy of what the builds read (the sources, the build configuration, the packages' files) under `root`,
 * with a node_modules of links to this checkout's, but @berth/* linked to the copy's packages: a build there
 * never writes into the checkout.
 */
async function copySources(root: string): Promise<void> {
  const skip = (source: string) => !/\/(node_modules|dist)(\/|$)/.test(source.slice(REPO.length));
  for (const path of ['src', 'tsconfig.json', 'tsconfig.build.json', 'scripts/copy-server-assets.mjs', 'scripts/containers.conf', 'packages/client', 'packages/mcp', 'packages/cli']) {
    await cp(join(REPO, path), join(root, path), { recursive: true, filter: skip });
  }
  // Without workspaces: the copy holds three of them (the console is not built here).
  const manifest = JSON.parse(await readFile(join(REPO, 'package.json'), 'utf8')) as Record<string, unknown>;
  delete manifest.workspaces;
  await writeFile(join(root, 'package.json'), JSON.stringify(manifest, null, 2));
  await mkdir(join(root, 'node_modules', '@berth'), { recursive: true });
  for (const entry of await readdir(join(REPO, 'node_modules'))) {
    if (entry !== '@berth') await symlink(join(REPO, 'node_modules', entry), join(root, 'node_modules', entry));
  }
  for (const name of ['client', 'mcp', 'cli']) await symlink(join(root, 'packages', name), join(root, 'node_modules', '@berth', name));
  await mkdir(join(root, 'packages', 'console'), { recursive: true });
  await symlink(join(REPO, 'packages', 'console', 'dist'), join(root, 'packages', 'console', 'dist'));
}

/** The file names in a tarball, without npm's `package/` prefix. */
async function tarballFiles(tarball: string): Promise<string[]> {
  const { stdout } = await execFileAsync('tar', ['-tzf', tarball]);
  return stdout.split('\n').filter(Boolean).map((line) => line.replace(/^package\//, ''));
}

describe('packages and the compiled server (issue 27)', { concurrency: false }, () => {
  let root: string;
  let copy: string;
  let npmEnv: NodeJS.ProcessEnv;
  let clientTarball: string;
  let mcpTarball: string;
  let cliTarball: string;
  let server: ChildProcess | undefined;
  let serverOutput = '';
  let url: string;
  let apiToken: string;
  let instance: string;
  let dataDir: string;
  let project: string;
  let prefix: string;
  const timings: string[] = [];
  const timed = async <T>(what: string, work: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    try {
      return await work();
    } finally {
      timings.push(`${what} ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
  };

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'berth-test-packages-'));
    copy = join(root, 'repo');
    project = join(root, 'project');
    prefix = join(root, 'global');
    // npm's global configuration lives under its prefix: `npm i -g --prefix <tmp>` would look for it in
    // <tmp>/etc and lose the machine's (its cafile, say). It is named explicitly.
    const { stdout: globalConfig } = await execFileAsync('npm', ['config', 'get', 'globalconfig'], { env: plainEnvironment() });
    npmEnv = plainEnvironment({
      npm_config_globalconfig: globalConfig.trim(),
      npm_config_cache: join(root, 'npm-cache'),
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
      // Its requests and their times, in the output a failed install shows.
      npm_config_loglevel: 'http',
    });
    await timed('copy of the sources', () => copySources(copy));
    await timed('npm pack of @berth/client, @berth/mcp and @berth/cli (prepack builds)', async () => {
      const packed = async (name: string) => {
        const { stdout } = await succeed('npm', ['pack', '--pack-destination', root], { cwd: join(copy, 'packages', name), env: npmEnv, timeoutMs: 240_000 });
        return join(root, stdout.trim().split('\n').at(-1)!);
      };
      clientTarball = await packed('client');
      mcpTarball = await packed('mcp');
      cliTarball = await packed('cli');
    });
    // The installs wait on the registry, the server's build on the CPU: side by side.
    await Promise.all([startCompiledServer(), installProject(), installGlobally()]);
  });

  /** The server's part of `npm run build` (after the packages': its /mcp imports @berth/mcp), then its start. */
  async function startCompiledServer(): Promise<void> {
    await timed('server build (tsc -p tsconfig.build.json, assets)', async () => {
      await succeed(process.execPath, [join(copy, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: copy, env: npmEnv, timeoutMs: 240_000 });
      await succeed(process.execPath, ['scripts/copy-server-assets.mjs'], { cwd: copy, env: npmEnv });
    });
    // With the test environment and authentication on (the README's curl signs in).
    instance = `test-${randomBytes(4).toString('hex')}`;
    dataDir = join(root, 'berth');
    apiToken = `berth-packages-${randomBytes(16).toString('hex')}`;
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    await timed('compiled server start', async () => {
      const child = (server = spawn(process.execPath, [join(copy, 'dist', 'main.js')], {
        cwd: copy,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
        env: plainEnvironment({
          CONTAINERS_CONF: join(REPO, 'scripts', 'containers.conf'),
          ...testEnvironment(dataDir, instance, port),
          SERVICE_AUTH_ENABLED: 'true',
          SERVICE_JWT_SECRET: randomBytes(32).toString('hex'),
          SERVICE_API_TOKENS: apiToken,
        }),
      }));
      child.stdout!.on('data', (chunk: Buffer) => (serverOutput = (serverOutput + chunk.toString()).slice(-20_000)));
      child.stderr!.on('data', (chunk: Buffer) => (serverOutput = (serverOutput + chunk.toString()).slice(-20_000)));
      await waitFor('the compiled server to answer', async () => {
        if (child.exitCode !== null) throw new Error(`the compiled server exited with ${child.exitCode}: ${serverOutput}`);
        return (await fetch(`${url}/health`)).ok || undefined;
      }, 90_000, 200).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}\n${serverOutput}`);
      });
    });
  }

  /** An empty project with the SDK from its tarball (and TypeScript, for the types' check). */
  async function installProject(): Promise<void> {
    await mkdir(project);
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'berth-packages-check', private: true, type: 'module' }));
    await timed('npm i <client tarball> typescript', () =>
      succeed('npm', ['install', clientTarball, `typescript@${TYPESCRIPT}`], { cwd: project, env: npmEnv, timeoutMs: 240_000 }));
  }

  /**
   * The CLI installed globally from its tarball, with the SDK's and the MCP tools', which it depends on (none
   * is on the registry yet): as docs/packages.md and the CLI's README tell.
   */
  async function installGlobally(): Promise<void> {
    await timed('npm i -g <client tarball> <mcp tarball> <cli tarball>', () =>
      succeed('npm', ['install', '--global', '--prefix', prefix, clientTarball, mcpTarball, cliTarball], { cwd: root, env: npmEnv, timeoutMs: 240_000 }));
  }

  after(async () => {
    const left: string[] = [];
    const stopping = Date.now();
    if (server && server.exitCode === null && server.signalCode === null) {
      const child = server;
      const exited = new Promise((done) => child.once('exit', done));
      process.kill(-child.pid!, 'SIGTERM');
      const stopped = await Promise.race([exited.then(() => true), new Promise((done) => setTimeout(() => done(false), 60_000))]);
      if (!stopped) {
        left.push('the compiled server (killed after 60 s)');
        process.kill(-child.pid!, 'SIGKILL');
        await exited;
        await readFile(join(dataDir, 'data', 'podman', 'podman.pid'), 'utf8').then((pid) => process.kill(Number(pid), 'SIGTERM')).catch(() => undefined);
      }
    }
    if (instance) {
      const containers = await containersOf(instance);
      if (containers.length > 0) await execFileAsync('podman', ['rm', '--force', ...containers.map((c) => c.name)]).catch(() => undefined);
      left.push(...containers.map((c) => `container ${c.name}`), ...(await removeAgentNetworkOf(instance)));
    }
    timings.push(`compiled server stop ${((Date.now() - stopping) / 1000).toFixed(1)} s`);
    if (root) await timed('removal of the temporary directory', () => removeTestDir(root));
    process.stdout.write(`# packages.test timings: ${timings.join(', ')}\n`);
    assert.deepEqual(left, [], 'the compiled server left nothing behind at its stop');
  });

  test('the tarballs hold the compiled packages: no sources, no tsx, not private, licensed', async () => {
    const client = await tarballFiles(clientTarball);
    for (const file of ['dist/index.js', 'dist/index.d.ts', 'dist/browser/index.js', 'dist/browser/pack-directory.js', 'package.json', 'README.md', 'LICENSE', 'CHANGELOG.md']) {
      assert.ok(client.includes(file), `@berth/client's tarball holds ${file}: ${client.join(' ')}`);
    }
    const mcp = await tarballFiles(mcpTarball);
    for (const file of ['dist/index.js', 'dist/index.d.ts', 'dist/tools.js', 'package.json', 'README.md', 'LICENSE', 'CHANGELOG.md']) {
      assert.ok(mcp.includes(file), `@berth/mcp's tarball holds ${file}: ${mcp.join(' ')}`);
    }
    const cli = await tarballFiles(cliTarball);
    for (const file of ['bin/berth.js', 'dist/main.js', 'package.json', 'README.md', 'LICENSE', 'CHANGELOG.md']) {
      assert.ok(cli.includes(file), `@berth/cli's tarball holds ${file}: ${cli.join(' ')}`);
    }
    assert.deepEqual(cli.filter((file) => /mcp-tools|mcp-results|mcp-agent-output/.test(file)), [], "the CLI's tarball holds no copy of the MCP tools");
    for (const files of [client, mcp, cli]) assert.deepEqual(files.filter((file) => file.startsWith('src/') || file.endsWith('.ts') && !file.endsWith('.d.ts')), []);
    const manifests = await Promise.all([clientTarball, mcpTarball, cliTarball].map(async (tarball) => JSON.parse((await execFileAsync('tar', ['-xOzf', tarball, 'package/package.json'])).stdout) as Record<string, any>));
    for (const manifest of manifests) {
      assert.equal(manifest.private, undefined, `${manifest.name} is publishable`);
      assert.equal(manifest.license, 'Apache-2.0');
      assert.ok(manifest.engines?.node, `${manifest.name} names its Node versions`);
      assert.ok(manifest.repository?.url, `${manifest.name} names its repository`);
    }
    const [clientManifest, mcpManifest, cliManifest] = manifests;
    assert.equal(cliManifest!.dependencies.tsx, undefined, '@berth/cli does not depend on tsx');
    assert.equal(cliManifest!.dependencies['@berth/client'], clientManifest!.version, "@berth/cli depends on this very @berth/client's version");
    assert.equal(cliManifest!.dependencies['@berth/mcp'], mcpManifest!.version, "@berth/cli depends on this very @berth/mcp's version");
    assert.equal(cliManifest!.exports['./mcp-tools'], undefined, '@berth/cli exports no MCP tools of its own');
    assert.equal(mcpManifest!.dependencies['@berth/client'], clientManifest!.version, "@berth/mcp depends on this very @berth/client's version");
    assert.deepEqual(Object.keys(mcpManifest!.exports['.']), ['types', 'import', 'default'], "@berth/mcp's export names its types");
  });

  test("the compiled server answers the README's curl (a token, then a /run)", async () => {
    const readme = await readFile(join(REPO, 'README.md'), 'utf8');
    const at = readme.indexOf(README_MARKER);
    assert.ok(at >= 0, `the README marks its quick start with ${README_MARKER}`);
    const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(at))?.[1];
    assert.ok(block !== undefined && block.includes("localhost:8080/run"), "the block runs a /run on localhost:8080");
    const shell = join(root, 'readme');
    await mkdir(join(shell, '.service'), { recursive: true });
    await writeFile(join(shell, '.service', 'local.env'), `SERVICE_API_TOKENS=${apiToken}\n`);
    const { stdout } = await timed("README's curl", () => succeed('bash', ['-euo', 'pipefail', '-c', block.replaceAll('localhost:8080', url.replace('http://', ''))], { cwd: shell, env: plainEnvironment() }));
    const answer = JSON.parse(stdout) as { status: string; output: string };
    assert.equal(answer.status, 'completed', stdout);
    assert.match(answer.output, /^Linux /);
  });

  test('an empty project installs the SDK from its tarball and runs a prompt with plain node', async () => {
    await writeFile(
      join(project, 'run.mjs'),
      [
        "import { Berth } from '@berth/client';",
        'const berth = new Berth({ url: process.env.BERTH_URL, apiToken: process.env.BERTH_API_TOKEN });',
        "const { output, session_id } = await berth.run({ prompt: 'say: hello from a package' });",
        'console.log(output);',
        'console.error(session_id);',
      ].join('\n'),
    );
    const ran = await timed('the five-line script', () => succeed(process.execPath, ['run.mjs'], { cwd: project, env: plainEnvironment({ BERTH_URL: url, BERTH_API_TOKEN: apiToken }) }));
    assert.equal(ran.stdout, 'hello from a package\n');
    assert.match(ran.stderr.trim(), /^[0-9a-f-]{36}$/);
  });

  test("the SDK's types resolve under moduleResolution node16 and bundler", async () => {
    await writeFile(
      join(project, 'check.ts'),
      [
        "import { API_VERSION, Berth, BerthVersionError, type RunResponse } from '@berth/client';",
        "const berth = new Berth({ url: 'http://127.0.0.1:8080', apiVersionCheck: 'warn' });",
        "export const answer: Promise<RunResponse> = berth.run({ prompt: 'say: hi' });",
        'export const version: string = API_VERSION;',
        "export const mismatch = new BerthVersionError('http://127.0.0.1:8080', '2').serverApiVersion;",
        '// @ts-expect-error: a run needs its prompt (the types are the real ones, not any)',
        'berth.run({});',
      ].join('\n'),
    );
    await Promise.all(
      (['node16', 'bundler'] as const).map(async (resolution) => {
        const config = `tsconfig.${resolution}.json`;
        await writeFile(
          join(project, config),
          JSON.stringify({
            compilerOptions: {
              module: resolution === 'node16' ? 'node16' : 'esnext',
              moduleResolution: resolution,
              target: 'es2022',
              // No @types/node: the declarations need nothing of Node's (a browser project has none).
              lib: ['es2022', 'dom', 'dom.iterable'],
              types: [],
              strict: true,
              noEmit: true,
              skipLibCheck: false,
            },
            files: ['check.ts'],
          }),
        );
        const ran = await timed(`tsc (${resolution})`, () => run(process.execPath, [join(project, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', config], { cwd: project, env: plainEnvironment() }));
        assert.equal(ran.code, 0, `tsc with moduleResolution ${resolution}:\n${ran.stdout}${ran.stderr}`);
      }),
    );
  });

  test('a Vite browser bundle of the SDK holds no Node built-in', async () => {
    await writeFile(join(project, 'index.html'), '<!doctype html><script type="module" src="./main.js"></script>\n');
    await writeFile(
      join(project, 'main.js'),
      "import { Berth } from '@berth/client';\nconst berth = new Berth({ url: location.origin });\nberth.version().then((v) => (document.body.textContent = v.api_version));\n",
    );
    const { build, createLogger } = await import('vite');
    const warnings: string[] = [];
    const logger = createLogger('warn', { allowClearScreen: false });
    logger.warn = (message) => void warnings.push(message);
    logger.warnOnce = (message) => void warnings.push(message);
    await timed('vite build', () => build({ root: project, logLevel: 'warn', customLogger: logger, configFile: false, build: { outDir: join(project, 'web'), emptyOutDir: true, minify: false } }));
    const assets = join(project, 'web', 'assets');
    const bundle = (await Promise.all((await readdir(assets)).filter((name) => name.endsWith('.js')).map((name) => readFile(join(assets, name), 'utf8')))).join('\n');
    assert.match(bundle, /\/version/, "the bundle holds the SDK (its GET /version)");
    const builtIn = /\b(?:from|import|require)\s*\(?\s*["'](?:node:)?(?:fs|fs\/promises|path|stream|stream\/promises|child_process|os|crypto|zlib|events|buffer|util|net|tls|http|https)["']/;
    for (const nodeOnly of [/["']node:[a-z_/]+["']/, /__vite-browser-external/, builtIn]) {
      assert.doesNotMatch(bundle, nodeOnly, `the browser bundle imports a Node built-in (${nodeOnly})`);
    }
    assert.deepEqual(warnings.filter((warning) => /externalized for browser compatibility|node:/.test(warning)), []);
  });

  test('npm i -g of the CLI tarball gives a berth that needs no tsx: it signs in and prints hi', async () => {
    // A PATH with this node and the installed berth, and no tsx: none in the install, none on the PATH.
    const nodeBin = join(root, 'node-bin');
    await mkdir(nodeBin);
    await symlink(process.execPath, join(nodeBin, 'node'));
    const path = `${join(prefix, 'bin')}:${nodeBin}:/usr/bin:/bin`;
    const found = await execFileAsync('find', [prefix, '-name', 'tsx', '-o', '-name', 'tsx.*']);
    assert.equal(found.stdout, '', 'nothing named tsx is installed');
    const env = plainEnvironment({ PATH: path, BERTH_CONFIG_DIR: join(root, 'berth-config') });
    assert.notEqual((await run('sh', ['-c', 'command -v tsx'], { cwd: root, env })).code, 0, 'no tsx on the PATH');
    assert.equal((await run('sh', ['-c', 'command -v berth'], { cwd: root, env })).stdout.trim(), join(prefix, 'bin', 'berth'));
    await succeed('berth', ['--url', url, 'login'], { cwd: root, env, input: apiToken });
    const hi = await timed('berth run "say: hi"', () => succeed('berth', ['--url', url, 'run', 'say: hi'], { cwd: root, env }));
    assert.equal(hi.stdout, 'hi\n', hi.stderr);
    const version = await succeed('berth', ['--url', url, 'version'], { cwd: root, env });
    assert.match(version.stdout, /^api:\s+1$/m);
    assert.match(version.stdout, /^api \(this command\):\s+1, fits the server$/m);
  });

  test("the installed berth mcp serves @berth/mcp's tools over stdio to the official MCP client, and runs one", async () => {
    // The tools come from @berth/mcp's tarball (the CLI holds none of its own): the list is this repository's.
    const env = plainEnvironment({ PATH: `${join(prefix, 'bin')}:${dirname(process.execPath)}:/usr/bin:/bin`, BERTH_CONFIG_DIR: join(root, 'berth-config-mcp'), BERTH_URL: url });
    await succeed(join(prefix, 'bin', 'berth'), ['login'], { cwd: root, env, input: apiToken });
    const client = new Client({ name: 'packages-test', version: '1.0.0' });
    await timed('berth mcp: connect', () => client.connect(new StdioClientTransport({ command: join(prefix, 'bin', 'berth'), args: ['mcp'], env: env as Record<string, string>, cwd: root, stderr: 'inherit' })));
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((tool) => tool.name), [...BERTH_TOOL_NAMES]);
      const result = (await timed('berth mcp: run_prompt', () => client.callTool({ name: 'run_prompt', arguments: { prompt: 'say: hi over mcp' } }, undefined, { timeout: 120_000 }))) as CallToolResult;
      assert.notEqual(result.isError, true, JSON.stringify(result.content));
      assert.equal((result.structuredContent as { output?: string }).output, 'hi over mcp');
    } finally {
      await client.close();
    }
  });

  test('a server that speaks another API major version: the installed SDK and berth refuse with a message naming both', async () => {
    // The real compiled Berth behind a proxy that says it speaks API version 2.
    const proxy = createServer((incoming, outgoing) => {
      if (incoming.url === '/version') {
        outgoing.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ version: '9.0.0', api_version: '2', engine_version: 'x', engine_image: 'x', agent_image: 'x' }));
        return;
      }
      const forwarded = httpRequest(`${url}${incoming.url}`, { method: incoming.method, headers: incoming.headers }, (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      });
      forwarded.on('error', () => outgoing.destroy());
      incoming.pipe(forwarded);
    });
    await new Promise<void>((done) => proxy.listen(0, '127.0.0.1', done));
    after(() => new Promise<void>((done) => proxy.close(() => done())));
    const proxied = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    const ran = await run(process.execPath, ['run.mjs'], { cwd: join(root, 'project'), env: plainEnvironment({ BERTH_URL: proxied, BERTH_API_TOKEN: apiToken }) });
    assert.notEqual(ran.code, 0, ran.stdout);
    assert.match(ran.stderr, /BerthVersionError: Berth at http:\/\/127\.0\.0\.1:\d+ speaks API version 2, and this @berth\/client speaks API version 1: they do not fit/);
    const env = plainEnvironment({ PATH: `${join(root, 'global', 'bin')}:${dirname(process.execPath)}:/usr/bin:/bin`, BERTH_CONFIG_DIR: join(root, 'berth-config-proxied') });
    const refused = await run('berth', ['--url', proxied, 'run', 'say: hi'], { cwd: root, env });
    assert.equal(refused.code, 1, refused.stdout);
    assert.equal(refused.stdout, '');
    assert.match(refused.stderr, /^berth: Berth at http:\/\/127\.0\.0\.1:\d+ speaks API version 2, and this @berth\/client speaks API version 1/m);
    const version = await succeed('berth', ['--url', proxied, 'version'], { cwd: root, env });
    assert.match(version.stdout, /^api \(this command\):\s+1, does not fit the server \(the major versions differ\)$/m);
  });
});
