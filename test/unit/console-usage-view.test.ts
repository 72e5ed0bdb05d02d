// The console's Usage pages: amounts and limits as a person reads them, and a run's egress decisions
// counted per decision with the refusals first, each a word with a tone.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EgressDecisionRecord } from '@berth/client';
import { daysWithRequests, decisionLabel, decisionTone, egressSummary, formatCount, formatUsd, limitUse, totalTokens } from '../../packages/console/src/usage/usage-view.js';

const decision = (host: string, port: number, kind: EgressDecisionRecord['decision']): EgressDecisionRecord => ({ at: '2030-01-02T10:00:00.000Z', method: 'CONNECT', host, port, decision: kind });

describe("the console's usage view", () => {
  it('formats dollars to the micro-dollar and counts with grouping', () => {
    assert.equal(formatUsd(0.000271), '$0.000271');
    assert.equal(formatUsd(5), '$5');
    assert.equal(formatCount(1545), '1,545');
    assert.equal(totalTokens({ input_tokens: 1200, output_tokens: 340, cache_creation_input_tokens: 0, cache_read_input_tokens: 5 }), 1545);
  });

  it('shows what is used of a daily limit, capped at 100 %, and says when there is none', () => {
    assert.equal(limitUse(0.42, 5, formatUsd), '$0.42 of $5 (8 %)');
    assert.equal(limitUse(6, 5, formatUsd), '$6 of $5 (100 %)');
    assert.equal(limitUse(1545, null, formatCount), 'no limit');
  });

  it('gives every refusal the bad tone, allowed the good one, a failure neither', () => {
    assert.equal(decisionTone('allowed'), 'good');
    for (const refused of ['refused_host', 'refused_address', 'refused_sni', 'refused_protocol', 'refused_mode', 'refused_credential']) assert.equal(decisionTone(refused), 'bad', refused);
    assert.equal(decisionTone('failed'), 'muted');
    assert.equal(decisionLabel('refused_address'), 'refused: internal address');
    assert.equal(decisionLabel('refused_something_new'), 'refused something new', 'a decision the console does not know reads as words');
  });

  it("counts a run's decisions per decision, refusals first, each host once", () => {
    const summary = egressSummary([
      decision('allowed.test', 443, 'allowed'),
      decision('allowed.test', 443, 'allowed'),
      decision('other.test', 443, 'refused_host'),
      decision('169.254.169.254', 80, 'refused_address'),
      decision('gone.test', 443, 'failed'),
      decision('other.test', 443, 'refused_host'),
      decision('third.test', 443, 'refused_host'),
    ]);
    assert.deepEqual(summary, [
      { decision: 'refused_host', count: 3, hosts: ['other.test:443', 'third.test:443'] },
      { decision: 'refused_address', count: 1, hosts: ['169.254.169.254:80'] },
      { decision: 'failed', count: 1, hosts: ['gone.test:443'] },
      { decision: 'allowed', count: 2, hosts: ['allowed.test:443'] },
    ]);
    assert.deepEqual(egressSummary([]), []);
  });

  it('lists the days with requests, newest first', () => {
    const days = [{ date: '2030-01-01', requests: 2 }, { date: '2030-01-02', requests: 0 }, { date: '2030-01-03', requests: 1 }];
    assert.deepEqual(daysWithRequests(days).map((day) => day.date), ['2030-01-03', '2030-01-01']);
  });
});
