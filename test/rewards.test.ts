// Rewards: math correctness and format, weighted combination, user reward modules that fail, and async rewards.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { loadRewardModule } from '../src/rewards/load-reward.js';
import { combineRewards, formatReward, mathReward, scoreSamples, type Sample } from '../src/rewards/reward.js';
import { closeDefaultPool } from '../src/rewards/worker-pool.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-rewards-'));
after(async () => {
  await closeDefaultPool();
  await rm(root, { recursive: true, force: true });
});

function sample(response: string, gold: string, meta?: Record<string, unknown>): Sample {
  return { prompt: 'q', response, gold, ...(meta ? { meta } : {}) };
}

describe('built-in rewards', () => {
  test('math reward: 1 for an equal boxed answer, 0 for a wrong or missing one', async () => {
    const math = mathReward();
    assert.equal(await math(sample('so \\boxed{\\frac{1}{2}}', '0.5')), 1);
    assert.equal(await math(sample('so \\boxed{\\frac{x+2}{7}}', '\\frac{x}{7}+\\frac{2}{7}')), 1);
    assert.equal(await math(sample('so \\boxed{3}', '#### 4')), 0);
    assert.equal(await math(sample('the answer is 4', '#### 4')), 0);
    assert.equal(await mathReward({ extract: { answerIs: true } })(sample('the answer is 4.', '#### 4')), 1);
  });
  test('format reward: exactly one closed \\boxed{}, or a custom pattern', () => {
    const fmt = formatReward();
    assert.equal(fmt(sample('x \\boxed{2}', '')), 1);
    assert.equal(fmt(sample('\\boxed{1} \\boxed{2}', '')), 0);
    assert.equal(fmt(sample('\\boxed{2', '')), 0);
    assert.equal(fmt(sample('no box', '')), 0);
    const tagged = formatReward({ pattern: /<answer>.+<\/answer>\s*$/g });
    assert.equal(tagged(sample('think <answer>5</answer>', '')), 1);
    assert.equal(tagged(sample('think <answer>5</answer>', '')), 1, 'a /g pattern keeps no state between calls');
    assert.equal(tagged(sample('<answer>5</answer> trailing', '')), 0);
  });
});

describe('weighted combination', () => {
  test('total is the weighted sum; each reward value is reported by name', async () => {
    const score = combineRewards([
      { name: 'correct', fn: mathReward(), weight: 1 },
      { name: 'format', fn: formatReward(), weight: 0.25 },
      { name: 'length', fn: (s) => Math.min(1, s.response.length / 100), weight: -0.5 },
    ]);
    const right = await score(sample('\\boxed{18}', '#### 18'));
    assert.deepEqual(right.values, { correct: 1, format: 1, length: 0.1 });
    assert.ok(Math.abs(right.total - (1 + 0.25 - 0.05)) < 1e-12);
    const wrong = await score(sample('\\boxed{18} then \\boxed{17}', '#### 18'));
    assert.equal(wrong.values.correct, 0, 'the last box counts');
    assert.equal(wrong.values.format, 0);
    assert.deepEqual(
      score.stats.map((s) => [s.name, s.calls, s.failures]),
      [
        ['correct', 2, 0],
        ['format', 2, 0],
        ['length', 2, 0],
      ],
    );
  });
  test('reward names must be unique', () => {
    assert.throws(
      () =>
        combineRewards([
          { name: 'a', fn: () => 1, weight: 1 },
          { name: 'a', fn: () => 0, weight: 1 },
        ]),
      /unique/,
    );
  });
  test('async rewards are awaited and samples keep their order', async () => {
    const slow = async (s: Sample): Promise<number> => {
      await new Promise((r) => setTimeout(r, Number(s.meta?.delay ?? 0)));
      return Number(s.meta?.value);
    };
    const samples = [30, 0, 15, 5].map((delay, i) => sample('r', '1', { delay, value: i }));
    const { scores, stats } = await scoreSamples(samples, [{ name: 'slow', fn: slow, weight: 2 }], { concurrency: 4 });
    assert.deepEqual(
      scores.map((s) => s.total),
      [0, 2, 4, 6],
    );
    assert.equal(stats[0]!.calls, 4);
  });
});

