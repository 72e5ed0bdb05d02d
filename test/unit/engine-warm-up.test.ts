// The warm-up's traces, taken out again (src/engine/warm-up.ts), on the engine's real output: the head of a
// warmed engine's transcript (the blank turn's three records, then the run's prompt) and its two result
// lines (the blank turn's, numbered 0, and the run's, numbered 1), recorded from the pinned engine.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { WARM_PROMPT, WARM_TURN, renumberedResult, withoutWarmUpTurn } from '../../src/engine/warm-up.js';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url), 'utf8');
const head = fixture('warmed-engine-transcript-head.jsonl');
const [blankResult, runResult] = fixture('warmed-engine-results.jsonl').trim().split('\n') as [string, string];
const records = (text: string) => text.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);

test('the blank turn is a user message of whitespace only, which Berth refuses from callers', () => {
  assert.deepEqual(JSON.parse(WARM_TURN), { type: 'user', message: { role: 'user', content: WARM_PROMPT } });
  assert.equal(WARM_PROMPT.trim(), '');
});

test('a warmed transcript loses the blank turn\'s three records, and the run\'s prompt becomes the root', () => {
  const before = records(head);
  assert.equal(before[0]!.content, WARM_PROMPT, 'the fixture starts with the warm-up');
  const notice = before[2]!;
  assert.equal(before[5]!.parentUuid, notice.uuid);

  const stripped = withoutWarmUpTurn(Buffer.from(head)).toString('utf8');
  const after = records(stripped);
  assert.equal(after.length, before.length - 3);
  assert.deepEqual(after[0], before[3], 'the run\'s prompt queued');
  assert.equal(after[2]!.type, 'user');
  assert.equal(after[2]!.parentUuid, null);
  assert.deepEqual({ ...after[2], parentUuid: notice.uuid }, before[5], 'only the parent changed');
  assert.deepEqual(after[3], before[6], 'the records below keep their parents');
  assert.doesNotMatch(stripped, new RegExp(String(notice.uuid)));
  // Byte for byte what the engine wrote, apart from the three lines and the one parent.
  const lines = head.split('\n');
  assert.equal(stripped, [...lines.slice(3, 5), lines[5]!.replace(`"parentUuid":"${String(notice.uuid)}"`, '"parentUuid":null'), ...lines.slice(6)].join('\n'));
});

test('any other transcript is kept as it is', () => {
  const lines = head.split('\n');
  const fresh = Buffer.from(lines.slice(3).join('\n'));
  assert.equal(withoutWarmUpTurn(fresh), fresh, 'a fresh engine\'s transcript');
  const userBlank = Buffer.from(lines.join('\n').replace(`"content":"${WARM_PROMPT}"`, '"content":"say: hi"'));
  assert.equal(withoutWarmUpTurn(userBlank), userBlank, 'a first prompt that is not the warm-up');
  for (const odd of ['', 'not json\n', '{"type":"queue-operation","operation":"enqueue","content":" "}\n{"type":"custom-title"}\n']) {
    const buffer = Buffer.from(odd);
    assert.equal(withoutWarmUpTurn(buffer), buffer, JSON.stringify(odd));
  }
});

test('the run\'s result is numbered as a fresh engine numbers its first', () => {
  assert.match(runResult, /"result_index":1[,}]/);
  const renumbered = renumberedResult(runResult, 1);
  assert.equal(JSON.parse(renumbered).result_index, 0);
  assert.deepEqual({ ...JSON.parse(renumbered), result_index: 1 }, JSON.parse(runResult), 'nothing else changed');
  assert.equal(renumbered.length, runResult.length);
  assert.equal(renumberedResult(runResult, 0), runResult);
});

test('lines that are not results, or whose number is not past the warm-up, are kept', () => {
  const nested = '{"type":"assistant","message":{"result_index":3}}';
  assert.equal(renumberedResult(nested, 1), nested);
  assert.equal(renumberedResult(blankResult, 1), blankResult, 'index 0 is not lowered below 0');
  const inText = '{"type":"result","result":"\\"result_index\\":7","result_index":2}';
  assert.equal(renumberedResult(inText, 1), '{"type":"result","result":"\\"result_index\\":7","result_index":1}');
  for (const odd of ['{"type":"result","result_index":"2"}', '{"type":"result","result_index":1.5}', '{"type":"result"', '{"type":"result","result_index":2 }']) {
    assert.equal(renumberedResult(odd, 1), odd, odd);
  }
});
