// The learner step's pieces that take no model: which groups the zero-variance filter keeps, over a learner's own
// responses (GRPO/GSPO) and over every agent's (HACPO); and the report's split of namespaced metric rows.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rowsPerAgent } from '../src/report/run-data.js';
import { groupsWithVariance } from '../src/train/learner-step.js';
import { learnerView, type SampleRecord } from '../src/train/sample-table.js';

/** A table record of `generator` for prompt `group` with `reward` (tokens only for the generator). */
function record(id: number, generator: string, group: number, reward: number): SampleRecord {
  return {
    id,
    generator,
    role: generator,
    episode: id,
    group,
    prompt: `q${group}`,
    gold: '1',
    text: 'x',
    tokens: { [generator]: { prompt: [1], response: [2], generatorSpan: 1 } },
    dropped: {},
    generatorLogProbs: [-1],
    refLogProbs: {},
    reward,
    rewardParts: { math: reward },
    truncated: false,
    stoppedByEos: false,
  };
}

test('filterZeroVariance keeps exactly the groups whose rewards vary (single agent)', () => {
  // 3 prompts × 4 responses; prompt 1's rewards are all 1, so only prompts 0 and 2 carry signal. Looking the
  // per-response flags up by group index (the old bug) would keep prompt 1 and nothing would be dropped.
  const rewards = [
    [1, 0, 0, 1],
    [1, 1, 1, 1],
    [0, 0, 1, 0],
  ];
  const table = rewards.flatMap((rs, g) => rs.map((r, i) => record(4 * g + i, 'a', g, r)));
  const keep = groupsWithVariance(table, learnerView(table, 'a', false).records);
  assert.deepEqual(keep, [true, true, true, true, false, false, false, false, true, true, true, true]);
  // The first group constant instead: the flags follow the group, not the position.
  const first = table.map((r) => ({ ...r, reward: r.group === 0 ? 0 : r.group === 1 ? r.id % 2 : r.reward }));
  assert.deepEqual(groupsWithVariance(first, learnerView(first, 'a', false).records), [
    ...[false, false, false, false],
    ...[true, true, true, true],
    ...[true, true, true, true],
  ]);
});

test('with shared rollouts a group is constant only when every agent got the same reward', () => {
  // Agent a solved prompt 0 every time, agent b never: a constant group for a alone, signal when shared.
  const table = [
    ...[1, 1].map((r, i) => record(i, 'a', 0, r)),
    ...[0, 1].map((r, i) => record(2 + i, 'a', 1, r)),
    ...[0, 0].map((r, i) => record(4 + i, 'b', 0, r)),
    ...[1, 1].map((r, i) => record(6 + i, 'b', 1, r)),
  ];
  const alone = groupsWithVariance(table, learnerView(table, 'a', false).records);
  assert.deepEqual(alone.slice(0, 4), [false, false, true, true]);
  const all = table.map((r) => r.id);
  assert.deepEqual(groupsWithVariance(table, all), new Array(8).fill(true));
  const allEqual = table.map((r) => ({ ...r, reward: r.group === 1 ? 1 : r.reward }));
  assert.deepEqual(groupsWithVariance(allEqual, all), [true, true, false, false, true, true, false, false]);
});

test('a learner view holds its own records, and foreign ones only when shared and spelled for it', () => {
  const table = [record(0, 'a', 0, 1), record(1, 'a', 0, 0), record(2, 'b', 0, 1), record(3, 'b', 0, 0)];
  table[2]!.tokens.a = { prompt: [1], response: [3, 4], generatorSpan: 1 };
  table[3]!.dropped.a = 'unencodable text';
  assert.deepEqual(learnerView(table, 'a', false), { records: [0, 1], dropped: 0 });
  assert.deepEqual(learnerView(table, 'a', true), { records: [0, 1, 2], dropped: 1 });
});

test('the report splits a row of namespaced metrics into one row per agent', () => {
  const row = {
    step: 3,
    'agent/qwen/reward_mean': 0.5,
    'agent/llama/reward_mean': 0.25,
    'agent/qwen/val_accuracy': { t: 1 },
  };
  assert.deepEqual(rowsPerAgent(row), [
    { step: 3, agent: 'qwen', reward_mean: 0.5, val_accuracy: { t: 1 } },
    { step: 3, agent: 'llama', reward_mean: 0.25 },
  ]);
  const old = { step: 1, agent: 'a', loss: 2 };
  assert.deepEqual(rowsPerAgent(old), [old]);
});
