// Usage: what the model gateway and the egress proxy recorded for the caller. GET /usage sums its model
// requests by UTC day and by run, with its daily limits; GET /usage/runs/{run_id} lists one run's model
// requests and egress decisions (which hosts it reached or was refused). Only the caller's own records.

import { answer, type Api } from './api.js';
import type { CallOptions, RunUsageReport, UsageQuery, UsageReport } from './types.js';

export class Usage {
  constructor(private readonly api: Api) {}

  /**
   * The caller's usage from `from` to `to` (UTC dates, YYYY-MM-DD, both included; default the last 7 days up
   * to today, at most 92): its limits, today's totals, one row per day and one per run, newest first.
   */
  async get(query: UsageQuery = {}, options: CallOptions = {}): Promise<UsageReport> {
    return answer(await this.api.GET('/usage', { params: { query }, signal: options.signal }));
  }

  /** One run's totals, model requests and egress decisions (404 BerthError for another caller's run). */
  async run(runId: string, options: CallOptions = {}): Promise<RunUsageReport> {
    return answer(await this.api.GET('/usage/runs/{run_id}', { params: { path: { run_id: runId } }, signal: options.signal }));
  }
}
