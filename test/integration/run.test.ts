// POST /run end to end: real Podman, the real engine binary mounted from its image, the offline model.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestBerth, type TestBerth } from '../support/berth.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// Once with the pool of pre-started engines on (the default: these runs take pooled engines) and once with it
// off (each run creates its container): a run answers the same either way.
for (const pool of ['on', 'off'] as const) {
  describe(`POST /run with the embedded offline model, the pool of pre-started engines ${pool}`, () => {
    let t: TestBerth;
    before(async () => {
      t = await startTestBerth(pool === 'off' ? { SERVICE_POOL_SIZE: '0', SERVICE_AGENT_POOL_SIZE: '0' } : {});
    });
    afterEach(async () => {
      assert.deepEqual(await t.leftovers(), [], 'no Berth container may outlive its run');
    });
    after(async () => {
      await t.stop();
    });

    test('a plain prompt returns the answer, a run id and a UUID session_id', async () => {
      const response = await t.request('POST', '/run', { prompt: 'hello there' });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.equal(response.body.status, 'completed');
      assert.equal(response.body.output, 'offline model: hello there');
      assert.match(response.body.id, /^run-/);
      assert.match(response.body.session_id, UUID);
      assert.ok(response.body.usage.token_usage.input_tokens > 0);
      assert.ok(response.body.usage.estimated_cost_usd > 0);
    });

    test('a prompt that looks like flags and shell is passed verbatim', async () => {
      const prompt = 'say: --help $(touch /tmp/pwned) `id` "quoted" \'single\' ; rm -rf /';
      const response = await t.request('POST', '/run', { prompt });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.equal(response.body.output, prompt.slice('say: '.length));
    });

    test('the engine sees /opt/claude, the memory limit, the workdir, and its credential', async () => {
      const response = await t.request('POST', '/run', {
        prompt: [
          'run: ls /opt/claude',
          // cgroup v2 (Debian 12's default) names the limit memory.max; v1 (this CI host) memory.limit_in_bytes.
          'run: cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes',
          'run: pwd',
          'run: test -n "$ANTHROPIC_API_KEY" && echo credential-set',
          'run: id -u',
        ].join('\n'),
        workdir: '/work/project',
        container: { memory: '256m' },
      });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      const lines = response.body.output.split('\n');
      assert.deepEqual(lines, ['claude', String(256 * 1024 * 1024), '/work/project', 'credential-set', '1000']);
    });

    test('json: with a json_schema yields structured_output', async () => {
      const response = await t.request('POST', '/run', {
        prompt: 'json: {"answer": 42, "ok": true}',
        engine: {
          output_format: 'json',
          json_schema: { type: 'object', properties: { answer: { type: 'number' }, ok: { type: 'boolean' } }, required: ['answer'] },
        },
      });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.deepEqual(response.body.structured_output, { answer: 42, ok: true });
    });

    test('json_schema given as a JSON string (as some clients send it) works the same', async () => {
      const response = await t.request('POST', '/run', {
        prompt: 'json: {"answer": 7}',
        engine: { output_format: 'json', json_schema: JSON.stringify({ type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'] }) },
      });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      assert.deepEqual(response.body.structured_output, { answer: 7 });
    });

    test('output_format stream-json returns the engine\'s raw event lines', async () => {
      const response = await t.request('POST', '/run', { prompt: 'say: streamed', engine: { output_format: 'stream-json' } });
      assert.equal(response.status, 200, JSON.stringify(response.body));
      const events = response.body.output.trim().split('\n').map((line: string) => JSON.parse(line));
      assert.equal(events[0].type, 'system');
      assert.equal(events.at(-1).type, 'result');
      assert.equal(events.at(-1).result, 'streamed');
    });

    test('a run past container.timeout ends in about that time with a 500 that says so', async () => {
      const started = Date.now();
      const response = await t.request('POST', '/run', { prompt: 'run: /bin/sleep 600', container: { timeout: '5s' } });
      const elapsed = Date.now() - started;
      assert.equal(response.status, 500);
      assert.equal(response.body.status, 'error');
      assert.match(response.body.error, /timed out after 5s/);
      assert.ok(elapsed < 20_000, `took ${elapsed} ms`);
    });

    test('a memory hog under container.memory 64m is reported as out of memory', async () => {
      const response = await t.request('POST', '/run', {
        prompt: 'run: x=a; while :; do x=$x$x; done',
        container: { memory: '64m' },
      });
      assert.equal(response.status, 500);
      assert.match(response.body.error, /out of memory \(container\.memory 64m\)/);
      // conmon writes a file named `oom` into its working directory: Berth's, never the directory it was started in.
      assert.equal(existsSync(join(process.cwd(), 'oom')), false, 'no stray oom file where Berth was started');
      assert.ok(existsSync(join(t.config.dataDir, 'podman')), 'Berth runs Podman in its own directory');
    });

    test('an engine API failure is a 500 with the engine\'s message', async () => {
      const response = await t.request('POST', '/run', { prompt: 'fail: overloaded' });
      assert.equal(response.status, 500);
      assert.equal(response.body.status, 'error');
      assert.match(response.body.error, /^engine failed: /);
    });

    test('a musl image is refused with 400 before any run', async () => {
      const response = await t.request('POST', '/run', { prompt: 'hi', container: { image: 'localhost/berth-test-musl:latest' } });
      assert.equal(response.status, 400);
      assert.deepEqual(Object.keys(response.body).sort(), ['error', 'status']);
      assert.match(response.body.error, /Alpine\/musl-based images are not supported/);
    });

    test('an image that is not on the host is a 400 naming it', async () => {
      const response = await t.request('POST', '/run', { prompt: 'hi', container: { image: 'localhost/does-not-exist:1' } });
      assert.equal(response.status, 400);
      assert.match(response.body.error, /localhost\/does-not-exist:1/);
    });

    test('GET /health reports every component ok and a -alpha version', async () => {
      const response = await t.request('GET', '/health');
      assert.equal(response.status, 200);
      assert.equal(response.body.status, 'ok');
      assert.match(response.body.version, /^\d+\.\d+\.\d+-alpha$/);
      const names = response.body.components.map((c: { name: string }) => c.name);
      assert.deepEqual(names, ['container-runtime', 'engine-credentials-file', 'engine-credentials-secret']);
      assert.equal(response.body.components[0].status, 'ok');
      assert.equal(response.body.components[2].status, 'ok');
    });

    test('a run that starts a session is answered at its result; the next requests on the session find it whole', async () => {
      const first = await t.request('POST', '/run', { prompt: 'say: first answer' });
      assert.equal(first.status, 200, JSON.stringify(first.body));
      const { session_id } = first.body;
      // Sent the moment the answer arrives, while the engine may still be finishing its transcript: each waits
      // for the session instead of seeing it half-done or busy.
      const [messages, listed, resumed] = await Promise.all([
        t.request('GET', `/sessions/${session_id}/messages`),
        t.request('GET', '/sessions'),
        t.request('POST', '/run', { prompt: 'recall:', engine: { session_id, resume: true } }),
      ]);
      assert.equal(messages.status, 200, JSON.stringify(messages.body));
      const contents = messages.body.messages.map((m: { content: string }) => m.content);
      assert.ok(contents.includes('say: first answer') && contents.includes('first answer'), JSON.stringify(contents));
      assert.ok(listed.body.sessions.some((s: { id: string; title: string }) => s.id === session_id && s.title === 'say: first answer'), JSON.stringify(listed.body));
      assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
      assert.match(resumed.body.output, /say: first answer/);
      // The resumed run's usage covers both turns; the first run's covered its own.
      assert.ok(resumed.body.usage.token_usage.input_tokens > first.body.usage.token_usage.input_tokens);
    });

    test('GET /claude/status says the offline model is in use', async () => {
      const response = await t.request('GET', '/claude/status');
      assert.equal(response.status, 200);
      assert.equal(response.body.configured, true);
      assert.match(response.body.message, /offline model/);
    });

    test('GET /swagger/doc.json serves the OpenAPI document with the run route', async () => {
      const response = await t.request('GET', '/swagger/doc.json');
      assert.equal(response.status, 200);
      assert.ok(response.body.paths['/run'].post);
    });
  });
}

describe('request bodies', () => {
  let t: TestBerth;
  before(async () => {
    t = await startTestBerth();
  });
  after(async () => {
    await t.stop();
  });

  test('a DELETE with Content-Type application/json and no body is accepted', async () => {
    const response = await t.request('DELETE', '/sessions/00000000-0000-4000-8000-000000000000', undefined, { 'content-type': 'application/json' });
    assert.equal(response.status, 404);
    assert.match(response.body.error, /not found/);
  });

  test('an empty POST /run body is a 400, not a crash', async () => {
    const response = await t.request('POST', '/run', '', { 'content-type': 'application/json' });
    assert.equal(response.status, 400);
    assert.equal(response.body.status, 'error');
  });

  test('a body that is not valid UTF-8 is refused with 400, not decoded with replacement characters', async () => {
    const body = Buffer.concat([Buffer.from('{"prompt":"bad '), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const response = await fetch(`${t.url}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(response.status, 400);
    assert.deepEqual(await response.json(), { error: 'request body is not valid UTF-8', status: 'error' });
    assert.deepEqual(await t.leftovers(), []);
  });
});
