// What the cluster test demands of a node loss, as pure checks over what the test recorded (unit-tested in
// test/unit/cluster-ledger.test.ts), so that the integration test's assertions say plainly what failed:
// - every accepted job reaches one final state, recorded once (one final status event in its stream), and
//   never a second one (a job crashed as node_lost is never run again to completion elsewhere);
// - every job's webhook is delivered exactly once, with the job's final status, and none for a job that
//   was never accepted;
// - a stream read over several connections (reconnected with Last-Event-ID) is the log's events, in order,
//   none missing and none twice.

export const FINAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'failed', 'crashed', 'cancelled']);

export interface JobOutcome {
  readonly id: string;
  /** The status GET /jobs/:id answered at the end. */
  readonly status: string;
  /** The statuses of its stream's status events, in order (Last-Event-ID: 0: the whole kept history). */
  readonly statusEvents: readonly string[];
}

export interface WebhookDelivery {
  readonly job_id: string;
  readonly status: string;
}

/** Problems with the accepted jobs' ends and webhooks; empty when each ended once and was announced once. */
export function jobLedgerProblems(accepted: readonly string[], outcomes: readonly JobOutcome[], deliveries: readonly WebhookDelivery[]): string[] {
  const problems: string[] = [];
  const byId = new Map(outcomes.map((outcome) => [outcome.id, outcome]));
  const delivered = new Map<string, WebhookDelivery[]>();
  for (const delivery of deliveries) delivered.set(delivery.job_id, [...(delivered.get(delivery.job_id) ?? []), delivery]);
  for (const id of accepted) {
    const outcome = byId.get(id);
    if (outcome === undefined) {
      problems.push(`${id}: no outcome recorded`);
      continue;
    }
    if (!FINAL_STATUSES.has(outcome.status)) problems.push(`${id}: still ${outcome.status}`);
    const finals = outcome.statusEvents.filter((status) => FINAL_STATUSES.has(status));
    if (finals.length !== 1) problems.push(`${id}: ${finals.length} final status events (${outcome.statusEvents.join(' > ')})`);
    else if (finals[0] !== outcome.status) problems.push(`${id}: its stream ended ${finals[0]}, the job reads ${outcome.status}`);
    const webhooks = delivered.get(id) ?? [];
    if (webhooks.length !== 1) problems.push(`${id}: ${webhooks.length} webhook deliveries`);
    else if (webhooks[0]!.status !== outcome.status) problems.push(`${id}: webhook said ${webhooks[0]!.status}, the job reads ${outcome.status}`);
  }
  const known = new Set(accepted);
  for (const id of delivered.keys()) if (!known.has(id)) problems.push(`${id}: a webhook for a job never accepted`);
  return problems;
}

export interface StreamEvent {
  readonly id: number;
  readonly event: string;
}

/**
 * Problems with what several connections to one stream received together, against the whole log
 * (Last-Event-ID: 0): a duplicate id, an event missing in between, or out of order. Only the stretch the
 * connections covered is compared (from the log's event of the first id received to the last one).
 */
export function streamProblems(received: readonly StreamEvent[], log: readonly StreamEvent[]): string[] {
  const problems: string[] = [];
  const seen = new Set<number>();
  for (const event of received) {
    if (seen.has(event.id)) problems.push(`event ${event.id} received twice`);
    seen.add(event.id);
  }
  for (let i = 1; i < received.length; i += 1) {
    if (received[i]!.id <= received[i - 1]!.id) problems.push(`event ${received[i]!.id} came after ${received[i - 1]!.id}`);
  }
  if (received.length === 0) return [...problems, 'nothing received'];
  const first = log.findIndex((event) => event.id === received[0]!.id);
  const last = log.findIndex((event) => event.id === received.at(-1)!.id);
  if (first < 0 || last < 0) return [...problems, `the received ids ${received[0]!.id}..${received.at(-1)!.id} are not in the log`];
  for (const event of log.slice(first, last + 1)) {
    if (!seen.has(event.id)) problems.push(`event ${event.id} (${event.event}) missed`);
  }
  for (const event of received) {
    const inLog = log.find((logged) => logged.id === event.id);
    if (inLog === undefined) problems.push(`event ${event.id} is not in the log`);
    else if (inLog.event !== event.event) problems.push(`event ${event.id}: received ${event.event}, the log has ${inLog.event}`);
  }
  return problems;
}
