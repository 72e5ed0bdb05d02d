import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { ComposeFileError, loadComposeDocument, parseEnvFile } from '../../src/core/compose-file/compose-document.js';
import { builtImageTag, defineStack, StackDefinitionError, type DefinitionPolicy } from '../../src/core/compose-file/stack-definition.js';

const LIMITS = { maxMemoryBytes: 8 * 1024 ** 3, maxCpus: 4 };
const STRICT: DefinitionPolicy = { allowPrivileged: false, allowHostNetwork: false, allowHostVolumes: false, allowBuild: true, ...LIMITS };
const LENIENT: DefinitionPolicy = { allowPrivileged: true, allowHostNetwork: true, allowHostVolumes: true, allowBuild: true, ...LIMITS };

async function define(yaml: string, options: { policy?: DefinitionPolicy; service?: string; env?: string } = {}) {
  const document = loadComposeDocument(yaml, parseEnvFile(options.env ?? ''));
  return defineStack(document, {
    policy: options.policy ?? STRICT,
    agentService: options.service ?? 'app',
    baseDir: '/srv/project',
    resolveHostPath: async (path) => {
      if (!path.startsWith('/srv/')) throw new StackDefinitionError(`${path} is not allowed`);
      return path;
    },
  });
}

const STACK = `
services:
  app:
    image: localhost/agent:1
    environment:
      CACHE_URL: redis://cache:\${PORT:-6379}
    depends_on:
      cache: { condition: service_healthy }
    volumes: [ "data:/data" ]
    command: sleep infinity
  cache:
    image: localhost/redis:1
    command: redis-server --port 6379
    healthcheck:
      test: ["CMD", "redis-cli", "ping"]
      interval: 2s
      retries: 5
  migrate:
    image: localhost/agent:1
    depends_on: [cache]
volumes:
  data: {}
x-anything: ignored
`;

test('a stack: agent apart, sidecars in dependency order, volumes, healthcheck and command parsed', async () => {
  const stack = await define(STACK);
  assert.equal(stack.agent.name, 'app');
  assert.deepEqual(stack.sidecars.map((s) => s.name), ['cache', 'migrate']);
  assert.deepEqual(stack.volumes, ['data']);
  assert.equal(stack.agent.environment.CACHE_URL, 'redis://cache:6379');
  const cache = stack.sidecars[0]!;
  assert.deepEqual(cache.command, ['redis-server', '--port', '6379']);
  assert.deepEqual(cache.healthcheck, { test: ['CMD', 'redis-cli', 'ping'], intervalMs: 2000, timeoutMs: 30000, retries: 5, startPeriodMs: 0 });
  assert.deepEqual(stack.sidecars[1]!.dependsOn, [{ service: 'cache', condition: 'service_started' }]);
  assert.deepEqual(stack.agent.mounts, [{ kind: 'volume', volume: 'data', containerPath: '/data', readOnly: false }]);
  assert.match(stack.hash, /^[0-9a-f]{16}$/);
});

test('the .env beside the file feeds interpolation, and changes the definition hash', async () => {
  const a = await define(STACK, { env: 'PORT=7000\n' });
  const b = await define(STACK);
  assert.equal(a.agent.environment.CACHE_URL, 'redis://cache:7000');
  assert.notEqual(a.hash, b.hash);
  assert.equal((await define(STACK)).hash, b.hash);
});

