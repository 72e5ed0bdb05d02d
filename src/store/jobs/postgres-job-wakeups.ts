// The wake-ups of the shared job queue (issue 26), on `LISTEN berth_jobs`: the jobs table's trigger
// (migrations/postgres/003_job_dispatch.sql) announces at commit a job that became claimable ('pending') or a
// claimed or held job that changed ('changed <claimed_by> <node>'). Each new LISTEN is announced as a
// 'pending' wake-up: whatever was announced while no connection listened is found by the claim that follows.
// The dispatcher's slow poll covers a connection that died without a word.
import type { PostgresDatabase } from '../postgres/database.js';
import { PostgresChannelListener } from '../postgres/channel-listener.js';
import type { JobWakeup, JobWakeups } from './job-store.js';

export const JOB_CHANNEL = 'berth_jobs';

export function parseWakeup(payload: string | undefined): JobWakeup {
  if (payload?.startsWith('changed ')) return { kind: 'changed', nodes: payload.slice('changed '.length).split(' ').filter((name) => name !== '') };
  return { kind: 'pending' };
}

export class PostgresJobWakeups implements JobWakeups {
  private readonly listener: PostgresChannelListener;

  constructor(database: PostgresDatabase, onError: (error: Error) => void) {
    this.listener = new PostgresChannelListener(database, JOB_CHANNEL, onError);
  }

  start(on: (wakeup: JobWakeup) => void): void {
    this.listener.start({ notified: (payload) => on(parseWakeup(payload)), listening: () => on({ kind: 'pending' }) });
  }

  stop(): Promise<void> {
    return this.listener.stop();
  }
}
