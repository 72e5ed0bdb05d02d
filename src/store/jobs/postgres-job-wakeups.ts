// The wake-ups of the shared job queue (issue 26): one connection per node held for `LISTEN berth_jobs`, on
// which the jobs table's trigger (migrations/postgres/003_job_dispatch.sql) announces at commit a job that
// became claimable ('pending') or a claimed or held job that changed ('changed <claimed_by> <node>'). The
// connection is taken from the node's pool and held; when it fails (the server restarted, the network
// dropped, an administrator ended it) it is closed, and a new one listens after a short back-off. Each new
// LISTEN is announced as a 'pending' wake-up: whatever was announced while no connection listened is found
// by the claim that follows. The dispatcher's slow poll covers a connection that died without a word.
import type pg from 'pg';
import type { PostgresDatabase } from '../postgres/database.js';
import type { JobWakeup, JobWakeups } from './job-store.js';

export const JOB_CHANNEL = 'berth_jobs';


export function parseWakeup(payload: string | undefined): JobWakeup {
  if (payload?.startsWith('changed ')) return { kind: 'changed', nodes: payload.slice('changed '.length).split(' ').filter((name) => name !== '') };
  return { kind: 'pending' };
}

const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5_000;

export class PostgresJobWakeups implements JobWakeups {
  private stopped = false;
  private loop: Promise<void> | undefined;
  /** Ends the current LISTEN (stop()). */
  private endListening: (() => void) | undefined;
  private retryTimer: { timer: NodeJS.Timeout; resolve: () => void } | undefined;

  constructor(
    private readonly database: PostgresDatabase,
    private readonly onError: (error: Error) => void,
  ) {}

  start(on: (wakeup: JobWakeup) => void): void {
    if (this.loop) throw new Error('the job wake-ups are already started');
    this.loop = this.listen(on);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.endListening?.();
    if (this.retryTimer) {
      clearTimeout(this.retryTimer.timer);
      this.retryTimer.resolve();
    }
    await this.loop;
  }

  private async listen(on: (wakeup: JobWakeup) => void): Promise<void> {
    let retryMs = RETRY_FIRST_MS;
    while (!this.stopped) {
      try {
        await this.database.withConnection((client) => this.listenOn(client, on, () => (retryMs = RETRY_FIRST_MS)));
      } catch (error) {
        if (this.stopped) return;
        this.onError(error instanceof Error ? error : new Error(String(error)));
        await new Promise<void>((resolve) => {
          this.retryTimer = { timer: setTimeout(resolve, retryMs), resolve };
        });
        this.retryTimer = undefined;
        retryMs = Math.min(RETRY_MAX_MS, retryMs * 2);
      }
    }
  }

  /** Listens on `client` until stop() (resolves) or the connection fails (rejects: withConnection closes it). */
  private async listenOn(client: pg.PoolClient, on: (wakeup: JobWakeup) => void, listening: () => void): Promise<void> {
    const notified = (message: pg.Notification) => {
      if (message.channel === JOB_CHANNEL) on(parseWakeup(message.payload));
    };
    let failed!: (error: Error) => void;
    const ended = new Promise<void>((resolve, reject) => {
      this.endListening = resolve;
      failed = reject;
    });
    const onError = (error: Error) => failed(error);
    const onEnd = () => failed(new Error('the LISTEN connection to the job queue ended'));
    client.on('notification', notified);
    client.on('error', onError);
    client.on('end', onEnd);
    try {
      if (this.stopped) return;
      await client.query(`LISTEN ${JOB_CHANNEL}`);
      listening();
      on({ kind: 'pending' });
      await ended;
      await client.query(`UNLISTEN ${JOB_CHANNEL}`);
    } finally {
      this.endListening = undefined;
      client.off('notification', notified);
      client.off('end', onEnd);
      // Kept until the connection is released: an error on a connection nobody listens to would be thrown.
      void ended.catch(() => undefined);
      setImmediate(() => client.off('error', onError));
    }
  }
}