const refusals: [string, string, RegExp][] = [
  ['privileged', 'privileged: true', /services\.cache\.privileged is refused on this server \(SERVICE_COMPOSE_ALLOW_PRIVILEGED is false\)/],
  ['cap_add', 'cap_add: [NET_ADMIN]', /cap_add \(NET_ADMIN\) is refused/],
  ['devices', 'devices: ["/dev/fuse:/dev/fuse"]', /devices is refused/],
  ['security_opt', 'security_opt: ["seccomp:unconfined"]', /security_opt "seccomp:unconfined" \(it weakens the sandbox\) is refused/],
  ['network_mode host', 'network_mode: host', /network_mode "host" is refused on this server \(SERVICE_COMPOSE_ALLOW_HOST_NETWORK/],
  ['pid host', 'pid: host', /pid "host" is refused/],
  ['ipc host', 'ipc: host', /ipc "host" is refused/],
  ['userns host', 'userns_mode: host', /userns_mode "host" is refused/],
  ['bind mount', 'volumes: ["./data:/data"]', /bind mounts of host paths are refused on this server \(SERVICE_COMPOSE_ALLOW_HOST_VOLUMES/],
  ['ports', 'ports: ["6379:6379"]', /services\.cache\.ports is not supported by Berth \(ports would be published/],
  ['unsupported key', 'tty: true', /services\.cache\.tty is not supported by Berth/],
  ['service networks', 'networks: [other]', /networks is not supported by Berth \(every stack gets one network/],
  ['berth label', 'labels: { berth.stack: x }', /labels starting with "berth\." are Berth's own/],
  ['anonymous volume', 'volumes: ["/data"]', /anonymous volumes are not supported/],
  ['undeclared volume', 'volumes: ["nope:/data"]', /volume "nope" is not declared/],
  ['build and image', 'build: .', /give "image" or "build", not both/],
];

for (const [name, line, expected] of refusals) {
  test(`refused: ${name}`, async () => {
    const yaml = `services:\n  app:\n    image: a\n  cache:\n    image: r\n    ${line}\n`;
    await assert.rejects(define(yaml), expected);
  });
}

test('allowed by configuration: privileges on sidecars; never on the agent service', async () => {
  const stack = await define(
    'services:\n  app:\n    image: a\n  cache:\n    image: r\n    privileged: true\n    cap_add: [NET_ADMIN]\n    network_mode: host\n    security_opt: ["label=disable"]\n    volumes: ["./d:/d:ro"]\n',
    { policy: LENIENT },
  );
  const cache = stack.sidecars[0]!;
  assert.equal(cache.privileges.privileged, true);
  assert.equal(cache.privileges.hostNetwork, true);
  assert.equal(cache.privileges.labelDisable, true);
  assert.deepEqual(cache.mounts, [{ kind: 'bind', hostPath: '/srv/project/d', containerPath: '/d', readOnly: true }]);
  await assert.rejects(define('services:\n  app:\n    image: a\n    privileged: true\n', { policy: LENIENT }), /refused on the agent service: the engine always runs with Berth's hardening/);
  await assert.rejects(define('services:\n  app:\n    image: a\n    volumes: ["/etc:/x"]\n', { policy: LENIENT }), /\/etc is not allowed/);
});

test('structure: unknown service, cycles, dependencies on the agent, top-level keys, schema errors', async () => {
  await assert.rejects(define('services:\n  db:\n    image: a\n'), /service "app" \(container.environment.service\) is not in the file; it defines "db"/);
  await assert.rejects(
    define('services:\n  app:\n    image: a\n  a:\n    image: a\n    depends_on: [b]\n  b:\n    image: b\n    depends_on: [a]\n'),
    /depends_on has a cycle: a → b → a/,
  );
  await assert.rejects(define('services:\n  app:\n    image: a\n  db:\n    image: a\n    depends_on: [app]\n'), /"app" is the agent service/);
  await assert.rejects(define('services:\n  app:\n    image: a\n    depends_on: [ghost]\n'), /"ghost" is not a service of the file/);
  await assert.rejects(define('services:\n  app:\n    image: a\nnetworks:\n  n: {}\n'), /top-level "networks" is not supported/);
  await assert.rejects(define('services:\n  app:\n    image: a\nsecrets:\n  s: { file: x }\n'), /top-level "secrets" is not supported/);
  await assert.rejects(define('services:\n  app:\n    imag: a\n'), /does not follow the Compose Specification: services\.app: unknown key "imag"/);
  await assert.rejects(define('services:\n  app:\n    image: a\n  app:\n    image: b\n'), /is not valid YAML/);
  await assert.rejects(define('just text'), /must be a YAML mapping/);
  await assert.rejects(define('services: {}\n'), /defines no services/);
  await assert.rejects(define('services:\n  app:\n    command: "echo a && rm -rf /"\n    image: a\n'), /uses shell operators; write it as a list/);
});

test('a billion-laughs document is refused, not expanded', async () => {
  const yaml = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]', ...Array.from({ length: 8 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(10).fill(`*${String.fromCharCode(97 + i)}`).join(',')}]`), 'services:\n  app:\n    image: a'].join('\n');
  await assert.rejects(define(yaml), ComposeFileError);
});

test('build: refused unless SERVICE_COMPOSE_ALLOW_BUILD, naming the setting', async () => {
  await assert.rejects(define('services:\n  app:\n    build: ./agent\n', { policy: { ...STRICT, allowBuild: false } }), /services\.app\.build is refused on this server \(SERVICE_COMPOSE_ALLOW_BUILD is false\)/);
});

test('mem_limit and cpus above the agent maximums are refused naming the service and key', async () => {
  const side = (extra: string) => `services:\n  app:\n    image: localhost/a:1\n  db:\n    image: localhost/db:1\n${extra}`;
  await assert.rejects(define(side('    mem_limit: 9g\n')), /services\.db\.mem_limit: "9g" is above this server's maximum of 8589934592 bytes \(SERVICE_AGENT_MAX_MEMORY\)/);
  await assert.rejects(define(side('    cpus: 4.5\n')), /services\.db\.cpus: "4\.5" is above this server's maximum of 4 CPUs \(SERVICE_AGENT_MAX_CPUS\)/);
  assert.equal((await define(side('    mem_limit: 8g\n    cpus: 4\n'))).sidecars[0]!.memoryBytes, 8 * 1024 ** 3);
});

test('build: context and dockerfile inside it; the built image is named by the definition', async () => {
  const stack = await define('services:\n  app:\n    build:\n      context: ./agent\n      dockerfile: Containerfile\n      args: { V: "1" }\n');
  assert.deepEqual(stack.agent.image, { kind: 'build', context: '/srv/project/agent', dockerfile: 'Containerfile', args: { V: '1' } });
  assert.equal(builtImageTag(stack, 'app'), `localhost/berth-build-app:${stack.hash}`);
  await assert.rejects(define('services:\n  app:\n    build: { context: ., dockerfile: ../x }\n'), /dockerfile: "\.\.\/x" must name a file inside the build context/);
  // Podman reads a dockerfile that parses as JSON as a list of (host) paths.
  await assert.rejects(define('services:\n  app:\n    build: { context: ., dockerfile: \'["/etc/hostname"]\' }\n'), /dockerfile: "\["\/etc\/hostname"\]" must be a relative path/);
  await assert.rejects(define('services:\n  app:\n    build: { context: ., dockerfile: /etc/hostname }\n'), /must be a relative path inside the build context/);
  await assert.rejects(define('services:\n  app:\n    build: { context: ., dockerfile: a/../../b }\n'), /must name a file inside the build context/);
  await assert.rejects(define('services:\n  app:\n    build: /etc\n'), /\/etc is not allowed/);
  await assert.rejects(define('services:\n  app:\n    build: { context: ., network: host }\n'), /build\.network is not supported/);
});

test('fuzz: generated documents are defined or refused with a Berth error, never anything else', async () => {
  const key = fc.constantFrom('image', 'build', 'command', 'environment', 'healthcheck', 'depends_on', 'volumes', 'privileged', 'network_mode', 'ports', 'cap_add', 'restart', 'user', 'labels', 'tty', 'mem_limit', 'cpus', 'x-ext');
  const value = fc.oneof(
    fc.string(),
    fc.boolean(),
    fc.integer(),
    fc.array(fc.string(), { maxLength: 3 }),
    fc.dictionary(fc.string({ maxLength: 5 }), fc.oneof(fc.string(), fc.constant(null)), { maxKeys: 3 }),
    fc.constant('host'),
    fc.constant('${X:-y}'),
    fc.constant('data:/data'),
  );
  const service = fc.dictionary(key, value, { maxKeys: 5 });
  const document = fc.record({
    services: fc.dictionary(fc.constantFrom('app', 'db', 'cache', 'Bad Name'), service, { minKeys: 1, maxKeys: 3 }),
    volumes: fc.option(fc.dictionary(fc.constantFrom('data', 'v'), fc.constant({}), { maxKeys: 2 }), { nil: undefined }),
  });
  await fc.assert(
    fc.asyncProperty(document, async (doc) => {
      try {
        await define(stringify(doc));
      } catch (error) {
        assert.ok(error instanceof ComposeFileError || error instanceof StackDefinitionError, `unexpected ${(error as Error).name}: ${(error as Error).message}`);
      }
    }),
    { numRuns: 2000 },
  );
});
