import assert from 'node:assert/strict';
import { posix } from 'node:path';
import { describe, it } from 'node:test';
import { loadConfig, type Config } from '../../src/config.js';
import type { RunRequest } from '../../src/core/run-request.js';
import { validateRunRequest, type ValidationContext } from '../../src/core/validation/validate-run.js';
import type { RealpathFs } from '../../src/core/validation/volumes.js';
import { refused } from './support/refused.js';

const SESSION = '123e4567-e89b-12d3-a456-426614174000';

function testConfig(env: Record<string, string> = {}): Config {
  return loadConfig({
    SERVICE_AUTH_ENABLED: 'false',
    SERVICE_DATA_DIR: '/srv/berth/data',
    SERVICE_AGENT_SESSIONS_DIR: '/srv/berth/sessions',
    SERVICE_AGENT_ALLOWED_VOLUMES: '/data',
    SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS: 'python:*,localhost/berth-*',
    SERVICE_AGENT_IMAGE: 'localhost/berth-agent:test',
    SERVICE_AGENT_MAX_CPUS: '4',
    SERVICE_MAX_PROMPT_BYTES: '1000',
    SERVICE_ENGINE_CREDENTIALS_SECRET: 'engine-creds',
    ...env,
  });
}

/** /data and /etc exist; /data/to-etc links to /etc. Records every path it is asked about. */
function fakeFs(asked: string[] = []): RealpathFs {
  const dirs = new Set(['/', '/data', '/data/project', '/etc']);
  const links: Record<string, string> = { '/data/to-etc': '/etc' };
  return {
    async realpath(path) {
      asked.push(path);
      let current = '/';
      for (const name of path.split('/').filter(Boolean)) {
        const next = posix.join(current, name);
        if (links[next]) current = links[next]!;
        else if (dirs.has(next)) current = next;
        else throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
      }
      return current;
    },
    async lstat(path) {
      if (dirs.has(path) || path in links) return {};
      throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
    },
  };
}

function context(options: { config?: Config; secrets?: string[]; asked?: string[]; fsAsked?: string[] } = {}): ValidationContext {
  const secrets = new Set(options.secrets ?? ['gh-token']);
  return {
    config: options.config ?? testConfig(),
    fs: fakeFs(options.fsAsked),
    async secretExists(name) {
      options.asked?.push(name);
      return secrets.has(name);
    },
  };
}

describe('validateRunRequest: a valid request', () => {
  it('fills every default', async () => {
    const plan = await validateRunRequest({ prompt: 'hi' }, context());
    assert.deepEqual(plan, {
      prompt: 'hi',
      workdir: '/workspace',
      session: { kind: 'new' },
      workspace: { kind: 'session' },
      engine: { dangerously_skip_permissions: true },
      container: {
        image: 'localhost/berth-agent:test',
        volumes: [],
        secretsEnv: [],
        memoryBytes: 512 * 1024 ** 2,
        memoryText: '512m',
        diskBytes: 2 * 1024 ** 3,
        diskText: '2g',
        cpus: 1,
        cpuShares: 1024,
        timeoutMs: 1_800_000,
        timeoutText: '30m',
        // SERVICE_EGRESS_DEFAULT_ALLOW is empty: the model gateway only.
        network: { mode: 'allowlist', allow: [] },
      },
      webhookUrl: undefined,
    });
    assert.equal('lifecycle' in plan.container, false);
  });

  it('carries every validated field into the plan', async () => {
    const request: RunRequest = {
      prompt: 'do it',
      workdir: '/data/project/',
      webhook_url: 'https://example.com/hook',
      engine: {
        model: 'sonnet',
        system_prompt: 'sys',
        append_system_prompt: 'more',
        allowed_tools: ['Bash(git:*)', 'Read'],
        disallowed_tools: ['WebFetch'],
        output_format: 'json',
        json_schema: { type: 'object' },
        max_budget_usd: 1.5,
        max_turns: 3,
        effort: 'high',
        dangerously_skip_permissions: false,
        prompt_caching_ttl: '1h',
        bedrock_service_tier: 'flex',
        enable_powershell_tool: true,
      },
      container: {
        image: 'python:3.12',
        volumes: ['/data/project:/data/project:ro,nodev'],
        secrets_env: { GH_TOKEN: 'gh-token' },
        timeout: '10m',
        memory: '1g',
        cpus: 2,
        cpu_shares: 512,
        lifecycle: { on_create_command: ['pip install x'], post_start: ['echo start'], hooks_timeout: '2m' },
      },
    };
    const plan = await validateRunRequest(request, context());
    assert.equal(plan.workdir, '/data/project');
    assert.equal(plan.webhookUrl, 'https://example.com/hook');
    assert.deepEqual(plan.engine, { ...request.engine });
    assert.deepEqual(plan.container, {
      image: 'docker.io/library/python:3.12',
      volumes: [{ hostPath: '/data/project', containerPath: '/data/project', readOnly: true, options: ['nodev'] }],
      secretsEnv: [{ variable: 'GH_TOKEN', secret: 'gh-token' }],
      memoryBytes: 1024 ** 3,
      memoryText: '1g',
      diskBytes: 2 * 1024 ** 3,
      diskText: '2g',
      cpus: 2,
      cpuShares: 512,
      timeoutMs: 600_000,
      timeoutText: '10m',
      lifecycle: { onCreate: ['pip install x'], postCreate: [], postStart: ['echo start'], timeoutMs: 120_000 },
      network: { mode: 'allowlist', allow: [] },
    });
  });

  it('defaults hooks_timeout to 5m', async () => {
    const plan = await validateRunRequest({ prompt: 'x', container: { lifecycle: { post_create: ['true'] } } }, context());
    assert.deepEqual(plan.container.lifecycle, { onCreate: [], postCreate: ['true'], postStart: [], timeoutMs: 300_000 });
  });

  it('mounts the resolved host path', async () => {
    const config = testConfig({ SERVICE_AGENT_ALLOW_ALL_VOLUMES: 'true' });
    const plan = await validateRunRequest({ prompt: 'x', container: { volumes: ['/data/to-etc:/mnt/etc:ro'] } }, context({ config }));
    assert.equal(plan.container.volumes[0]!.hostPath, '/etc');
  });
});

