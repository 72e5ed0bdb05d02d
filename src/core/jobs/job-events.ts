// A job's status changes as replayable events (docs/jobs.md "Following a job"): the job store is wrapped so
// that every status it records (pending at submission, then running, then the final one) is appended to
// the event log under the job's stream and delivered to the job's live followers. follow() serves
// GET /jobs/:id/stream: what the log keeps after Last-Event-ID (everything on a first connection: a job's
// history is a handful of events), then live ones, until the final status, then `closed`. With a shared
// event log (several nodes), the live events of a job another node runs reach its followers here through the
// log's feeds (core/events/log-feeds.ts), deduplicated by id with those recorded here.
import type { EventLog, StoredEvent } from '../../store/events/event-log.js';
import { eventStreams } from '../../store/events/event-log.js';
import { isFinished, type Job, type JobChange, type JobListQuery, type JobStatus, type JobStore, type JobSummary, type NewJob, type WebhookState } from '../../store/jobs/job-store.js';
import { EventFanout } from '../agents/subscription.js';
import { type LogFeeds, StreamFeed } from '../events/log-feeds.js';
import { replayThenLive, type EventsLostEvent } from '../events/replay.js';
import { StreamRecorder, type WithId } from '../events/stream-recorder.js';

/** One status change of a job, as `event: status` on its stream. */
export interface JobStatusEvent {
  readonly type: 'status';
  readonly status: JobStatus;
  /** Why it did not complete (failed, crashed, cancelled); absent otherwise. */
  readonly error?: string;
  readonly at: string;
}

/** The end of one follower's stream (not kept: it is about the connection). */
export interface JobClosedEvent {
  readonly type: 'closed';
  readonly at: string;
}

export type JobStreamEvent = WithId<JobStatusEvent> | EventsLostEvent | JobClosedEvent;

/** One follower's view of a job's events; close() ends it at once (the client left). */
export interface JobEventStream {
  readonly events: AsyncIterable<JobStreamEvent>;
  close(): void;
}

export class JobEvents {
  /** Writers of jobs that have not finished (in this process); a finished job's is dropped. */
  private readonly recorders = new Map<string, StreamRecorder>();
  /** Live followers, per job, and what publishes to them: this node's recorder, and the log's feed. */
  private readonly fanouts = new Map<string, Followed>();

  constructor(
    private readonly log: EventLog,
    private readonly onError: (error: unknown, jobId: string) => void,
    private readonly now: () => number = Date.now,
    /** A shared log's feeds (several nodes): the events other nodes record reach this node's followers. */
    private readonly feeds?: LogFeeds,
  ) {}

  /** `store`, with every status it records also recorded as an event of the job. */
  recording(store: JobStore): JobStore {
    return new RecordingJobStore(store, (job) => this.record(job));
  }

  /**
   * A job's events for one follower (its owner has been checked): kept ones after `afterId` (0 when
   * undefined), then live ones until the final status; `current` reads the job as the store has it now.
   */
  follow(jobId: string, afterId: number | undefined, current: () => Promise<Job | undefined>): JobEventStream {
    const followed = this.followedOf(jobId);
    const { fanout } = followed;
    // Subscribed now, before the log is read (replay.ts).
    const live = fanout.subscribe();
    const leave = () => {
      live.close();
      if (fanout.count === 0 && this.fanouts.get(jobId) === followed) {
        this.fanouts.delete(jobId);
        this.feeds?.remove(followed.feed);
      }
    };
    return { events: this.eventsOf(jobId, afterId, current, live, leave), close: leave };
  }

