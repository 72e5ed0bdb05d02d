// Random bodies thrown at POST /run of a real Berth: only 200, 400, 413 or 503 come back, every error has
// the error body, and a refused request creates no container, no secret and no session directory.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import fc from 'fast-check';
import { startTestBerth, type TestBerth } from '../support/berth.js';

let t: TestBerth;
let created = 0;
let secretsCreated = 0;

before(async () => {
  t = await startTestBerth({ SERVICE_MAX_PROMPT_BYTES: '2048', SERVICE_MAX_BODY_BYTES: '8192' });
  const original = t.berth.runtime.createContainer.bind(t.berth.runtime);
  t.berth.runtime.createContainer = async (spec) => {
    // The pool refills in the background: its engines are no request's doing.
    if (!t.berth.pools.ownContainerNames().includes(spec.name)) created++;
    return original(spec);
  };
  // Counted at this Berth's own runtime: a host-wide `podman secret ls` races with other test files that
  // create secrets of their own at the same time.
  const createSecret = t.berth.runtime.createSecret.bind(t.berth.runtime);
  t.berth.runtime.createSecret = async (name, value) => {
    secretsCreated++;
    return createSecret(name, value);
  };
});

after(async () => {
  await t.stop();
});

/** Entries of the sessions directory, but the sessions of engines the pool started ahead of any request. */
async function requestSessions(): Promise<string[]> {
  // Listed first, then the pool asked: it names its sessions before their directories exist.
  const entries = await readdir(t.config.agent.sessionsDir);
  const pooled = new Set(t.berth.pools.ownFiles().sessionIds);
  return entries.filter((name) => !pooled.has(name));
}

const text = fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 40 }), fc.constantFrom('', '/', '..', '/etc', '/workspace', '$(id)', 'a\u0000b', 'x'.repeat(3000)));
const jsonValue = fc.oneof(text, fc.integer(), fc.double(), fc.boolean(), fc.constant(null), fc.array(text, { maxLength: 3 }), fc.dictionary(text, text, { maxKeys: 3 }));

// Bodies shaped like run requests, with every field at times wrong, plus arbitrary JSON.
const runLike = fc.record(
  {
    prompt: fc.oneof(text, jsonValue),
    workdir: fc.oneof(text, jsonValue),
    engine: fc.oneof(
      jsonValue,
      fc.record(
        {
          model: fc.oneof(text, jsonValue),
          effort: fc.oneof(fc.constantFrom('low', 'max', 'extreme'), jsonValue),
          output_format: fc.oneof(fc.constantFrom('text', 'json', 'yaml'), jsonValue),
          max_turns: fc.oneof(fc.integer({ min: -5, max: 5 }), jsonValue),
          allowed_tools: fc.oneof(fc.array(text, { maxLength: 3 }), jsonValue),
          resume: fc.oneof(fc.boolean(), jsonValue),
          session_id: fc.oneof(fc.constantFrom('../../etc', 'not-a-uuid', ''), jsonValue),
          typo_field: jsonValue,
        },
        { requiredKeys: [] },
      ),
    ),
    container: fc.oneof(
      jsonValue,
      fc.record(
        {
          image: fc.oneof(fc.constantFrom('localhost/berth-test-musl:latest', 'alpine', 'UPPER/case', '-rm'), text),
          volumes: fc.oneof(fc.array(fc.oneof(text, fc.constantFrom('/etc:/etc', '/tmp:/mnt:rshared', 'rel:/x', '/a:/b:ro,rw')), { maxLength: 3 }), jsonValue),
          secrets_env: fc.oneof(fc.dictionary(fc.constantFrom('LD_PRELOAD', 'OK_NAME', '1bad', 'PATH'), text, { maxKeys: 3 }), jsonValue),
          memory: fc.oneof(fc.constantFrom('0m', '64q', '-1g', '99999g', '512m'), jsonValue),
          cpus: fc.oneof(fc.constantFrom('0', '-1', '1e9', 'two'), jsonValue),
          cpu_shares: fc.oneof(fc.integer({ min: -10, max: 10 }), jsonValue),
          timeout: fc.oneof(fc.constantFrom('0s', '5x', '-1m', '999999h'), jsonValue),
          environment: jsonValue,
        },
        { requiredKeys: [] },
      ),
    ),
    extra: jsonValue,
  },
  { requiredKeys: [] },
);

// Now and then a well-formed request, so the property also covers bodies that really run.
const plausible = fc.record({
  prompt: fc.string({ minLength: 1, maxLength: 30 }).filter((p) => p.trim() !== '' && !/[\u0000-\u001f\u007f]/.test(p) && !/^\s*(fail|run|slow|sleep):/m.test(p)),
  workdir: fc.constantFrom('/workspace', '/work/a', '/srv/x_y-z'),
});

test('random bodies get only 200/400/413/503, and refused ones create nothing', async (context) => {
  let refusedCount = 0;
  let acceptedCount = 0;
  await fc.assert(
    fc.asyncProperty(fc.oneof({ arbitrary: plausible, weight: 1 }, { arbitrary: runLike, weight: 15 }, { arbitrary: jsonValue, weight: 4 }), async (body) => {
      const before = created;
      const sessionsBefore = await requestSessions();
      const response = await t.request('POST', '/run', JSON.stringify(body), { 'content-type': 'application/json' });
      assert.ok([200, 400, 413, 503].includes(response.status), `status ${response.status} for ${JSON.stringify(body)}: ${JSON.stringify(response.body)}`);
      if (response.status === 200) {
        acceptedCount++;
        return;
      }
      refusedCount++;
      assert.deepEqual(Object.keys(response.body).sort(), ['error', 'status']);
      assert.equal(response.body.status, 'error');
      assert.ok(response.body.error.length > 0);
      assert.equal(created, before, `a container was created for refused body ${JSON.stringify(body)}`);
      assert.deepEqual(await requestSessions(), sessionsBefore);
    }),
    { numRuns: 300, seed: Number(process.env.FUZZ_SEED ?? 20261123) },
  );
  assert.ok(refusedCount > 200, `refused ${refusedCount}`);
  assert.ok(acceptedCount > 0, 'some bodies ran');
  assert.equal(secretsCreated, 0, 'no secret was created');
  assert.deepEqual(await t.leftovers(), []);
  context.diagnostic(`fuzz: ${refusedCount} refused, ${acceptedCount} run`);
});

test('bodies that are not JSON objects are 400, oversized ones 413', async () => {
  for (const raw of ['', 'null', '[]', '"prompt"', '{"prompt":', '\u0000']) {
    const response = await t.request('POST', '/run', raw, { 'content-type': 'application/json' });
    assert.equal(response.status, 400, `${JSON.stringify(raw)} → ${response.status}`);
  }
  const big = await t.request('POST', '/run', { prompt: 'x'.repeat(20_000) });
  assert.equal(big.status, 413);
  const longPrompt = await t.request('POST', '/run', { prompt: 'x'.repeat(3000) });
  assert.equal(longPrompt.status, 413);
  assert.match(longPrompt.body.error, /prompt/);
});