describe('failing rewards', () => {
  test('a user module that throws on some samples: those score 0 and are counted, the rest are scored', async () => {
    const file = join(root, 'picky.mjs');
    await writeFile(
      file,
      `export default function reward(s) {
        if (s.meta?.bad) throw new Error('cannot score ' + s.prompt);
        return s.response.includes('good') ? 1 : 0.5;
      }\n`,
    );
    const picky = await loadRewardModule(file);
    const samples = [
      { prompt: 'p0', response: 'good', gold: '1' },
      { prompt: 'p1', response: 'meh', gold: '1', meta: { bad: true } },
      { prompt: 'p2', response: 'meh', gold: '1' },
      { prompt: 'p3', response: 'good', gold: '1', meta: { bad: true } },
    ];
    const { scores, stats } = await scoreSamples(samples, [
      { name: 'picky', fn: picky, weight: 1 },
      { name: 'format', fn: formatReward(), weight: 1 },
    ]);
    assert.deepEqual(
      scores.map((s) => s.values.picky),
      [1, 0, 0.5, 0],
    );
    assert.deepEqual(
      scores.map((s) => s.failed),
      [[], ['picky'], [], ['picky']],
    );
    assert.deepEqual(stats[0], {
      name: 'picky',
      calls: 4,
      failures: 2,
      skipped: 0,
      firstError: 'picky: cannot score p1',
    });
    assert.equal(stats[1]!.failures, 0);
  });
  test('a named async `reward` export; non-finite values are failures', async () => {
    const file = join(root, 'named.mjs');
    await writeFile(
      file,
      `export async function reward(s) { await null; return s.response === 'nan' ? NaN : s.response === 'str' ? '1' : 2; }\n`,
    );
    const fn = await loadRewardModule(file);
    const { scores, stats } = await scoreSamples(
      ['ok', 'nan', 'str'].map((r) => sample(r, '1')),
      [{ name: 'named', fn, weight: 0.5 }],
    );
    assert.deepEqual(
      scores.map((s) => s.total),
      [1, 0, 0],
    );
    assert.equal(stats[0]!.failures, 2);
    assert.match(stats[0]!.firstError!, /returned NaN, not a finite number/);
  });
  test('an unparseable gold skips the sample (counted apart from failures)', async () => {
    const { scores, stats } = await scoreSamples(
      [sample('\\boxed{1}', '\\frac{'), sample('\\boxed{1}', '1')],
      [{ name: 'correct', fn: mathReward(), weight: 1 }],
    );
    assert.equal(scores[0]!.skipped, true);
    assert.equal(scores[1]!.skipped, false);
    assert.equal(scores[1]!.total, 1);
    assert.equal(stats[0]!.skipped, 1);
    assert.equal(stats[0]!.failures, 0);
  });
  test('a verifier time-out is a counted failure, not a silent 0', async () => {
    const { scores, stats } = await scoreSamples(
      [sample('\\boxed{5}', '\\sum_{k=1}^{10^9} k')],
      [{ name: 'correct', fn: mathReward({ timeoutMs: 200 }), weight: 1 }],
    );
    assert.deepEqual(scores[0]!.failed, ['correct']);
    assert.equal(stats[0]!.failures, 1);
    assert.match(stats[0]!.firstError!, /timeout/);
  });
});

describe('loading reward modules', () => {
  test('clear errors: missing file, no reward export, TypeScript without a loader', async () => {
    await assert.rejects(loadRewardModule(join(root, 'nope.mjs')), /file not found/);
    const none = join(root, 'none.mjs');
    await writeFile(none, 'export const weight = 1;\n');
    await assert.rejects(loadRewardModule(none), /default export or an export named "reward".*exports: weight/);
    const ts = join(root, 'typed.ts');
    await writeFile(ts, 'export default function (s: { response: string }): number { return s.response.length; }\n');
    await assert.rejects(loadRewardModule(ts), /compile the module to \.js first/);
  });
});
