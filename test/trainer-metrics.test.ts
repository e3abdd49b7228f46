// The trainer's extra metrics: the process's memory, the per-reward-function means of a weighted total, and how the
// report reads and plots them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { panelsFor } from '../src/report/panels.js';
import { rowsPerAgent } from '../src/report/run-data.js';
import { numericFields } from '../src/report/series.js';
import { formatReward, scoreSamples, type WeightedReward } from '../src/rewards/reward.js';
import { rewardPartMeans } from '../src/train/reward-metrics.js';
import { memoryMetrics } from '../src/util/memory.js';

test('memory metrics: current RSS follows a 64 MiB allocation, and the peak never falls below it', () => {
  const before = memoryMetrics();
  assert.ok(before['mem/rss_mib'] > 10, `a Node process holds more than 10 MiB, got ${before['mem/rss_mib']}`);
  const block = Buffer.alloc(64 * 1024 * 1024, 1); // filled, so every page is resident
  const during = memoryMetrics();
  assert.ok(
    during['mem/rss_mib'] - before['mem/rss_mib'] > 48,
    `RSS rose by ${during['mem/rss_mib'] - before['mem/rss_mib']} MiB`,
  );
  assert.ok(during['mem/peak_rss_mib'] >= during['mem/rss_mib']);
  assert.ok(during['mem/peak_rss_mib'] >= before['mem/peak_rss_mib'], 'the peak is a high-water mark');
  assert.equal(block[block.length - 1], 1);
});

test('per-reward means: each reward averaged unweighted, and Σ weight · mean equals the mean total', async () => {
  const rewards: WeightedReward[] = [
    { name: 'len', fn: (s) => s.response.length / 10, weight: 0.5 },
    { name: 'format', fn: formatReward(), weight: 2 },
    {
      name: 'flaky',
      fn: (s) => {
        if (s.response === 'x') throw new Error('boom');
        return 1;
      },
      weight: -1,
    },
  ];
  const responses = ['\\boxed{1}', 'no box', 'x', '\\boxed{2}\\boxed{3}'];
  const { scores } = await scoreSamples(
    responses.map((response) => ({ prompt: 'q', response, gold: '1' })),
    rewards,
  );
  const m = rewardPartMeans(scores, rewards);
  // Worked by hand: lengths 9, 6, 1, 18 → 0.9, 0.6, 0.1, 1.8; format 1, 0, 0, 0; flaky 1, 1, failed (0), 1.
  assert.deepEqual(Object.keys(m), ['reward/len_mean', 'reward/format_mean', 'reward/flaky_mean']);
  assert.ok(Math.abs(m['reward/len_mean']! - 3.4 / 4) < 1e-12);
  assert.equal(m['reward/format_mean'], 0.25);
  assert.equal(m['reward/flaky_mean'], 0.75);
  const total = scores.reduce((a, s) => a + s.total, 0) / scores.length;
  const recombined = rewards.reduce((a, r) => a + r.weight * m[`reward/${r.name}_mean`]!, 0);
  assert.ok(Math.abs(recombined - total) < 1e-12, `${recombined} vs ${total}`);
});

test('per-reward means: nothing for a single reward of weight 1 (it would repeat reward_mean), present otherwise', () => {
  const score = { total: 1, values: { math: 1 }, failed: [], skipped: false };
  assert.deepEqual(rewardPartMeans([score], [{ name: 'math', weight: 1 }]), {});
  assert.deepEqual(rewardPartMeans([score], [{ name: 'math', weight: 2 }]), { 'reward/math_mean': 1 });
});

test('the report splits the new metrics off a namespaced row (memory run-level) and plots them in their panels', () => {
  const row = {
    step: 2,
    'agent/a/reward/format_mean': 0.75,
    'agent/a/val/easy:test/greedy': 0.5,
    'agent/a/val/easy:test/avg@4': 0.25,
    'agent/a/entropy': 1.2,
    'agent/a/warn/length_blowup': 1,
    'mem/rss_mib': 95.5,
    'mem/peak_rss_mib': 120,
  };
  const rows = rowsPerAgent(row);
  assert.deepEqual(rows, [
    {
      step: 2,
      agent: 'a',
      'reward/format_mean': 0.75,
      'val/easy:test/greedy': 0.5,
      'val/easy:test/avg@4': 0.25,
      entropy: 1.2,
      'warn/length_blowup': 1,
    },
    { step: 2, 'mem/rss_mib': 95.5, 'mem/peak_rss_mib': 120 },
  ]);
  // An older run's row: greedy accuracy as an object by set, one row per agent.
  const old = { step: 1, agent: 'a', val_accuracy: { 'easy:test': 0.4 }, 'warn/entropy_collapse': 1 };
  const fields = [...new Set([...rows, old].flatMap((r) => [...numericFields(r).keys()]))];
  assert.deepEqual(
    panelsFor(fields).map((p) => [p.title, p.fields]),
    [
      ['Reward components', ['reward/format_mean']],
      ['Validation accuracy', ['val/easy:test/greedy', 'val/easy:test/avg@4', 'val_accuracy/easy:test']],
      ['Entropy', ['entropy']],
      ['Memory', ['mem/rss_mib', 'mem/peak_rss_mib']],
      ['Health warnings (1 = raised)', ['warn/length_blowup', 'warn/entropy_collapse']],
    ],
  );
});
