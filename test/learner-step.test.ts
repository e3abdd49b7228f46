// The learner step's pieces that take no model: which groups the zero-variance filter keeps, over a learner's own
// responses (GRPO/GSPO) and over every agent's (HACPO); and the report's split of namespaced metric rows.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { rowsPerAgent } from '../src/report/run-data.js';
import { groupsWithVariance } from '../src/train/learner-step.js';
import type { Agent } from '../src/rollout/rollout.js';
import { learnerView, type SampleRecord } from '../src/train/sample-table.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';

/** An agent whose character tokenizer spells `alphabet` (learnerView reads no weights). */
function agent(name: string, alphabet: string): Agent {
  const tokenizer = new CharTokenizer({ alphabet, specialTokens: ['<eos>'], names: { eos: '<eos>' } });
  return { name, model: null as never, tokenizer };
}

const a = agent('a', 'qxy');
const b = agent('b', 'qxyz');
const team = new Map([a, b].map((x) => [x.name, x]));

/** A table record of `generator` for prompt `group` with `reward`, its response `text` in the generator's tokens. */
function record(id: number, generator: string, group: number, reward: number, text = 'x'): SampleRecord {
  const tok = team.get(generator)!.tokenizer;
  return {
    id,
    generator,
    role: generator,
    episode: id,
    group,
    prompt: `q${group}`,
    gold: '1',
    text,
    tokens: { prompt: tok.encode('q'), response: tok.encode(text) },
    generatorLogProbs: [-1],
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
  const keep = groupsWithVariance(table, learnerView(table, a, team, false).records);
  assert.deepEqual(keep, [true, true, true, true, false, false, false, false, true, true, true, true]);
  // The first group constant instead: the flags follow the group, not the position.
  const first = table.map((r) => ({ ...r, reward: r.group === 0 ? 0 : r.group === 1 ? r.id % 2 : r.reward }));
  assert.deepEqual(groupsWithVariance(first, learnerView(first, a, team, false).records), [
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
  const alone = groupsWithVariance(table, learnerView(table, a, team, false).records);
  assert.deepEqual(alone.slice(0, 4), [false, false, true, true]);
  const all = table.map((r) => r.id);
  assert.deepEqual(groupsWithVariance(table, all), new Array(8).fill(true));
  const allEqual = table.map((r) => ({ ...r, reward: r.group === 1 ? 1 : r.reward }));
  assert.deepEqual(groupsWithVariance(allEqual, all), [true, true, false, false, true, true, false, false]);
});

test('a learner view holds its own records, and foreign ones only when shared and spelled for it', () => {
  // b's second response uses a character a's tokenizer does not have: a cannot train on it.
  const table = [record(0, 'a', 0, 1), record(1, 'a', 0, 0), record(2, 'b', 0, 1, 'xy'), record(3, 'b', 0, 0, 'xz')];
  const alone = learnerView(table, a, team, false);
  assert.deepEqual([alone.records, alone.dropped], [[0, 1], 0]);
  assert.equal(alone.tokens[2], undefined);
  const shared = learnerView(table, a, team, true);
  assert.deepEqual([shared.records, shared.dropped], [[0, 1, 2], 1]);
  // Its copy of b's response is in its own ids, after its own prompt; the shared record is left as it was.
  assert.deepEqual(shared.tokens[2], {
    prompt: a.tokenizer.encode('q'),
    response: a.tokenizer.encode('xy'),
    generatorSpan: 2,
  });
  assert.deepEqual(table[2]!.tokens.response, b.tokenizer.encode('xy'));
  assert.equal(shared.tokens[0]!.response, table[0]!.tokens.response);
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
