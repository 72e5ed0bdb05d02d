// Image discovery end to end: real Podman, the locally built images, and a real registry on loopback
// (plain HTTP, declared in SERVICE_IMAGE_INSECURE_REGISTRIES) for pull and search.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestBerth, type TestBerth } from '../support/berth.js';
import { podman, startTestRegistry, type TestRegistry } from '../support/registry.js';

const AGENT_IMAGE = 'localhost/berth-agent:0.1.0-alpha';
const MUSL_IMAGE = 'localhost/berth-test-musl:latest';
// Nothing listens on the discard port: a registry that cannot be reached.
const DEAD_REGISTRY = '127.0.0.1:9';

let t: TestBerth;
let registry: TestRegistry;
const pulled: string[] = [];

interface ImageRecord {
  repository: string;
  tag: string;
  compatibility_rank: number;
  compatible: boolean;
  tools: string[];
  allowed: boolean;
}

before(async () => {
  registry = await startTestRegistry();
  await registry.push(MUSL_IMAGE, 'allowed/musl:1');
  await registry.push(MUSL_IMAGE, 'forbidden/musl:1');
  t = await startTestBerth({
    SERVICE_AGENT_IMAGE: AGENT_IMAGE,
    SERVICE_IMAGE_INSECURE_REGISTRIES: registry.host,
    SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS: `localhost/*,${registry.host}/allowed/*,${DEAD_REGISTRY}/**`,
  });
});
after(async () => {
  // Pulled references are extra tags of the musl image: removing them untags, the image stays.
  for (const reference of pulled) await podman('rmi', reference).catch(() => undefined);
  await t?.stop();
  await registry?.stop();
});

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
    assert.equal(response.body.results.length, 2);
  });
});