describe('validateRunRequest: session flags', () => {
  const allowed: [RunRequest['engine'], unknown][] = [
    [{}, { kind: 'new' }],
    [{ resume: false, fork_session: false, continue: false, no_persistence: false }, { kind: 'new' }],
    [{ session_id: SESSION, resume: true }, { kind: 'resume', sessionId: SESSION }],
    [{ session_id: SESSION.toUpperCase(), resume: true }, { kind: 'resume', sessionId: SESSION }],
    [{ session_id: SESSION, fork_session: true }, { kind: 'fork', fromSessionId: SESSION }],
    [{ session_id: SESSION, resume: true, fork_session: true }, { kind: 'fork', fromSessionId: SESSION }],
    [{ continue: true }, { kind: 'continue' }],
    [{ no_persistence: true }, { kind: 'ephemeral' }],
  ];
  for (const [engine, session] of allowed) {
    it(`${JSON.stringify(engine)} → ${JSON.stringify(session)}`, async () => {
      const plan = await validateRunRequest({ prompt: 'x', engine }, context());
      assert.deepEqual(plan.session, session);
      for (const flag of ['session_id', 'resume', 'continue', 'fork_session', 'no_persistence']) assert.equal(flag in plan.engine, false);
    });
  }

  const rejected: [RunRequest['engine'], RegExp][] = [
    [{ session_id: SESSION }, /^engine\.session_id: is set but neither resume nor fork_session is; set resume to continue that session or fork_session to branch from it$/],
    [{ resume: true }, /^engine\.resume: requires engine\.session_id$/],
    [{ fork_session: true }, /^engine\.fork_session: requires engine\.session_id$/],
    [{ session_id: 'not-a-uuid', resume: true }, /^engine\.session_id: "not-a-uuid" is not a UUID/],
    [{ continue: true, session_id: SESSION, resume: true }, /^engine\.continue: cannot be combined with resume or fork_session/],
    [{ continue: true, session_id: SESSION, fork_session: true }, /^engine\.continue: cannot be combined/],
    [{ continue: true, session_id: SESSION }, /^engine\.session_id: is set but neither/],
    [{ no_persistence: true, continue: true }, /^engine\.no_persistence: cannot be combined with resume, fork_session or continue/],
    [{ no_persistence: true, session_id: SESSION, resume: true }, /^engine\.no_persistence: cannot be combined/],
    [{ no_persistence: true, session_id: SESSION, fork_session: true }, /^engine\.no_persistence: cannot be combined/],
    [{ no_persistence: true, session_id: SESSION }, /^engine\.session_id: is set but neither/],
  ];
  for (const [engine, pattern] of rejected) {
    it(`refuses ${JSON.stringify(engine)}`, async () => {
      await assert.rejects(validateRunRequest({ prompt: 'x', engine }, context()), refused(pattern));
    });
  }
});

