// The fault-injection matrix: each fault is injected while one piece of work of every mode is in flight
// (a sync run, an async job with a webhook, a stream, a persistent agent mid-turn and one idle), against
// Berth as a child process on real Podman with the real engine and a model outside the service. Every cell
// asserts the work's outcome; every round asserts that nothing of the instance is left once it settles (no
// container, no process, no secret), and that every accepted job reached a terminal state. The matrix of
// observed outcomes is printed at the end (and shown in docs/reliability.md).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { serviceProcess, type ServiceProcess } from '../support/service-process.js';
import { waitFor } from '../support/wait.js';
import { sseData } from '../support/sse.js';

/** The service's log (this process's and the one before), without the request lines that would drown it. */
function lastWords(svc: ServiceProcess, chars: number): string {
  return svc.output().split('\n').filter((line) => !line.includes('"msg":"request"')).join('\n').slice(-chars);
}

const MODES = ['sync', 'job', 'stream', 'agent mid-turn', 'agent idle'] as const;
type Mode = (typeof MODES)[number];
const FINISHED = new Set(['completed', 'failed', 'crashed', 'cancelled']);

/** What a round's work does; `marker` makes the output of each piece of work checkable. */
interface Work {
  /** The prompt of the runs and of the agent's turn. */
  readonly prompt: (marker: string) => string;
  /** The output that proves the work ran to its end. */
  readonly end: (marker: string) => string;
  readonly container?: Record<string, unknown>;
  /** How long a caller waits for an agent's turn before it deletes the agent (default 60 s). */
  readonly agentPatienceMs?: number;
}

/** A prompt that keeps a container busy for 8 s, with text before and after. */
const LONG: Work = {
  prompt: (marker) => `say: begin ${marker}\nrun: /bin/sleep 8\nsay: end ${marker}`,
  end: (marker) => `end ${marker}`,
};

interface Fault {
  readonly name: string;
  /** Service environment for the round (the restart after the fault uses the default environment). */
  readonly env?: Record<string, string>;
  readonly work: Work;
  /** The modes the fault applies to; the others show `n/a` in the matrix. */
  readonly modes: readonly Mode[];
  /** Prepares the service's host before the round's start; returns what undoes it after the round. */
  prepare?(svc: ServiceProcess): Promise<() => Promise<void>>;
  /** Injected once every piece of work is in flight (its container runs and the engine is at work). */
  inject(round: Round): Promise<void>;
  /** The outcome every mode must show. */
  readonly expect: Partial<Record<Mode, string>>;
}

interface Round {
  readonly svc: ServiceProcess;
  readonly abort: AbortController;
  readonly agents: string[];
}

