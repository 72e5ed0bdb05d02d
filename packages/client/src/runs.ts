// Runs: POST /run (wait for the answer), POST /run/async (queue a job) and GET /run/stream (the run's text
// as it is produced). A run's container lives only as long as its request: aborting run() or leaving a
// stream() early stops the run and Berth removes the container.

import { answer, type Api } from './api.js';
import { BerthNetworkError } from './errors.js';
import { readSse } from './sse.js';
import type { AsyncRunRequest, AsyncRunResponse, CallOptions, RunRequest, RunResponse, RunStreamFrame, StreamRequest } from './types.js';

export class Runs {
  constructor(private readonly api: Api) {}

  async run(request: RunRequest, options: CallOptions = {}): Promise<RunResponse> {
    return answer(await this.api.POST('/run', { body: request, signal: options.signal }));
  }

  async runAsync(request: AsyncRunRequest, options: CallOptions = {}): Promise<AsyncRunResponse> {
    return answer(await this.api.POST('/run/async', { body: request, signal: options.signal }));
  }

  /**
   * The frames of a streamed run, ending with its `done` or `error` frame. Breaking out of the loop or
   * aborting stops the run.
   */
  async *stream(request: StreamRequest, options: CallOptions = {}): AsyncGenerator<RunStreamFrame, void, undefined> {
    const { signal } = options;
    const body = answer(await this.api.GET('/run/stream', { params: { query: request }, parseAs: 'stream', signal }));
    try {
      for await (const message of readSse(body)) {
        const frame = JSON.parse(message.data) as RunStreamFrame;
        yield frame;
        if (frame.type === 'done' || frame.type === 'error') return;
      }
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      throw new BerthNetworkError(`the run stream broke off: ${(error as Error).message}`, { cause: error });
    }
    if (signal?.aborted) throw signal.reason;
    throw new BerthNetworkError('the run stream ended before the run finished (no done or error frame)');
  }
}
