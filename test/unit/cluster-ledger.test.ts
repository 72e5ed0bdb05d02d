import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jobLedgerProblems, streamProblems, type JobOutcome } from '../support/cluster-ledger.js';

const done = (id: string, status = 'completed'): JobOutcome => ({ id, status, statusEvents: ['pending', 'running', status] });

test('jobs that ended once, each announced once with its status: no problem', () => {
  assert.deepEqual(
    jobLedgerProblems(['a', 'b'], [done('a'), done('b', 'crashed')], [{ job_id: 'a', status: 'completed' }, { job_id: 'b', status: 'crashed' }]),
    [],
  );
});

test('a job still running, or without an outcome, is a problem', () => {
  const running: JobOutcome = { id: 'a', status: 'running', statusEvents: ['pending', 'running'] };
  assert.deepEqual(jobLedgerProblems(['a', 'b'], [running], [{ job_id: 'a', status: 'running' }]), [
    'a: still running',
    'a: 0 final status events (pending > running)',
    'b: no outcome recorded',
  ]);
});

test('a job run twice (crashed, then completed elsewhere) is caught by its two final events', () => {
  const twice: JobOutcome = { id: 'a', status: 'completed', statusEvents: ['pending', 'running', 'crashed', 'running', 'completed'] };
  assert.deepEqual(jobLedgerProblems(['a'], [twice], [{ job_id: 'a', status: 'completed' }]), ['a: 2 final status events (pending > running > crashed > running > completed)']);
});

test('a final event that disagrees with the record is caught', () => {
  const odd: JobOutcome = { id: 'a', status: 'completed', statusEvents: ['pending', 'crashed'] };
  assert.deepEqual(jobLedgerProblems(['a'], [odd], [{ job_id: 'a', status: 'completed' }]), ['a: its stream ended crashed, the job reads completed']);
});

test('webhooks: missing, twice, wrong status, or for an unknown job', () => {
  assert.deepEqual(jobLedgerProblems(['a'], [done('a')], []), ['a: 0 webhook deliveries']);
  assert.deepEqual(jobLedgerProblems(['a'], [done('a')], [{ job_id: 'a', status: 'completed' }, { job_id: 'a', status: 'completed' }]), ['a: 2 webhook deliveries']);
  assert.deepEqual(jobLedgerProblems(['a'], [done('a')], [{ job_id: 'a', status: 'crashed' }]), ['a: webhook said crashed, the job reads completed']);
  assert.deepEqual(jobLedgerProblems(['a'], [done('a')], [{ job_id: 'a', status: 'completed' }, { job_id: 'x', status: 'completed' }]), ['x: a webhook for a job never accepted']);
});

const log = [1, 2, 5, 6, 9].map((id) => ({ id, event: id === 9 ? 'turn_end' : 'output' }));

test('a stream read over two connections that together hold the log: no problem', () => {
  assert.deepEqual(streamProblems([log[0]!, log[1]!, log[2]!, log[3]!, log[4]!], log), []);
  // The stretch covered is what counts: starting later in the log is fine.
  assert.deepEqual(streamProblems([log[2]!, log[3]!, log[4]!], log), []);
});

test('a gap, a duplicate, an event out of order or foreign to the log is named', () => {
  assert.deepEqual(streamProblems([log[0]!, log[1]!, log[3]!, log[4]!], log), ['event 5 (output) missed']);
  assert.deepEqual(streamProblems([log[0]!, log[1]!, log[1]!, log[2]!], log), ['event 2 received twice', 'event 2 came after 2']);
  assert.deepEqual(streamProblems([log[0]!, log[2]!, log[1]!], log), ['event 2 came after 5']);
  assert.deepEqual(streamProblems([log[0]!, { id: 3, event: 'output' }, log[2]!], log), ['event 2 (output) missed', 'event 3 is not in the log']);
  assert.deepEqual(streamProblems([{ id: 1, event: 'turn_end' }], log), ['event 1: received turn_end, the log has output']);
  assert.deepEqual(streamProblems([], log), ['nothing received']);
});