describe('fault injection: every fault × every mode, nothing lost, nothing left', { timeout: 1_800_000 }, () => {
  let svc: ServiceProcess;
  let receiver: Server;
  let hookUrl = '';
  const deliveries = new Map<string, any>();
  const matrix = new Map<string, Partial<Record<Mode, string>>>();

  before(async () => {
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        const parsed = JSON.parse(body);
        deliveries.set(parsed.job_id, parsed);
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    hookUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    svc = await serviceProcess({
      // Every container of the instance belongs to a piece of work; pre-started engines would be counted too.
      SERVICE_POOL_SIZE: '0',
      SERVICE_AGENT_POOL_SIZE: '0',
      SERVICE_WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
      SERVICE_WEBHOOK_RETRY_BASE_DELAY: '200ms',
    });
  });
  after(async () => {
    await svc?.dispose();
    await new Promise((resolve) => receiver?.close(resolve));
    const rows = [...matrix.entries()].map(([fault, cells]) => `| ${fault} | ${MODES.map((mode) => cells[mode] ?? 'n/a').join(' | ')} |`);
    console.log(['', '| fault | ' + MODES.join(' | ') + ' |', '|---|' + MODES.map(() => '---').join('|') + '|', ...rows, ''].join('\n'));
  });

  const restart = async () => {
    await svc.signal('SIGKILL');
    await svc.start();
  };
  const killContainers = async () => {
    for (const name of svc.containers()) execFileSync('podman', ['kill', '--signal', 'KILL', name], { stdio: 'ignore' });
  };

  const FAULTS: Fault[] = [
    {
      name: 'kill -9 of the service, then start again',
      work: LONG,
      modes: MODES,
      inject: restart,
      expect: {
        sync: 'cut off; session kept, resumable',
        job: 'completed, full output; webhook sent',
        stream: 'cut off; session kept, resumable',
        'agent mid-turn': 'turn completed; usable',
        'agent idle': 'usable',
      },
    },
    ...(['stop', 'drain', 'detach'] as const).map(
      (mode): Fault => ({
        name: `SIGTERM in shutdown mode ${mode}, then start again`,
        env: { SERVICE_SHUTDOWN_MODE: mode },
        work: LONG,
        modes: MODES,
        async inject({ svc }) {
          await svc.signal('SIGTERM');
          await svc.start();
        },
        expect: {
          stop: {
            sync: '503: the service is shutting down and stopped this run',
            job: 'crashed (service_stop); webhook sent',
            stream: 'error frame: the service is shutting down and stopped this run',
            'agent mid-turn': 'turn not completed; exited: agent: stopped because the service is shutting down',
            'agent idle': 'exited: agent: stopped because the service is shutting down',
          },
          drain: {
            sync: '200, full output',
            job: 'completed, full output; webhook sent',
            stream: 'done, full output',
            'agent mid-turn': 'turn completed; exited: agent: stopped because the service is shutting down',
            'agent idle': 'exited: agent: stopped because the service is shutting down',
          },
          detach: {
            sync: 'cut off; session kept, resumable',
            job: 'completed, full output; webhook sent',
            stream: 'cut off; session kept, resumable',
            'agent mid-turn': 'turn completed; usable',
            'agent idle': 'usable',
          },
        }[mode],
      }),
    ),
    {
      name: 'the Podman service killed and started again',
      work: LONG,
      modes: MODES,
      async inject({ svc }) {
        const pid = Number(execFileSync('cat', [join(svc.dir, 'data', 'podman', 'podman.pid')], { encoding: 'utf8' }));
        process.kill(pid, 'SIGKILL');
      },
      expect: {
        sync: '200, full output',
        job: 'completed, full output; webhook sent',
        stream: 'done, full output',
        'agent mid-turn': 'turn completed; usable',
        'agent idle': 'usable',
      },
    },
    {
      name: 'the engine killed inside its container',
      work: LONG,
      modes: MODES,
      async inject(round) {
        await killContainers();
        // Berth notices each agent's end by itself; the outcomes are read once it has.
        for (const agent of round.agents) {
          await waitFor(`agent ${agent} to be exited`, async () => (await svc.api('GET', `/agents/${agent}`)).body.status === 'exited' || undefined, 30_000);
        }
      },
      expect: {
        sync: '500: engine was killed by SIGKILL',
        job: 'crashed (signal); webhook sent',
        stream: 'error frame: engine was killed by SIGKILL',
        'agent mid-turn': 'turn not completed; exited: agent: the engine exited with code 137',
        'agent idle': 'exited: agent: the engine exited with code 137',
      },
    },
    {
      name: 'the container runs out of memory',
      // Limits are request fields of /run and /run/async only (a stream takes a prompt, an agent no limits).
      work: { prompt: () => 'run: x=a; while :; do x=$x$x; done', end: () => 'never', container: { memory: '128m' } },
      modes: ['sync', 'job'],
      inject: async () => undefined,
      expect: {
        sync: '500: run was killed for running out of memory',
        job: 'crashed (oom); webhook sent',
      },
    },
    {
      name: 'the model answers errors',
      work: { prompt: () => 'fail: auth', end: () => 'never' },
      // An agent's engine retries a failed model call for minutes (its own back-off) before the turn ends.
      modes: ['sync', 'job', 'stream'],
      inject: async () => undefined,
      expect: {
        sync: '500: engine failed: Invalid API key · Fix external API key',
        job: 'failed: Invalid API key · Fix external API key; webhook sent',
        stream: 'error frame: engine failed: Invalid API key · Fix external API key',
      },
    },
    {
      name: 'the model hangs (the run times out; the agent is deleted)',
      work: { prompt: () => 'sleep: 600000\nsay: never', end: () => 'never', container: { timeout: '6s' }, agentPatienceMs: 10_000 },
      modes: ['sync', 'job', 'agent mid-turn'],
      inject: async () => undefined,
      expect: {
        sync: '500: run timed out after 6s',
        job: 'crashed (timeout); webhook sent',
        'agent mid-turn': 'turn not completed; deleted while generating',
      },
    },
    {
      name: 'the disk of the job database fills up mid-run, then space is freed',
      work: LONG,
      modes: MODES,
      async prepare(svc) {
        // The service's data directory (job and agent databases, Podman's socket) on a small file system of its own.
        const data = join(svc.dir, 'data');
        await mkdir(data, { recursive: true });
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=16m,mode=0700', 'tmpfs', data]);
        return async () => {
          execFileSync('umount', ['-l', data]);
        };
      },
      async inject({ svc }) {
        const filler = join(svc.dir, 'data', 'filler');
        execFileSync('sh', ['-c', `cat /dev/zero > ${filler} 2>/dev/null || true`]);
        // While the disk is full the runs in flight end, and new jobs are refused as such: 503
        // BERTH_ERR_STORAGE_FULL. SQLite may still find room for one in pages its write-ahead log already
        // holds, so each job carries ~0.9 MB (a comment line the offline model ignores) and they keep coming
        // until one is refused; those accepted before must then finish like any other.
        const padding = `\n${'#'.repeat(900_000)}`;
        const accepted: string[] = [];
        let refused: { status: number; body: any } | undefined;
        for (let i = 0; i < 30 && refused === undefined; i++) {
          const late = await svc.api('POST', '/run/async', { prompt: `say: submitted on a full disk${padding}` });
          if (late.status === 200) accepted.push(late.body.job_id as string);
          else refused = late;
        }
        assert.ok(refused, `a full disk refuses new jobs (${accepted.length} accepted)`);
        assert.equal(refused.status, 503, JSON.stringify(refused.body));
        // BERTH_ERR_STORAGE_FULL, named after the store that could not write: the job's workspace index or the
        // job database (whichever the job reaches first with the disk full).
        assert.deepEqual(Object.keys(refused.body).sort(), ['error', 'status']);
        assert.match(refused.body.error, /^the (job database|workspace index) cannot be written: its disk is full \(SERVICE_DATA_DIR\); retry once space is freed$/);
        await delay(9_000);
        await rm(filler);
        for (const id of accepted) {
          const finished = await waitFor('a job submitted on a full disk', async () => {
            const { body } = await svc.api('GET', `/jobs/${id}`);
            return FINISHED.has(body.status) ? body : undefined;
          }, 60_000);
          assert.equal(finished.status, 'completed', JSON.stringify(finished).slice(0, 500));
        }
      },
      expect: {
        sync: '200, full output',
        job: 'completed, full output; webhook sent',
        stream: 'done, full output',
        'agent mid-turn': 'turn completed; usable',
        'agent idle': 'usable',
      },
    },
    {
      name: 'the client disconnects mid-run',
      work: LONG,
      modes: ['sync', 'stream', 'agent mid-turn'],
      async inject({ abort }) {
        abort.abort();
      },
      // A disconnect cancels the run (its container is removed); its session keeps what the engine wrote.
      expect: {
        sync: 'cut off; session kept, resumable',
        stream: 'cut off; session kept, resumable',
        'agent mid-turn': 'turn completed; usable',
      },
    },
  ];

  for (const fault of FAULTS.filter((f) => !process.env.BERTH_FAULTS || process.env.BERTH_FAULTS.split(',').some((name) => f.name.includes(name)))) {
    test(fault.name, async () => {
      const round: Round = { svc, abort: new AbortController(), agents: [] };
      const id = randomBytes(3).toString('hex');
      const undo = fault.prepare ? await fault.prepare(svc) : async () => undefined;
      await svc.start(fault.env);
      let outcomes: Partial<Record<Mode, string>>;
      try {
        outcomes = await runRound(round, fault, id);
        matrix.set(fault.name, outcomes);
      } catch (error) {
        throw new Error(`${(error as Error).message}\nthe service's last words:\n${lastWords(svc, 8_000)}`, { cause: error });
      } finally {
        for (const agent of round.agents) await svc.api('DELETE', `/agents/${agent}`).catch(() => undefined);
        await svc.signal('SIGTERM');
        await undo();
      }
      assert.deepEqual(svc.containers(), [], `no container of the instance is left; the service's last words:\n${lastWords(svc, 6_000)}`);
      assert.equal(processesOf(svc.dir), '', 'no process of the instance is left');
      assert.deepEqual(outcomes, fault.expect, `the outcome of every mode under: ${fault.name}; the service's last words:\n${lastWords(svc, 12_000)}`);
    });
  }

  /** Starts every mode's work, injects the fault once all are in flight, and describes each outcome. */
  async function runRound(round: Round, fault: Fault, id: string): Promise<Partial<Record<Mode, string>>> {
    const marker = (mode: Mode) => `${mode.replace(/ /g, '-')}-${id}`;
    const settle = new Map<Mode, () => Promise<string>>(
      await Promise.all(fault.modes.map(async (mode) => [mode, await startWork(round, fault.work, mode, marker(mode))] as const)),
    );
    await delay(2_500); // every engine reaches its Bash tool (or its model call)
    await fault.inject(round);
    const outcomes: Partial<Record<Mode, string>> = {};
    for (const [mode, outcome] of settle) {
      outcomes[mode] = await outcome().catch((error: unknown) => `test error: ${(error as Error).message}`);
    }
    return outcomes;
  }

  /**
   * Starts one piece of work and waits until it is in flight; returns how to describe its outcome once the
   * fault is injected (and the service, if the fault stopped it, started again).
   */
  async function startWork(round: Round, work: Work, mode: Mode, marker: string): Promise<() => Promise<string>> {
    const body = { prompt: work.prompt(marker), ...(work.container ? { container: work.container } : {}) };
    const end = work.end(marker);
    const inFlight = (count: () => boolean) => waitFor(`${mode} in flight`, async () => count() || undefined, 60_000);
    if (mode === 'sync' || mode === 'stream') {
      const before = new Set(svc.containers());
      // A stream takes its prompt in the query (GET /run/stream), a sync run the whole request.
      const response = (
        mode === 'sync'
          ? fetch(`${svc.url()}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: round.abort.signal })
          : fetch(`${svc.url()}/run/stream?${new URLSearchParams({ prompt: body.prompt })}`, { signal: round.abort.signal })
      ).then(async (r) => ({ status: r.status, text: await r.text() }));
      response.catch(() => undefined);
      await inFlight(() => svc.containers().some((name) => !before.has(name)));
      // What a cut-off run leaves in its session is there once the run has ended (its container removed),
      // which takes a moment after a disconnect: looked for until then.
      const cutOff = async () => {
        const found = await waitFor('the cut-off run\'s session', async () => {
          const session = await sessionOf(marker, end);
          return session === 'session lost' ? undefined : session;
        }, 30_000).catch(() => 'session lost');
        return `cut off; ${found}`;
      };
      return async () => {
        const answered = await response.catch(() => undefined);
        if (answered === undefined) return cutOff();
        if (mode === 'sync') {
          const parsed = JSON.parse(answered.text);
          if (answered.status !== 200) return `${answered.status}: ${errorGist(parsed.error)}`;
          return String(parsed.output).includes(end) ? '200, full output' : `200, partial output`;
        }
        const frames = sseData<{ type: string; content?: string; error?: string }>(answered.text);
        const error = frames.find((frame) => frame.type === 'error');
        if (error) return `error frame: ${errorGist(error.error)}`;
        const output = frames.filter((frame) => frame.type === 'output').map((frame) => frame.content).join('');
        if (frames.some((frame) => frame.type === 'done')) return output.includes(end) ? 'done, full output' : 'done, partial output';
        return cutOff();
      };
    }
    if (mode === 'job') {
      const submitted = await svc.api('POST', '/run/async', { ...body, webhook_url: hookUrl });
      assert.equal(submitted.status, 200, JSON.stringify(submitted.body));
      const jobId: string = submitted.body.job_id;
      await inFlight(() => true);
      await waitFor('the job to run', async () => (await svc.api('GET', `/jobs/${jobId}`)).body.status === 'running' || undefined);
      return async () => {
        const job = await waitFor(`job ${jobId} to finish`, async () => {
          const { body: current } = await svc.api('GET', `/jobs/${jobId}`);
          return FINISHED.has(current.status) ? current : undefined;
        }, 120_000);
        const webhook = await waitFor('its webhook', async () => deliveries.get(jobId), 30_000).catch(() => undefined);
        const reason = job.crash_info?.reason ? ` (${job.crash_info.reason})` : job.status === 'failed' ? `: ${errorGist(job.error)}` : '';
        const output = job.status === 'completed' ? (String(job.output).includes(end) ? ', full output' : ', partial output') : '';
        return `${job.status}${reason}${output}; ${webhook?.status === job.status ? 'webhook sent' : 'no webhook'}`;
      };
    }
    // Agents take no container limits: the agent modes of a fault are its prompt only.
    const spawned = await svc.api('POST', '/agents', {});
    assert.equal(spawned.status, 200, JSON.stringify(spawned.body));
    const agentId: string = spawned.body.id;
    round.agents.push(agentId);
    await waitFor('the agent to be idle', async () => (await svc.api('GET', `/agents/${agentId}`)).body.status === 'idle' || undefined);
    if (mode === 'agent mid-turn') {
      const sent = await svc.api('POST', `/agents/${agentId}/send`, { prompt: work.prompt(marker) });
      assert.equal(sent.status, 200, JSON.stringify(sent.body));
    }
    return async () => {
      const settled = await waitFor(`agent ${agentId} to settle`, async () => {
        const { status, body: snapshot } = await svc.api('GET', `/agents/${agentId}`);
        if (status === 404) return { status: 'gone (404)' };
        return status === 200 && snapshot.status !== 'generating' && snapshot.status !== 'starting' ? snapshot : undefined;
      }, work.agentPatienceMs ?? 60_000).catch(async () => {
        // A turn that never ends (a hanging model) is ended by its caller.
        await svc.api('DELETE', `/agents/${agentId}`);
        return { status: 'deleted while generating' };
      });
      const turn = mode === 'agent mid-turn' ? `turn ${settled.turns_completed === 1 ? 'completed' : 'not completed'}; ` : '';
      if (settled.status === 'exited') return `${turn}exited: ${errorGist(settled.exit_error)}`;
      if (settled.status !== 'idle') return `${turn}${settled.status}`;
      const again = await svc.api('POST', `/agents/${agentId}/send`, { prompt: `say: again ${marker}` });
      if (again.status !== 200) return `${turn}idle, send refused ${again.status}`;
      const after = await waitFor('the next turn', async () => {
        const { body: snapshot } = await svc.api('GET', `/agents/${agentId}`);
        return snapshot.status !== 'generating' ? snapshot : undefined;
      }, 60_000).catch((error: Error) => {
        throw new Error(`${error.message}\n${svc.diagnose(agentId)}`);
      });
      return `${turn}${after.status === 'idle' ? 'usable' : `next turn: ${after.status}`}`;
    };
  }

  /** The session a cut-off run wrote, found by its marker: kept (what the engine wrote) and resumable. */
  async function sessionOf(marker: string, end: string): Promise<string> {
    const { body } = await svc.api('GET', '/sessions');
    for (const session of body.sessions as { id: string }[]) {
      const messages = (await svc.api('GET', `/sessions/${session.id}/messages?limit=500`)).body.messages as { role: string; content: string }[] | undefined;
      if (!messages?.some((m) => m.content.includes(marker))) continue;
      const resumed = await svc.api('POST', '/run', { prompt: 'recall:', engine: { session_id: session.id, resume: true } });
      // The prompt names the end marker too: only the engine's own messages count.
      const full = messages.some((m) => m.role === 'assistant' && m.content.includes(end));
      return `session kept${full ? ' with full output' : ''}, ${resumed.status === 200 && String(resumed.body.output).includes(marker) ? 'resumable' : `not resumable (${resumed.status})`}`;
    }
    return 'session lost';
  }
});

/** The first words of an error text: enough to tell outcomes apart in the matrix. */
function errorGist(text: unknown): string {
  return String(text ?? '').split(/[.;(]/)[0]!.trim().slice(0, 60);
}

/** Processes whose command line names the instance's directory (its Berth, its Podman service). */
function processesOf(dir: string): string {
  try {
    return execFileSync('pgrep', ['-af', dir], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
}