  private async *eventsOf(
    jobId: string,
    afterId: number | undefined,
    current: () => Promise<Job | undefined>,
    live: ReturnType<EventFanout<WithId<JobStatusEvent>>['subscribe']>,
    leave: () => void,
  ): AsyncGenerator<JobStreamEvent, void, undefined> {
    try {
      let job = await current();
      const finished = job !== undefined && isFinished(job.status);
      // Its final event may still be on its way to the log (recorded after the store's write): wait for it.
      if (finished) {
        await this.recorders.get(jobId)?.flushed();
        live.close();
      }
      const events = replayThenLive<JobStatusEvent>({
        log: this.log,
        stream: eventStreams.job(jobId),
        afterId: afterId ?? 0,
        live,
        fromLog,
        now: this.now,
      });
      for await (const event of events) {
        yield event;
        if (event.type === 'status' && isFinished(event.status)) return yield this.closed();
      }
      // The log no longer keeps the final status (pruned by age), or it was never kept (a full disk):
      // the store says how the job ended.
      job = await current();
      if (job && isFinished(job.status)) yield statusEvent(job);
      yield this.closed();
    } finally {
      leave();
    }
  }

  private record(job: Job): void {
    let recorder = this.recorders.get(job.id);
    if (!recorder) {
      recorder = new StreamRecorder(this.log, eventStreams.job(job.id), (error) => this.onError(error, job.id));
      this.recorders.set(job.id, recorder);
    }
    const event = statusEvent(job);
    recorder.record(event, (stored) => {
      const followed = this.fanouts.get(job.id);
      // Published once: the log's feed may have read it first (its notice came back before this delivery).
      if (followed?.feed.admit(stored.id)) followed.fanout.publish(stored);
      if (isFinished(job.status)) this.recorders.delete(job.id);
    });
  }

  private followedOf(jobId: string): Followed {
    let followed = this.fanouts.get(jobId);
    if (!followed) {
      const fanout = new EventFanout<WithId<JobStatusEvent>>();
      const feed = new StreamFeed(
        this.log,
        eventStreams.job(jobId),
        (stored) => fanout.publish(fromLog(stored)),
        (error) => this.onError(error, jobId),
      );
      followed = { fanout, feed };
      this.fanouts.set(jobId, followed);
      this.feeds?.add(feed);
    }
    return followed;
  }

  private closed(): JobClosedEvent {
    return { type: 'closed', at: new Date(this.now()).toISOString() };
  }
}

interface Followed {
  readonly fanout: EventFanout<WithId<JobStatusEvent>>;
  /** Admits each id once, from this node's recorder or from the log (read when another node appended). */
  readonly feed: StreamFeed;
}

function fromLog(stored: StoredEvent): WithId<JobStatusEvent> {
  return { ...(stored.data as unknown as JobStatusEvent), id: stored.id };
}

function statusEvent(job: Job): JobStatusEvent {
  return { type: 'status', status: job.status, ...(job.error !== null && job.status !== 'completed' ? { error: job.error } : {}), at: job.updatedAt };
}

/** Delegates every call; the writes that change a status also hand the job to `recorded`. */
class RecordingJobStore implements JobStore {
  constructor(
    private readonly store: JobStore,
    private readonly recorded: (job: Job) => void,
  ) {}

  async insert(job: NewJob): Promise<Job> {
    const inserted = await this.store.insert(job);
    this.recorded(inserted);
    return inserted;
  }

  async transition(id: string, from: readonly JobStatus[], change: JobChange, at: string): Promise<Job | undefined> {
    const changed = await this.store.transition(id, from, change, at);
    if (changed) this.recorded(changed);
    return changed;
  }

  get(id: string): Promise<Job | undefined> {
    return this.store.get(id);
  }

  list(query: JobListQuery): Promise<JobSummary[]> {
    return this.store.list(query);
  }

  withStatus(status: JobStatus): Promise<Job[]> {
    return this.store.withStatus(status);
  }

  pendingWebhooks(): Promise<Job[]> {
    return this.store.pendingWebhooks();
  }

  setWebhookState(id: string, state: WebhookState): Promise<void> {
    return this.store.setWebhookState(id, state);
  }

  countByStatus(): Promise<Record<JobStatus, number>> {
    return this.store.countByStatus();
  }

  deleteFinishedBefore(cutoff: string): Promise<number> {
    return this.store.deleteFinishedBefore(cutoff);
  }

  close(): Promise<void> {
    return this.store.close();
  }
}