describe('validateRunRequest: refusals name the field', () => {
  const cases: [string, RunRequest, RegExp | string, number?][] = [
    ['empty prompt', { prompt: ' ' }, 'prompt: is required and must not be empty'],
    ['oversized prompt (413)', { prompt: 'x'.repeat(1001) }, /^prompt: is 1001 bytes of UTF-8, over the limit of 1000 bytes/, 413],
    ['oversized system_prompt (413)', { prompt: 'x', engine: { system_prompt: 'x'.repeat(1001) } }, /^engine\.system_prompt: is 1001 bytes/, 413],
    ['NUL in append_system_prompt', { prompt: 'x', engine: { append_system_prompt: 'a\u0000' } }, /^engine\.append_system_prompt: contains the control character U\+0000/],
    ['bad tool', { prompt: 'x', engine: { allowed_tools: ['--x'] } }, /^engine\.allowed_tools\[0\]: /],
    ['bad model', { prompt: 'x', engine: { model: 'a b' } }, /^engine\.model: /],
    ['bad webhook', { prompt: 'x', webhook_url: 'ftp://x' }, /^webhook_url: scheme "ftp" is not allowed/],
    ['workdir traversal', { prompt: 'x', workdir: '/workspace/../etc' }, /^workdir: "\/workspace\/\.\.\/etc" must not contain "\.\." segments$/],
    ['blocked workdir', { prompt: 'x', workdir: '/etc/x' }, /^workdir: "\/etc\/x" cannot be the working directory: it is under \/etc, which is blocked$/],
    ['compose file outside the allowlist', { prompt: 'x', container: { environment: { type: 'compose', path: '/x', service: 's' } } },
      'container.environment.path: host path "/x" is not in SERVICE_AGENT_ALLOWED_VOLUMES'],
    ['empty hook', { prompt: 'x', container: { lifecycle: { post_start: [''] } } }, 'container.lifecycle.post_start[0]: is empty'],
    ['volume outside the allowlist', { prompt: 'x', container: { volumes: ['/etc:/mnt'] } },
      'container.volumes[0]: host path "/etc" is not in SERVICE_AGENT_ALLOWED_VOLUMES'],
    ['symlink out of the allowlist', { prompt: 'x', container: { volumes: ['/data/project:/p', '/data/to-etc:/mnt'] } },
      'container.volumes[1]: host path "/data/to-etc" resolves to "/etc", which is not in SERVICE_AGENT_ALLOWED_VOLUMES'],
    ['unsafe mount option', { prompt: 'x', container: { volumes: ['/data:/mnt:rshared'] } }, /^container\.volumes\[0\]: mount option "rshared" is not allowed/],
    ['image not allowed', { prompt: 'x', container: { image: 'node:20' } }, /^container\.image "node:20" is not allowed/],
    ['invalid image', { prompt: 'x', container: { image: 'Node:20' } }, /^container\.image: "Node:20" is not a valid image reference/],
    ['blocked container path', { prompt: 'x', container: { volumes: ['/data:/home/agent/.claude'] } },
      'container.volumes[0]: container path "/home/agent/.claude" cannot be mounted on: it is ~/.claude of a home directory, which is blocked'],
    ['duplicate container path', { prompt: 'x', container: { volumes: ['/data:/m', '/data/project:/m'] } }, /^container\.volumes\[1\]: container path "\/m" is already used/],
    ['memory', { prompt: 'x', container: { memory: '1.5g' } }, /^container\.memory: "1\.5g" is not a memory size/],
    ['cpus', { prompt: 'x', container: { cpus: 8 } }, /^container\.cpus: 8 is above the maximum of 4/],
    ['cpu_shares', { prompt: 'x', container: { cpu_shares: 1 } }, /^container\.cpu_shares: /],
    ['timeout', { prompt: 'x', container: { timeout: '0s' } }, /^container\.timeout: "0s" is not a duration/],
    ['hooks_timeout', { prompt: 'x', container: { lifecycle: { hooks_timeout: '9h' } } }, /^container\.lifecycle\.hooks_timeout: "9h" is above the maximum/],
    ['blocked variable', { prompt: 'x', container: { secrets_env: { LD_PRELOAD: 'gh-token' } } }, /^container\.secrets_env\.LD_PRELOAD: the variable LD_PRELOAD is blocked/],
    ['reserved secret', { prompt: 'x', container: { secrets_env: { X: 'engine-creds' } } }, 'container.secrets_env.X: secret "engine-creds" is reserved for Berth\'s own use'],
    ['missing secret', { prompt: 'x', container: { secrets_env: { X: 'nope' } } }, 'container.secrets_env.X: secret "nope" does not exist in the Podman secret store'],
  ];
  for (const [name, request, pattern, status] of cases) {
    it(`refuses: ${name}`, async () => assert.rejects(validateRunRequest(request, context()), refused(pattern, status)));
  }

  it('checks SERVICE_AGENT_DEFAULT_WORKDIR when no workdir is given', async () => {
    const config = testConfig({ SERVICE_AGENT_DEFAULT_WORKDIR: '/etc' });
    await assert.rejects(validateRunRequest({ prompt: 'x' }, context({ config })), refused(/^SERVICE_AGENT_DEFAULT_WORKDIR: /));
  });
  it('refuses every volume when SERVICE_AGENT_ALLOWED_VOLUMES is empty', async () => {
    const config = testConfig({ SERVICE_AGENT_ALLOWED_VOLUMES: '' });
    await assert.rejects(validateRunRequest({ prompt: 'x', container: { volumes: ['/data:/m'] } }, context({ config })), refused(/volume mounts are disabled/));
  });
  it('refuses mounting Berth\'s data directory even with SERVICE_AGENT_ALLOW_ALL_VOLUMES', async () => {
    const config = testConfig({ SERVICE_AGENT_ALLOW_ALL_VOLUMES: 'true' });
    await assert.rejects(validateRunRequest({ prompt: 'x', container: { volumes: ['/srv/berth:/m'] } }, context({ config })),
      refused(/overlaps Berth's own files \(SERVICE_DATA_DIR\)/));
  });
});

describe('validateRunRequest: layer order', () => {
  const layered: [string, RunRequest, RegExp][] = [
    ['input before volumes', { prompt: '', container: { volumes: ['/etc:/m'] } }, /^prompt: /],
    ['workdir before volumes', { prompt: 'x', workdir: '/proc', container: { volumes: ['/etc:/m'] } }, /^workdir: /],
    ['volume allowlist before image allowlist', { prompt: 'x', container: { volumes: ['/etc:/m'], image: 'node:1' } }, /^container\.volumes\[0\]: host path/],
    ['image allowlist before container-path blocklist', { prompt: 'x', container: { volumes: ['/data:/etc'], image: 'node:1' } }, /^container\.image /],
    ['container-path blocklist before limits', { prompt: 'x', container: { volumes: ['/data:/etc'], memory: 'lots' } }, /^container\.volumes\[0\]: container path/],
    ['limits before secrets', { prompt: 'x', container: { memory: 'lots', secrets_env: { LD_PRELOAD: 'x' } } }, /^container\.memory: /],
  ];
  for (const [name, request, pattern] of layered) {
    it(name, async () => assert.rejects(validateRunRequest(request, context()), refused(pattern)));
  }

  it('touches neither the file system nor the secret store for a request refused at input', async () => {
    const asked: string[] = [];
    const fsAsked: string[] = [];
    const request: RunRequest = { prompt: 'a\u0000', container: { volumes: ['/data:/m'], secrets_env: { X: 'gh-token' } } };
    await assert.rejects(validateRunRequest(request, context({ asked, fsAsked })));
    assert.deepEqual([asked, fsAsked], [[], []]);
  });
  it('asks the secret store only after every other layer passed', async () => {
    const asked: string[] = [];
    await assert.rejects(validateRunRequest({ prompt: 'x', container: { cpus: '99', secrets_env: { X: 'gh-token' } } }, context({ asked })));
    assert.deepEqual(asked, []);
    await validateRunRequest({ prompt: 'x', container: { secrets_env: { X: 'gh-token' } } }, context({ asked }));
    assert.deepEqual(asked, ['gh-token']);
  });
});

describe('engine.json_schema as a JSON string', () => {
  it('is parsed into the schema object', async () => {
    const plan = await validateRunRequest({ prompt: 'x', engine: { json_schema: '{"type":"object","required":["n"]}' } }, context());
    assert.deepEqual(plan.engine.json_schema, { type: 'object', required: ['n'] });
  });
  it('that is not JSON, or not an object, is a 400 naming the field', async () => {
    for (const bad of ['{"type":', '[1,2]', '"text"', 'null']) {
      await assert.rejects(validateRunRequest({ prompt: 'x', engine: { json_schema: bad } }, context()), refused(/engine\.json_schema/));
    }
  });
});

describe('validateRunRequest: compose environments', () => {
  const files: Record<string, string> = {
    '/data/project/compose.yaml': [
      'services:',
      '  app:',
      '    image: localhost/berth-agent:test',
      '    working_dir: /src',
      '    environment: [ "DB_HOST=${DB:-db}" ]',
      '    volumes: [ "./src:/src:ro", "cache:/cache" ]',
      '  db:',
      '    image: python:3',
      'volumes:',
      '  cache: {}',
    ].join('\n'),
    '/data/project/.env': 'DB=database\n',
  };
  const withFiles = (config: Config): ValidationContext => ({
    ...context({ config }),
    readFile: async (path) => (files[path] === undefined ? undefined : Buffer.from(files[path]!)),
  });
  const hostVolumes = () => testConfig({ SERVICE_COMPOSE_ALLOW_HOST_VOLUMES: 'true' });
  const request = (extra: Record<string, unknown> = {}): RunRequest => ({
    prompt: 'x',
    container: { environment: { type: 'compose', path: '/data/project/compose.yaml', service: 'app', ...extra } },
  });

  it('plans the agent service: its image, working directory, bind mounts as volumes, and the stack', async () => {
    const plan = await validateRunRequest(request(), withFiles(hostVolumes()));
    assert.equal(plan.container.image, 'localhost/berth-agent:test');
    assert.equal(plan.workdir, '/src');
    assert.deepEqual(plan.container.volumes, [{ hostPath: '/data/project/src', containerPath: '/src', readOnly: true, options: [] }]);
    assert.equal(plan.container.environment?.definition.agent.environment.DB_HOST, 'database');
    assert.deepEqual(plan.container.environment?.definition.sidecars.map((s) => s.name), ['db']);
    assert.equal(plan.container.environment?.buildTimeoutMs, 15 * 60_000);
  });

  it('refuses what configuration does not allow, images outside the allowlist, blocked paths and variables', async () => {
    await assert.rejects(validateRunRequest(request(), withFiles(testConfig())), refused(/bind mounts of host paths are refused on this server/));
    files['/data/project/bad-image.yaml'] = 'services:\n  app:\n    image: localhost/berth-agent:test\n  db:\n    image: node:20\n';
    await assert.rejects(
      validateRunRequest(request({ path: '/data/project/bad-image.yaml' }), withFiles(testConfig())),
      refused(/container\.environment: services\.db\.image "node:20" is not allowed/),
    );
    files['/data/project/etc.yaml'] = 'services:\n  app:\n    image: localhost/berth-agent:test\n    volumes: ["v:/etc/x"]\nvolumes:\n  v: {}\n';
    await assert.rejects(validateRunRequest(request({ path: '/data/project/etc.yaml' }), withFiles(testConfig())), refused(/services\.app\.volumes\[0\]: container path "\/etc\/x" cannot be mounted on/));
    files['/data/project/preload.yaml'] = 'services:\n  app:\n    image: localhost/berth-agent:test\n    environment: { LD_PRELOAD: /x.so }\n';
    await assert.rejects(validateRunRequest(request({ path: '/data/project/preload.yaml' }), withFiles(testConfig())), refused(/environment\.LD_PRELOAD is blocked/));
    await assert.rejects(validateRunRequest(request({ path: '/data/project/missing.yaml' }), withFiles(testConfig())), refused(/container\.environment\.path: "\/data\/project\/missing\.yaml" does not exist/));
    await assert.rejects(validateRunRequest(request({ build_timeout: '1h' }), withFiles(hostVolumes())), refused(/build_timeout: "1h" is above this server's maximum of 15m/));
    await assert.rejects(validateRunRequest(request({ build_timeout: 'soon' }), withFiles(hostVolumes())), refused(/build_timeout: "soon" is not a duration/));
  });
});
