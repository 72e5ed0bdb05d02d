// Test doubles for the gateway's unit tests (test/unit/gateway-*.test.ts): grants held in a map, budgets
// that answer what a test says, a recorder keeping what it is given, and a gateway started on 127.0.0.1
// with the real metrics. The sockets are real; only the other helpers' services are stood in for.
import type { BudgetDecision, BudgetLimit, Grant, GrantHolder, GrantLookup, ModelRequestRecord, EgressDecisionRecord, UpstreamModel, UsageRecorder } from '../../src/core/gateway/gateway-types.js';
import { parseHostPattern, type EgressPolicy, type HostPattern } from '../../src/egress-policy.js';
import { startGateway, type GatewayHandle, type GatewayOptions } from '../../src/gateway/gateway-server.js';
import { createMetrics, type Metrics } from '../../src/metrics/metrics.js';

export class FakeGrants implements GrantLookup {
  readonly grants = new Map<string, Grant>();

  /** A token bound to a run of `caller` with `policy` (default: allowlist of nothing). */
  bind(token: string, holder: Partial<GrantHolder> & { runId: string }): GrantHolder {
    const bound: GrantHolder = { kind: 'run', caller: 'alice', policy: { mode: 'allowlist', allow: [] }, ...holder };
    this.grants.set(token, { state: 'bound', runId: bound.runId, issuedAt: Date.now(), holder: bound });
    return bound;
  }

  /** The run ended: its token no longer exists. */
  revoke(token: string): void {
    this.grants.delete(token);
  }

  /** A token issued with its container but not yet claimed by a run. */
  issue(token: string, runId: string): void {
    this.grants.set(token, { state: 'issued', runId, issuedAt: Date.now() });
  }

  lookup(token: string): Grant | undefined {
    return this.grants.get(token);
  }
}

export class FakeBudgets {
  decision: BudgetDecision = { ok: true };
  readonly checked: GrantHolder[] = [];

  refuse(limit: BudgetLimit, message: string): void {
    this.decision = { ok: false, limit, message };
  }

  /** Set: the budgets' totals cannot be read (the usage store is down); every check fails with it. */
  failure: Error | undefined;

  async check(holder: GrantHolder): Promise<BudgetDecision> {
    this.checked.push(holder);
    if (this.failure) throw this.failure;
    return this.decision;
  }
}

export class FakeRecorder implements UsageRecorder {
  readonly requests: ModelRequestRecord[] = [];
  readonly egress: EgressDecisionRecord[] = [];
  async recordRequest(record: ModelRequestRecord): Promise<void> {
    this.requests.push(record);
  }
  async recordEgress(record: EgressDecisionRecord): Promise<void> {
    this.egress.push(record);
  }
}

export function allowlist(...patterns: string[]): EgressPolicy {
  return { mode: 'allowlist', allow: patterns.map((text) => parseHostPattern(text) as HostPattern) };
}

export interface TestGateway {
  readonly handle: GatewayHandle;
  readonly url: string;
  readonly grants: FakeGrants;
  readonly budgets: FakeBudgets;
  readonly usage: FakeRecorder;
  readonly metrics: Metrics;
  readonly refusals: { runId: string; message: string }[];
  readonly logs: { details: Record<string, unknown>; message: string }[];
  /** A counter's value for one label value (0 when the series does not exist: callers check names separately). */
  count(metric: 'egressRequests' | 'gatewayRequests', label: string): Promise<number>;
}

export async function startTestGateway(options: { upstream?: UpstreamModel } & Partial<Pick<GatewayOptions, 'allowedClients' | 'resolveOverride' | 'lookup' | 'revocationSweepMs'>> = {}): Promise<TestGateway> {
  const grants = new FakeGrants();
  const budgets = new FakeBudgets();
  const usage = new FakeRecorder();
  const metrics = createMetrics();
  const refusals: { runId: string; message: string }[] = [];
  const logs: { details: Record<string, unknown>; message: string }[] = [];
  const handle = await startGateway({
    host: '127.0.0.1',
    port: 0,
    upstream: options.upstream ?? { baseUrl: 'http://127.0.0.1:9', credential: { kind: 'api_key', value: 'sk-real' } },
    grants,
    budgets,
    usage,
    metrics,
    onBudgetRefusal: (runId, message) => refusals.push({ runId, message }),
    log: (details, message) => logs.push({ details, message }),
    ...(options.allowedClients ? { allowedClients: options.allowedClients } : {}),
    ...(options.resolveOverride ? { resolveOverride: options.resolveOverride } : {}),
    ...(options.lookup ? { lookup: options.lookup } : {}),
    ...(options.revocationSweepMs ? { revocationSweepMs: options.revocationSweepMs } : {}),
  });
  return {
    handle, url: `http://127.0.0.1:${handle.port}`, grants, budgets, usage, metrics, refusals, logs,
    async count(metric, label) {
      const values = (await metrics[metric].get()).values;
      return values.find((value) => Object.values(value.labels).includes(label))?.value ?? 0;
    },
  };
}
