// Jobs: listing (a page, or every job through paging), reading, cancelling, waiting for a job to end by
// polling it with a growing interval, and following its status changes (events(), over GET
// /jobs/{id}/stream, reconnecting with Last-Event-ID so that none is missed or yielded twice:
// followed-events.ts).

import { answer, type Api } from './api.js';
import { backoffDelay, delay } from './delay.js';
import { followEvents } from './followed-events.js';
import { pages } from './paging.js';
import type { CallOptions, CancelledJob, Job, JobEvent, JobList, JobQuery, JobStatus, JobSummary } from './types.js';
import type { AgentEventsOptions } from './agents.js';

/** Statuses a job never leaves. */
export const FINAL_JOB_STATUSES: ReadonlySet<JobStatus> = new Set<JobStatus>(['completed', 'failed', 'crashed', 'cancelled']);

/** The event after which a job's stream has nothing more to say (not yielded: the last status says it all). */
const JOB_STREAM_END: ReadonlySet<string> = new Set(['closed']);

/** Jobs fetched per request by `all()` unless told otherwise (Berth allows up to 500). */
const ALL_PAGE_SIZE = 100;

export interface WaitForJobOptions extends CallOptions {
  /** First pause between two polls, in milliseconds. Default 500. */
  interval?: number;
  /** Pauses grow by half each poll up to this. Default 5000. */
  maxInterval?: number;
  /** Gives up after this many milliseconds with a `TimeoutError`. Default: waits as long as it takes. */
  timeout?: number;
  /** Called with the job after every poll, the final one included. */
  onUpdate?: (job: Job) => void;
}

export class Jobs {
  constructor(private readonly api: Api) {}

  /** One page of jobs, newest first. */
  async list(query: JobQuery = {}, options: CallOptions = {}): Promise<JobList> {
    return answer(await this.api.GET('/jobs', { params: { query }, signal: options.signal }));
  }

  /**
   * Every job matching `query.status`, newest first, fetched page by page (`query.limit` jobs per page).
   * A job created while the iteration runs shifts the pages; no job is yielded twice.
   */
  async *all(query: Omit<JobQuery, 'offset'> = {}, options: CallOptions = {}): AsyncGenerator<JobSummary, void, undefined> {
    const limit = query.limit ?? ALL_PAGE_SIZE;
    const seen = new Set<string>();
    const every = pages(async (offset) => {
      const { jobs } = await this.list({ ...query, limit, offset }, options);
      return { items: jobs, hasMore: jobs.length === limit };
    });
    for await (const job of every) {
      if (seen.has(job.id)) continue;
      seen.add(job.id);
      yield job;
    }
  }

  async get(id: string, options: CallOptions = {}): Promise<Job> {
    return answer(await this.api.GET('/jobs/{id}', { params: { path: { id } }, signal: options.signal }));
  }

  /**
   * The job's statuses as events: its history, then its changes as they happen, until its final status
   * (the iteration then ends). A dropped stream is reconnected, with back-off, with Last-Event-ID.
   */
  events(id: string, options: AgentEventsOptions = {}): AsyncGenerator<JobEvent, void, undefined> {
    return followEvents<JobEvent>(
      {
        name: `job ${id}`,
        open: async (headers, signal) => answer(await this.api.GET('/jobs/{id}/stream', { params: { path: { id } }, headers, parseAs: 'stream', signal })),
        untypedAs: 'status',
        final: JOB_STREAM_END,
        yieldsFinal: false,
      },
      options,
    );
  }

  /** Cancels a pending or running job (409 BerthError when it has already finished). */
  async cancel(id: string, options: CallOptions = {}): Promise<CancelledJob> {
    return answer(await this.api.DELETE('/jobs/{id}', { params: { path: { id } }, signal: options.signal }));
  }

  /**
   * Polls a job until it is completed, failed, crashed or cancelled, and answers it in that state (a
   * failed job is an answer, not an error). The pause between polls starts at `interval` and grows to
   * `maxInterval`.
   */
  async wait(id: string, options: WaitForJobOptions = {}): Promise<Job> {
    const { interval = 500, maxInterval = 5000, timeout, onUpdate } = options;
    const timer = timeout === undefined ? undefined : AbortSignal.timeout(timeout);
    const signals = [options.signal, timer].filter((s): s is AbortSignal => s !== undefined);
    const signal = signals.length > 1 ? AbortSignal.any(signals) : signals[0];
    let last: Job | undefined;
    try {
      for (let poll = 0; ; poll++) {
        last = await this.get(id, { signal });
        onUpdate?.(last);
        if (FINAL_JOB_STATUSES.has(last.status)) return last;
        await delay(backoffDelay(poll, { initial: interval, max: Math.max(interval, maxInterval), factor: 1.5 }), signal);
      }
    } catch (error) {
      if (timer?.aborted && !options.signal?.aborted) {
        throw new DOMException(`job ${id} did not finish within ${timeout} ms${last ? ` (it is ${last.status})` : ''}`, 'TimeoutError');
      }
      throw error;
    }
  }
}
