// Image discovery end to end: real Podman, the locally built images, and a real registry on loopback
// (plain HTTP, declared in SERVICE_IMAGE_INSECURE_REGISTRIES) for pull and search.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { podman, startTestRegistry, type TestRegistry } from '../support/registry.js';
import { startThrottledProxy, type ThrottledProxy } from '../support/throttled-proxy.js';
import { sseData } from '../support/sse.js';

const AGENT_IMAGE = 'localhost/berth-agent:0.1.0-alpha';
const MUSL_IMAGE = 'localhost/berth-test-musl:latest';
// Nothing listens on the discard port: a registry that cannot be reached.
const DEAD_REGISTRY = '127.0.0.1:9';

// An image none of whose layers is on the host, pulled through a slow proxy: a pull long enough to leave.
const SLOW_IMAGE = 'localhost/berth-test-slow-pull:1';
const SLOW_PROXY_RATE = 200_000; // bytes per second, for a 3 MB layer

let t: TestBerth;
let registry: TestRegistry;
let slowProxy: ThrottledProxy;
const pulled: string[] = [];

interface ImageRecord {
  repository: string;
  tag: string;
  compatibility_rank: number;
  compatible: boolean;
  tools: string[];
  allowed: boolean;
}

/** Builds `tag` FROM scratch: one layer holding one file of `bytes` random (incompressible) bytes, no C library. */
async function buildFromScratch(tag: string, bytes: number): Promise<void> {
  const context = await mkdtemp(join(tmpdir(), 'berth-scratch-image-'));
  try {
    await writeFile(join(context, 'payload'), randomBytes(bytes));
    await writeFile(join(context, 'Containerfile'), 'FROM scratch\nCOPY payload /payload\n');
    await podman('build', '--quiet', '--tag', tag, context);
  } finally {
    await rm(context, { recursive: true, force: true });
  }
}

/** Builds an image of one large layer, pushes it, and removes it from the host. */
async function pushLayerOnlyInRegistry(repository: string, bytes: number): Promise<void> {
  try {
    await buildFromScratch(SLOW_IMAGE, bytes);
    await registry.push(SLOW_IMAGE, repository);
  } finally {
    await podman('rmi', SLOW_IMAGE).catch(() => undefined);
  }
}

before(async () => {
  registry = await startTestRegistry();
  await registry.push(MUSL_IMAGE, 'allowed/musl:1');
  await registry.push(MUSL_IMAGE, 'streamed/musl:1');
  await registry.push(MUSL_IMAGE, 'forbidden/musl:1');
  await pushLayerOnlyInRegistry('streamed/slow:1', 3_000_000);
  slowProxy = await startThrottledProxy(registry.host, SLOW_PROXY_RATE);
  t = await startTestBerth({
    SERVICE_AGENT_IMAGE: AGENT_IMAGE,
    SERVICE_IMAGE_INSECURE_REGISTRIES: `${registry.host},${slowProxy.host}`,
    SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS: `localhost/*,${registry.host}/allowed/*,${registry.host}/streamed/*,${slowProxy.host}/streamed/*,${DEAD_REGISTRY}/**`,
  });
});
after(async () => {
  // Pulled references are extra tags of the musl image: removing them untags, the image stays.
  for (const reference of pulled) await podman('rmi', reference).catch(() => undefined);
  await t?.stop();
  await slowProxy?.stop();
  await registry?.stop();
});

interface PullFrame {
  type: 'progress' | 'done' | 'error';
  [field: string]: unknown;
}

const framesOf = (text: string): PullFrame[] => sseData<PullFrame>(text);

