// What `berth usage` prints for people: the days of the range with a total row, the runs, the limits; for
// one run its model requests and the egress proxy's decisions. Host names and reasons come from code in a
// container: their control characters are shown, never sent to the terminal.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RunUsageReport, UsageReport } from '../../packages/client/src/index.js';
import { count, runUsageText, usageReportText, usd } from '../../packages/cli/src/usage-text.js';

const COUNTERS = { requests: 3, input_tokens: 1200, output_tokens: 340, cache_creation_input_tokens: 0, cache_read_input_tokens: 5, cost_usd: 0.008715, refused: 1 };
const ZERO = { requests: 0, input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, cost_usd: 0, refused: 0 };
const REPORT: UsageReport = {
  caller: 'ada',
  from: '2030-01-01',
  to: '2030-01-02',
  limits: { usd_per_day: 5, tokens_per_day: 1_000_000 },
  today: { date: '2030-01-02', requests: 3, tokens: 1545, cost_usd: 0.008715 },
  total: COUNTERS,
  days: [{ date: '2030-01-01', ...ZERO }, { date: '2030-01-02', ...COUNTERS }],
  runs: [
    {
      run_id: 'run-1',
      agent_id: 'agent-7',
      first_request_at: '2030-01-02T10:00:00.000Z',
      last_request_at: '2030-01-02T10:00:02.000Z',
      ...COUNTERS,
      refusal: "this run's max_budget_usd (0.005 USD) is spent: 0.008715 USD used",
    },
  ],
};

const lines = (text: string) => text.split('\n');

describe('berth usage', () => {
  it('amounts read as people read them: micro-dollars without trailing zeros, counts grouped', () => {
    assert.equal(usd(0.000271), '0.000271');
    assert.equal(usd(5.0012), '5.0012');
    assert.equal(usd(12), '12');
    assert.equal(usd(0.0000004), '0');
    assert.equal(count(1234567), '1,234,567');
  });

  it('prints the caller, the range, today against the limits, every day with a total, and the runs', () => {
    const text = usageReportText(REPORT);
    assert.match(text, /^caller: +ada$/m);
    assert.match(text, /^period: +2030-01-01 to 2030-01-02 \(UTC\)$/m);
    assert.match(text, /^today: +3 requests, 1,545 tokens, 0\.008715 USD \(2030-01-02\)$/m);
    assert.match(text, /^limits: +5 USD, 1,000,000 tokens per UTC day$/m);
    const days = lines(text).filter((line) => /^(DATE|2030-|total)/.test(line));
    assert.equal(days.length, 4);
    assert.match(days[0]!, /^DATE +REQUESTS +INPUT +OUTPUT +CACHE WRITE +CACHE READ +COST USD +REFUSED$/);
    assert.match(days[1]!, /^2030-01-01 +0 +0 +0 +0 +0 +0 +0$/);
    assert.match(days[2]!, /^2030-01-02 +3 +1,200 +340 +0 +5 +0\.008715 +1$/);
    assert.match(days[3]!, /^total +3 +1,200 +340 +0 +5 +0\.008715 +1$/);
    const run = lines(text).find((line) => line.startsWith('run-1'));
    assert.match(run!, /^run-1 +agent-7 +\S+ \S+ +\S+ \S+ +3 +1,545 +0\.008715 +this run's max_budget_usd \(0\.005 USD\) is spent/);
  });

  it('says when there are no limits and no runs', () => {
    const text = usageReportText({ ...REPORT, limits: { usd_per_day: null, tokens_per_day: null }, runs: [] });
    assert.match(text, /^limits: +none$/m);
    assert.match(text, /^no runs with model requests in this period$/m);
  });

  it("prints one run's facts, its model requests and its egress decisions", () => {
    const run: RunUsageReport = {
      run_id: 'run-1',
      session_id: '00000000-0000-4000-8000-000000000001',
      first_request_at: '2030-01-02T10:00:00.000Z',
      last_request_at: '2030-01-02T10:00:02.000Z',
      totals: COUNTERS,
      requests: [
        { at: '2030-01-02T10:00:00.000Z', model: 'claude-sonnet-4-5', status: 200, input_tokens: 1200, output_tokens: 340, cache_creation_input_tokens: 0, cache_read_input_tokens: 5, cost_usd: 0.008715, overhead_ms: 2.8461559999996098 },
        { at: '2030-01-02T10:00:02.000Z', model: 'claude-sonnet-4-5', status: 403, input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, cost_usd: 0, refusal: 'budget spent' },
      ],
      egress: [
        { at: '2030-01-02T10:00:01.000Z', method: 'CONNECT', host: 'allowed.test', port: 443, decision: 'allowed' },
        { at: '2030-01-02T10:00:01.500Z', method: 'HTTP', host: 'other.test', port: 80, decision: 'refused_host', reason: 'other.test is not in the allowlist' },
      ],
    };
    const text = runUsageText(run);
    assert.match(text, /^run: +run-1$/m);
    assert.match(text, /^session: +00000000-0000-4000-8000-000000000001$/m);
    assert.doesNotMatch(text, /^agent:/m);
    assert.match(text, /^requests: +3 \(1 refused\)$/m);
    assert.match(text, /^tokens: +input 1,200, output 340, cache write 0, cache read 5$/m);
    assert.match(text, /^cost: +0\.008715 USD$/m);
    assert.match(text, /^Model requests\nAT +MODEL +STATUS +INPUT +OUTPUT +CACHE WRITE +CACHE READ +COST USD +OVERHEAD MS +REFUSAL$/m);
    assert.match(text, / claude-sonnet-4-5 +200 +1,200 +340 +0 +5 +0\.008715 +2\.8$/m, 'the overhead in tenths of a millisecond');
    assert.match(text, / claude-sonnet-4-5 +403 +0 +0 +0 +0 +0 +budget spent$/m);
    assert.match(text, /^Egress\nAT +METHOD +HOST +DECISION +REASON$/m);
    assert.match(text, / CONNECT +allowed\.test:443 +allowed$/m);
    assert.match(text, / HTTP +other\.test:80 +refused_host +other\.test is not in the allowlist$/m);
  });

  it('says when a run made no model request and asked for no host', () => {
    const text = runUsageText({ run_id: 'run-2', first_request_at: '2030-01-02T10:00:00.000Z', last_request_at: '2030-01-02T10:00:00.000Z', totals: { ...ZERO }, requests: [], egress: [] });
    assert.match(text, /^no model requests$/m);
    assert.match(text, /^no egress decisions$/m);
  });

  it("shows a host name's control characters instead of sending them to the terminal", () => {
    const text = runUsageText({
      run_id: 'run-3',
      first_request_at: '2030-01-02T10:00:00.000Z',
      last_request_at: '2030-01-02T10:00:00.000Z',
      totals: { ...ZERO },
      requests: [],
      egress: [{ at: '2030-01-02T10:00:00.000Z', method: 'CONNECT', host: 'evil\u001b]52;c;aGk=\u0007.test', port: 443, decision: 'refused_host', reason: 'x\u009b2J' }],
    });
    assert.ok(!/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/.test(text), 'no control character but newline reaches the terminal');
    assert.match(text, /evil\^\[\]52;c;aGk=\^G\.test:443/);
  });
});
