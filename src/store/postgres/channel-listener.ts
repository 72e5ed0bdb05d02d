// One connection per node held for `LISTEN <channel>` (issue 26): the job queue's wake-ups and the event log's
// notices both ride on it. The connection is taken from the node's pool and held; when it fails (the server
// restarted, the network dropped, an administrator ended it) it is closed, and a new one listens after a short
// back-off (250 ms, doubling up to 5 s). Each new LISTEN is announced to the caller (`onListening`): whatever
// was announced while no connection listened must then be found by reading the tables; the callers' slow
// polls cover a connection that died without a word.
import type pg from 'pg';
import type { PostgresDatabase } from './database.js';

const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5_000;

export interface ChannelHandlers {
  /** A notification's payload (undefined when the NOTIFY had none). */
  readonly notified: (payload: string | undefined) => void;
  /** A LISTEN took effect: notifications flow (again). */
  readonly listening: () => void;
}

export class PostgresChannelListener {
  private stopped = false;
  private loop: Promise<void> | undefined;
  /** Ends the current LISTEN (stop()). */
  private endListening: (() => void) | undefined;
  private retryTimer: { timer: NodeJS.Timeout; resolve: () => void } | undefined;

  /** `channel` is a constant identifier of Berth's, never input: LISTEN takes no parameters. */
  constructor(
    private readonly database: PostgresDatabase,
    private readonly channel: string,
    private readonly onError: (error: Error) => void,
  ) {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`not a channel name: ${channel}`);
  }

  start(handlers: ChannelHandlers): void {
    if (this.loop) throw new Error(`LISTEN ${this.channel} is already started`);
    this.loop = this.listen(handlers);
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

  private async listen(handlers: ChannelHandlers): Promise<void> {
    let retryMs = RETRY_FIRST_MS;
    while (!this.stopped) {
      try {
        await this.database.withConnection((client) => this.listenOn(client, handlers, () => (retryMs = RETRY_FIRST_MS)));
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
  private async listenOn(client: pg.PoolClient, handlers: ChannelHandlers, reset: () => void): Promise<void> {
    const notified = (message: pg.Notification) => {
      if (message.channel === this.channel) handlers.notified(message.payload);
    };
    let failed!: (error: Error) => void;
    const ended = new Promise<void>((resolve, reject) => {
      this.endListening = resolve;
      failed = reject;
    });
    const onError = (error: Error) => failed(error);
    const onEnd = () => failed(new Error(`the LISTEN ${this.channel} connection ended`));
    client.on('notification', notified);
    client.on('error', onError);
    client.on('end', onEnd);
    try {
      if (this.stopped) return;
      await client.query(`LISTEN ${this.channel}`);
      reset();
      handlers.listening();
      await ended;
      await client.query(`UNLISTEN ${this.channel}`);
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