/** POST /images/pull asking for the event stream, read to its end. */
async function streamedPull(body: unknown, signal?: AbortSignal) {
  return fetch(`${t.url}/images/pull`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

const named = (images: ImageRecord[], reference: string) => images.find((i) => `${i.repository}:${i.tag}` === reference);

describe('GET /images', () => {
  it('lists the agent image at rank 1 and the musl image at rank 4, incompatible, best rank first', async () => {
    const response = await t.request('GET', '/images');
    assert.equal(response.status, 200, JSON.stringify(response.body));
    const images: ImageRecord[] = response.body.images;
    const agent = named(images, AGENT_IMAGE);
    const musl = named(images, MUSL_IMAGE);
    assert.deepEqual([agent?.compatibility_rank, agent?.compatible], [1, true]);
    assert.deepEqual([musl?.compatibility_rank, musl?.compatible], [4, false]);
    assert.ok(agent!.tools.includes('bash') && agent!.tools.includes('git'), agent!.tools.join());
    const order = images.map((i) => [i.compatibility_rank, `${i.repository}:${i.tag}`] as const);
    const sorted = [...order].sort((a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    assert.deepEqual(order, sorted);
  });
});

describe('GET /images/:name', () => {
  it('returns one image by its reference with "/" encoded', async () => {
    const response = await t.request('GET', `/images/${encodeURIComponent(AGENT_IMAGE)}`);
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.equal(response.body.repository, 'localhost/berth-agent');
    assert.equal(response.body.tag, '0.1.0-alpha');
    assert.equal(response.body.compatibility_rank, 1);
  });

  it('returns one image by its reference with "/" left as it is', async () => {
    const response = await t.request('GET', `/images/${MUSL_IMAGE}`);
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.deepEqual([response.body.compatibility_rank, response.body.compatible], [4, false]);
    assert.ok(response.body.tools.includes('sh'));
  });

  it('is a 404 for an image that is not on the host', async () => {
    const response = await t.request('GET', `/images/${encodeURIComponent('localhost/berth-no-such-image:1')}`);
    assert.equal(response.status, 404);
    assert.match(response.body.error, /not found/);
  });

  it('is a 400 for a name that is not an image reference', async () => {
    const response = await t.request('GET', '/images/Not..Valid');
    assert.equal(response.status, 400);
  });
});

describe('an image without any C library (FROM scratch)', () => {
  // One rule for both: the listing ranks it incompatible, and a run in it is refused before any container.
  const scratch = `localhost/berth-test-scratch-${randomBytes(4).toString('hex')}:1`;
  before(async () => buildFromScratch(scratch, 1024));
  after(async () => {
    await podman('rmi', scratch).catch(() => undefined);
  });

  it('is ranked 4, incompatible, by GET /images/:name', async () => {
    const response = await t.request('GET', `/images/${scratch}`);
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.deepEqual([response.body.compatibility_rank, response.body.compatible], [4, false]);
  });

  it('is refused with a 400 by POST /run, and no container is left', async () => {
    const response = await t.request('POST', '/run', { prompt: 'hi', container: { image: scratch } });
    assert.equal(response.status, 400, JSON.stringify(response.body));
    assert.deepEqual(Object.keys(response.body).sort(), ['error', 'status']);
    assert.match(response.body.error, /has no glibc/);
    assert.deepEqual(await t.leftovers(), []);
  });
});

describe('POST /images/pull', () => {
  it('pulls an allowed image from the registry, and it then appears in the listing', async () => {
    const reference = `${registry.host}/allowed/musl:1`;
    pulled.push(reference);
    const response = await t.request('POST', '/images/pull', { image: reference, quiet: true });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.equal(response.body.success, true);
    assert.equal(response.body.image, reference);
    assert.match(response.body.image_id, /^[0-9a-f]{64}$/);
    const listed = named((await t.request('GET', '/images')).body.images, reference);
    assert.deepEqual([listed?.compatibility_rank, listed?.allowed], [4, true]);
  });

  it('refuses a reference that no allowed pattern matches with a 400, though the registry has it', async () => {
    const response = await t.request('POST', '/images/pull', { image: `${registry.host}/forbidden/musl:1` });
    assert.equal(response.status, 400);
    assert.match(response.body.error, /SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS/);
  });

  it('refuses an invalid reference with a 400', async () => {
    const response = await t.request('POST', '/images/pull', { image: 'localhost/UPPER case' });
    assert.equal(response.status, 400);
  });

  it('is a 404 when the registry has no such image', async () => {
    const response = await t.request('POST', '/images/pull', { image: `${registry.host}/allowed/nothing:1` });
    assert.equal(response.status, 404, JSON.stringify(response.body));
  });

  it('is a 502 when the registry cannot be reached', async () => {
    const response = await t.request('POST', '/images/pull', { image: `${DEAD_REGISTRY}/team/app:1` });
    assert.equal(response.status, 502, JSON.stringify(response.body));
  });
});

describe('POST /images/pull with Accept: text/event-stream', () => {
  it('streams Podman\'s progress, a Copying blob line before the end, and ends with the JSON answer\'s fields', async () => {
    const reference = `${registry.host}/streamed/musl:1`;
    pulled.push(reference);
    const response = await streamedPull({ image: reference });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const frames = framesOf(await response.text());
    const copying = frames.findIndex((f) => f.type === 'progress' && /^Copying blob sha256:[0-9a-f]{64}$/.test(String(f.message)));
    assert.ok(copying >= 0, JSON.stringify(frames));
    assert.ok((frames[copying]!.blobs_started as number) >= 1);
    const config = frames.find((f) => f.type === 'progress' && String(f.message).startsWith('Copying config '));
    assert.ok(config && config.blobs_done === config.blobs_started, JSON.stringify(config));
    const done = frames.at(-1)!;
    assert.equal(frames.findIndex((f) => f.type === 'done'), frames.length - 1, 'done is the last frame, after the progress');
    assert.equal(done.success, true);
    assert.equal(done.image, reference);
    assert.match(String(done.image_id), /^[0-9a-f]{64}$/);
    assert.equal((await t.request('GET', `/images/${reference}`)).body.id, done.image_id);
  });

  it('refuses a disallowed reference with a JSON 400 before any stream opens', async () => {
    const response = await streamedPull({ image: `${registry.host}/forbidden/musl:1` });
    assert.equal(response.status, 400);
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
    const body = (await response.json()) as { error: string };
    assert.match(body.error, /SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS/);
  });

  it('ends a pull of an image the registry does not have with an error frame: the JSON answer\'s text and status', async () => {
    const image = `${registry.host}/allowed/nothing:1`;
    const json = await t.request('POST', '/images/pull', { image });
    assert.equal(json.status, 404, JSON.stringify(json.body));
    const response = await streamedPull({ image });
    assert.equal(response.status, 200);
    const frames = framesOf(await response.text());
    assert.deepEqual(frames.at(-1), { type: 'error', error: json.body.error, status: 404 });
    assert.ok(!frames.some((f) => f.type === 'done'));
  });

  it('stops the pull in Podman when the client leaves mid-pull: nothing more is fetched and the image never arrives', async () => {
    const reference = `${slowProxy.host}/streamed/slow:1`;
    pulled.push(reference);
    const controller = new AbortController();
    const response = await streamedPull({ image: reference }, controller.signal);
    assert.equal(response.status, 200);
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!framesOf(text).some((f) => String(f.message).startsWith('Copying blob'))) {
      const { value, done } = await reader.read();
      assert.equal(done, false, `the stream ended before a blob was copied: ${text}`);
      text += decoder.decode(value, { stream: true });
    }
    await delay(500);
    assert.ok(slowProxy.bytesPassed() < 3_000_000, 'the layer is still being fetched');
    controller.abort();

    for (let waited = 0; slowProxy.openConnections() > 0; waited += 100) {
      assert.ok(waited < 10_000, 'Podman closed its connections to the registry');
      await delay(100);
    }
    const stopped = slowProxy.bytesPassed();
    await delay(1000);
    assert.equal(slowProxy.bytesPassed(), stopped, 'nothing more is fetched');
    await assert.rejects(podman('image', 'exists', reference), 'the image did not arrive');
  });
});

describe('GET /images/search', () => {
  it('finds the repositories pushed to the registry', async () => {
    const response = await t.request('GET', `/images/search?q=${encodeURIComponent(`${registry.host}/allowed`)}`);
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.deepEqual(response.body.results, [{ name: `${registry.host}/allowed/musl`, description: '', stars: 0, official: false }]);
  });

  it('refuses a limit outside 1 to 100, and a missing q, with a 400', async () => {
    const q = encodeURIComponent(`${registry.host}/allowed`);
    for (const query of [`q=${q}&limit=0`, `q=${q}&limit=101`, `q=${q}&limit=ten`, 'limit=5']) {
      const response = await t.request('GET', `/images/search?${query}`);
      assert.equal(response.status, 400, `${query}: ${JSON.stringify(response.body)}`);
    }
  });

  it('accepts the maximum limit', async () => {
    const response = await t.request('GET', `/images/search?q=${encodeURIComponent(`${registry.host}/`)}&limit=100`);
    assert.equal(response.status, 200, JSON.stringify(response.body));
    // allowed/musl, forbidden/musl, streamed/musl, streamed/slow
    assert.equal(response.body.results.length, 4);
  });
});
