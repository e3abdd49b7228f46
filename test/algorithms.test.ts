// RL objectives as pure functions: group advantages, GRPO/GSPO clipped losses, aggregation, KL — hand-worked values
// and central finite differences of the loss itself.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { LossAggregation } from '../src/algorithms/aggregate.js';
import { groupAdvantages, zeroVarianceGroups } from '../src/algorithms/advantages.js';
import { DAPO_CLIP, GSPO_CLIP } from '../src/algorithms/clipped-surrogate.js';
import { grpoTokenLoss } from '../src/algorithms/grpo.js';
import { klK1, klK3 } from '../src/algorithms/kl.js';
import { type PolicyLossOptions, type PolicyObjective, policyLoss } from '../src/algorithms/policy-loss.js';
import { type PolicySequence, lossUnits } from '../src/algorithms/sequence.js';
import { assertGradientMatches, logProbFiniteDifferences, mulberry32, near, randn } from './helpers.js';

/** A sequence whose token log-ratios new − old are `logRatios` (old log-probs −1, −1.1, …). */
function seq(logRatios: readonly number[], advantage: number, extra: Partial<PolicySequence> = {}): PolicySequence {
  const oldLogProbs = logRatios.map((_, t) => -1 - 0.1 * t);
  return { logProbs: logRatios.map((r, t) => oldLogProbs[t]! + r), oldLogProbs, advantage, ...extra };
}

const ln = Math.log;

describe('group-relative advantages (HACRL Eq. 5)', () => {
  test('group-std: rewards [1,0,0,1] → mean 0.5, unbiased std √(1/3), A = ±0.5/(0.57735 + 1e-6)', () => {
    // deviations ±0.5; Σ dev² = 4·0.25 = 1; unbiased var = 1/(4−1) = 1/3; std = 0.5773503;
    // A = 0.5 / 0.5773513 = 0.8660239. The second group is all 1: exactly 0.
    const a = groupAdvantages([1, 0, 0, 1, 1, 1, 1, 1], { groupSize: 4 });
    const x = 0.8660239037870368;
    near(a, [x, -x, -x, x, 0, 0, 0, 0], 1e-12);
  });

  test('all-equal rewards give exactly 0, even where float rounding makes the mean differ from them', () => {
    // (0.1 + 0.1 + 0.1)/3 = 0.10000000000000002 ≠ 0.1: without the explicit check A would be ≈ −1.4e-17/1e-6.
    assert.deepEqual(Array.from(groupAdvantages([0.1, 0.1, 0.1], { groupSize: 3 })), [0, 0, 0]);
    assert.deepEqual(
      Array.from(groupAdvantages([0.1, 0.1, 0.1], { groupSize: 3 }, { normalization: 'none' })),
      [0, 0, 0],
    );
  });

  test('batch-std: centre per group, divide by the unbiased std of all 8 rewards', () => {
    // groups [1,0,0,0] (mean 0.25) and [1,1,1,0] (mean 0.75): centred [.75,−.25,−.25,−.25 | .25,.25,.25,−.75].
    // all 8 rewards: four 1s and four 0s, mean 0.5, Σ dev² = 8·0.25 = 2, var = 2/7, std = 0.5345225;
    // 0.75/0.5345235 = 1.4031189, 0.25/0.5345235 = 0.4677063.
    const r = [1, 0, 0, 0, 1, 1, 1, 0];
    const a = groupAdvantages(r, { groupSize: 4 }, { normalization: 'batch-std' });
    const [hi, lo] = [1.4031188950451388, 0.4677062983483796];
    near(a, [hi, -lo, -lo, -lo, lo, lo, lo, -hi], 1e-12);
    near(
      groupAdvantages(r, { groupSize: 4 }, { normalization: 'none' }),
      [0.75, -0.25, -0.25, -0.25, 0.25, 0.25, 0.25, -0.75],
      0,
    );
  });

  test('groups by id, in any order: ids [b,a,b,a], rewards [1,0,0,0.5]', () => {
    // b = {1, 0}: mean 0.5, std √0.5 = 0.7071068 → ±0.5/0.7071078 = ±0.7071058;
    // a = {0, 0.5}: mean 0.25, std √0.125 = 0.3535534 → ∓0.25/0.3535544 = ∓0.7071048.
    const a = groupAdvantages([1, 0, 0, 0.5], { groupIds: ['b', 'a', 'b', 'a'] });
    near(a, [0.7071057811879616, -0.7071047811922043, -0.7071057811879616, 0.7071047811922043], 1e-12);
  });

  test('a group of one response is an error that says what to change', () => {
    assert.throws(
      () => groupAdvantages([1, 0, 1], { groupSize: 1 }),
      /group size 1.*responses per prompt\) to 2 or more/,
    );
    assert.throws(
      () => groupAdvantages([1, 0, 1], { groupIds: [7, 7, 8] }),
      /group 1 has 1 response.*check the group ids/,
    );
    assert.throws(() => zeroVarianceGroups([1, 0, 1], { groupSize: 1 }), /group size 1/);
    assert.throws(
      () => groupAdvantages([1, 0, 1, 0, 1, 1], { groupSize: 4 }),
      /6 rewards do not split into groups of 4/,
    );
    assert.throws(() => groupAdvantages([1, 0], { groupIds: [1] }), /1 group ids for 2 rewards/);
  });

  test('zero-variance filter: which groups are constant, which responses to keep, and the fraction', () => {
    const z = zeroVarianceGroups([1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0], { groupSize: 4 });
    assert.deepEqual(z.zeroVariance, [true, false, true]);
    assert.deepEqual(z.keep, [false, false, false, false, true, true, true, true, false, false, false, false]);
    near(z.fraction, 2 / 3, 1e-15);
    assert.deepEqual(zeroVarianceGroups([0.5, 0.5001], { groupSize: 2 }, 1e-3).zeroVariance, [true]);
  });
});

describe('GRPO token-level clip (DAPO ε_low 0.2 / ε_high 0.28)', () => {
  test('per-token loss and gradient in each branch', () => {
    // ratio 1.3, A = +1: 1.3 > 1.28 → min(1.3, 1.28) = 1.28 is the clipped branch: loss −1.28, gradient 0.
    const up = grpoTokenLoss(ln(1.3), 0, 1, DAPO_CLIP);
    near([up.loss, up.dNew], [-1.28, 0], 1e-12);
    assert.equal(up.clipped, 'high');
    // ratio 1.3, A = −1: min(−1.3, −1.28) = −1.3 is unclipped: loss 1.3, ∂/∂new = −A·ρ = 1.3.
    const down = grpoTokenLoss(ln(1.3), 0, -1, DAPO_CLIP);
    near([down.loss, down.dNew], [1.3, 1.3], 1e-12);
    assert.equal(down.clipped, 'none');
    // ratio 0.7, A = −1: 0.7 < 0.8 → min(−0.7, −0.8) = −0.8 clipped: loss 0.8, gradient 0.
    const low = grpoTokenLoss(ln(0.7), 0, -1, DAPO_CLIP);
    near([low.loss, low.dNew], [0.8, 0], 1e-12);
    assert.equal(low.clipped, 'low');
    // ratio 0.7, A = +1: min(0.7, 0.8) = 0.7 unclipped: loss −0.7, gradient −0.7.
    near([grpoTokenLoss(ln(0.7), 0, 1, DAPO_CLIP).dNew], [-0.7], 1e-12);
  });

  test('dual clip c = 3 caps the loss of a negative sample whose ratio grew past c', () => {
    // ratio 4, A = −1: max(4, 1.28) = 4, then min(4, c·|A| = 3) = 3 → loss 3, gradient 0.
    const capped = grpoTokenLoss(ln(4), 0, -1, DAPO_CLIP, 3);
    near([capped.loss, capped.dNew], [3, 0], 1e-12);
    assert.equal(capped.clipped, 'dual');
    // ratio 2 < 3: untouched, loss 2, gradient 2. A > 0 is never dual-clipped.
    near([grpoTokenLoss(ln(2), 0, -1, DAPO_CLIP, 3).dNew], [2], 1e-12);
    assert.equal(grpoTokenLoss(ln(4), 0, 1, DAPO_CLIP, 3).clipped, 'high');
  });

  // seq 1 (A = +1) ratios [1.3, 0.7] → token losses [−1.28 (clipped high), −0.7], ∂ℓ/∂new [0, −0.7];
  // seq 2 (A = −1) ratios [1.3, 0.7, 1.0] → [1.3, 0.8 (clipped low), 1.0], ∂ℓ/∂new [1.3, 0, 1.0].
  const batch = [seq([ln(1.3), ln(0.7)], 1), seq([ln(1.3), ln(0.7), 0], -1)];
  const cases: [LossAggregation, number, number[][]][] = [
    // Σ = −1.98 + 3.1 = 1.12 over 5 tokens = 0.224; gradient ∂ℓ/5.
    [
      'token-mean',
      0.224,
      [
        [0, -0.14],
        [0.26, 0, 0.2],
      ],
    ],
    // token means −0.99 and 3.1/3 = 1.0333…; their mean 0.0216667; weights 1/(2·2), 1/(2·3).
    [
      'seq-mean-token-mean',
      (-0.99 + 3.1 / 3) / 2,
      [
        [0, -0.175],
        [1.3 / 6, 0, 1 / 6],
      ],
    ],
    // token sums −1.98 and 3.1; mean 0.56; weight 1/2.
    [
      'seq-mean-token-sum',
      0.56,
      [
        [0, -0.35],
        [0.65, 0, 0.5],
      ],
    ],
  ];
  for (const [aggregation, loss, grads] of cases) {
    test(`two sequences under ${aggregation}`, () => {
      const r = policyLoss(batch, { objective: { surrogate: 'token-clip' }, aggregation });
      near(r.loss, loss, 1e-12, 'loss');
      grads.forEach((g, i) => near(r.grad[i]!, g, 1e-7, `grad ${i}`));
      // one of 5 tokens clipped on each side; ratios 1.3, 0.7, 1.3, 0.7, 1 → mean 1.
      near([r.stats.clipFracHigh, r.stats.clipFracLow, r.stats.clipFracDual], [0.2, 0.2, 0], 1e-15);
      near([r.stats.ratioMean, r.stats.ratioMin, r.stats.ratioMax], [1, 0.7, 1.3], 1e-12);
      assert.equal(r.stats.ratioLevel, 'token');
    });
  }

  test('the defaults are DAPO clip-higher and token-mean; bad options are errors', () => {
    assert.deepEqual(DAPO_CLIP, { low: 0.2, high: 0.28 });
    assert.deepEqual(GSPO_CLIP, { low: 3e-4, high: 4e-4 });
    near(policyLoss(batch, { objective: { surrogate: 'token-clip' } }).loss, 0.224, 1e-12);
    assert.throws(
      () => policyLoss(batch, { objective: { surrogate: 'token-clip', dualClip: 0.5 } }),
      /dual clip c must be ≥ 1/,
    );
    assert.throws(
      () => policyLoss(batch, { objective: { surrogate: 'token-clip', clip: { low: 1, high: 0.2 } } }),
      /ε_low < 1/,
    );
    assert.throws(
      () => policyLoss([seq([0], 1, { oldLogProbs: [0, 0] })], { objective: { surrogate: 'token-clip' } }),
      /oldLogProbs/,
    );
    assert.throws(
      () => policyLoss([seq([0], 1, { mask: [0.5] })], { objective: { surrogate: 'token-clip' } }),
      /only 0 and 1/,
    );
  });
});

describe('GSPO sequence-level ratio (HACRL Eqs. 11, 47–49; ε 3e-4 / 4e-4)', () => {
  test('token log-ratios 0.1, 0, −0.4 → log s = −0.1, s = exp(−0.1) = 0.9048374', () => {
    // A = +1: min(s, clip(s) = 0.9997) = s unclipped → loss −0.9048374; every token's gradient is
    // −A·s/|y| = −0.9048374/3 = −0.3016125 (one sequence, seq-mean-token-mean).
    const pos = policyLoss([seq([0.1, 0, -0.4], 1)], { objective: { surrogate: 'seq-clip' } });
    near(pos.loss, -0.9048374180359595, 1e-12);
    near(pos.grad[0]!, [-0.30161247267865315, -0.30161247267865315, -0.30161247267865315], 1e-7);
    near([pos.stats.ratioMean, pos.stats.clipFracLow, pos.stats.clipFracHigh], [0.9048374180359595, 0, 0], 1e-12);
    assert.equal(pos.stats.ratioLevel, 'sequence');
    // A = −1: s < 1 − 3e-4 → min(−0.9048, −0.9997) = −0.9997 clipped low: loss 0.9997, gradient 0.
    const neg = policyLoss([seq([0.1, 0, -0.4], -1)], { objective: { surrogate: 'seq-clip' } });
    near(neg.loss, 0.9997, 1e-12);
    near(neg.grad[0]!, [0, 0, 0], 0);
    assert.equal(neg.stats.clipFracLow, 1);
  });

  test('the upper bound 1 + 4e-4: s = e^0.0003 = 1.0003 passes, s = e^0.001 = 1.0010 is clipped for A > 0', () => {
    const inside = policyLoss([seq([0.0003, 0.0003], 1)], { objective: { surrogate: 'seq-clip' } });
    near(inside.loss, -1.0003000450045003, 1e-12);
    const outside = policyLoss([seq([0.001, 0.001], 1)], { objective: { surrogate: 'seq-clip' } });
    near([outside.loss, outside.stats.clipFracHigh], [-1.0004, 1], 1e-12);
    near(outside.grad[0]!, [0, 0], 0);
  });

  test('token-mean weights a sequence by its length; each token gets w·(−A·s)', () => {
    // seq 1: s = 0.9048374, A = 1, 3 tokens; seq 2: log-ratio 0, s = 1, A = 0.5, 1 token.
    // loss = (3·(−0.9048374) + 1·(−0.5))/4 = −0.8036281; gradients −0.9048374/4 = −0.2262094 and −0.5/4.
    const r = policyLoss([seq([0.1, 0, -0.4], 1), seq([0], 0.5)], {
      objective: { surrogate: 'seq-clip' },
      aggregation: 'token-mean',
    });
    near(r.loss, -0.8036280635269697, 1e-12);
    near(r.grad[0]!, [-0.22620935450898988, -0.22620935450898988, -0.22620935450898988], 1e-7);
    near(r.grad[1]!, [-0.125], 1e-7);
  });
});

describe('KL penalty to the reference', () => {
  test('k1 and k3 at new −1, ref −1.5', () => {
    // d = ref − new = −0.5: k1 = 0.5 (∂ 1); k3 = e^−0.5 + 0.5 − 1 = 0.1065307, ∂k3/∂new = 1 − e^−0.5 = 0.3934693.
    near([klK1(-1, -1.5).value, klK1(-1, -1.5).grad], [0.5, 1], 1e-15);
    near([klK3(-1, -1.5).value, klK3(-1, -1.5).grad], [0.10653065971263342, 0.3934693402873666], 1e-15);
    // k3 is capped at 10 with no gradient there (d = 20: e^20 ≫ 10).
    near([klK3(-21, -1).value, klK3(-21, -1).grad], [10, 0], 0);
  });

  test('β·k3 is added to the loss with the aggregation weights; kl stat is the token mean', () => {
    // A = 0 so the policy term is 0; one token: loss = 0.1·0.1065307, gradient 0.1·0.3934693.
    const r = policyLoss([{ logProbs: [-1], oldLogProbs: [-1], refLogProbs: [-1.5], advantage: 0 }], {
      objective: { surrogate: 'token-clip' },
      kl: { coef: 0.1 },
    });
    near(
      [r.loss, r.stats.klLoss, r.stats.kl],
      [0.010653065971263342, 0.010653065971263342, 0.10653065971263342],
      1e-15,
    );
    near(r.grad[0]!, [0.03934693402873666], 1e-8);
    assert.throws(
      () => policyLoss([seq([0], 1)], { objective: { surrogate: 'token-clip' }, kl: { coef: 0.1 } }),
      /no refLogProbs/,
    );
    assert.ok(
      Number.isNaN(policyLoss([seq([0], 1)], { objective: { surrogate: 'token-clip' } }).stats.kl),
      'no reference: NaN',
    );
  });
});

describe('entropy bonus', () => {
  test('−β_H·H aggregated like the loss; ∂L/∂H_t = −β_H·w_i matches finite differences; foreign rows get none', () => {
    // seq-mean-token-mean over 2 own sequences of 2 and 1 tokens: w = 1/(2·2) and 1/(2·1). H = [1.5, 0.5], [2]:
    // entropyLoss = −0.1·(0.25·2 + 0.5·2) = −0.15; the mean-entropy statistic is (1.5 + 0.5 + 2)/3.
    const a = seq([0, 0], 1, { entropy: [1.5, 0.5] });
    const b = seq([0], -1, { entropy: [2] });
    const options: PolicyLossOptions = { objective: { surrogate: 'seq-clip' }, entropyCoef: 0.1 };
    const r = policyLoss([a, b], options);
    near([r.stats.entropyLoss, r.stats.entropy], [-0.15, 4 / 3], 1e-12);
    near(r.loss, r.stats.policyLoss - 0.15, 1e-12);
    const h = 1e-6;
    const fd = (i: number, t: number): number => {
      const bump = (d: number) =>
        policyLoss(
          [a, b].map((q, j) =>
            j !== i ? q : { ...q, entropy: Array.from(q.entropy!, (v, u) => (u === t ? v + d : v)) },
          ),
          options,
        ).loss;
      return (bump(h) - bump(-h)) / (2 * h);
    };
    near(r.entropyGrad![0]!, [fd(0, 0), fd(0, 1)], 1e-8);
    near(r.entropyGrad![1]!, [fd(1, 0)], 1e-8);
    assert.equal(
      policyLoss([a, b], { objective: { surrogate: 'seq-clip' } }).entropyGrad,
      undefined,
      'no bonus: no gradient',
    );
    assert.throws(() => policyLoss([seq([0], 1)], options), /no entropy but the entropy coefficient is 0\.1/);
  });
});

describe('truncation, empty responses, token masks and micro-batches', () => {
  const a = seq([0.1, -0.2], 1);
  const b = seq([0.05, 0, 0.3], -0.5);

  test('a truncated sequence under maskTruncated leaves the loss and every denominator', () => {
    for (const objective of [{ surrogate: 'token-clip' }, { surrogate: 'seq-clip' }] as PolicyObjective[]) {
      const alone = policyLoss([a], { objective });
      const masked = policyLoss([a, { ...b, truncated: true }], { objective, maskTruncated: true });
      near(masked.loss, alone.loss, 1e-15);
      near(masked.grad[0]!, alone.grad[0]!, 0);
      near(masked.grad[1]!, [0, 0, 0], 0);
      assert.equal(masked.stats.truncatedDropped, 1);
      assert.equal(masked.stats.sequences, 1);
      // without the flag it counts like any other sequence.
      const kept = policyLoss([a, { ...b, truncated: true }], { objective });
      near(kept.loss, policyLoss([a, b], { objective }).loss, 1e-15);
    }
  });

  test('an empty (or fully masked) response counts nowhere: [a, empty] equals [a] in every mode', () => {
    const empty: PolicySequence = { logProbs: [], oldLogProbs: [], advantage: 1 };
    const masked = seq([0.4, 0.4], 1, { mask: [0, 0] });
    for (const aggregation of ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'] as LossAggregation[]) {
      const options: PolicyLossOptions = { objective: { surrogate: 'seq-clip', clip: DAPO_CLIP }, aggregation };
      const r = policyLoss([a, empty, masked], options);
      near(r.loss, policyLoss([a], options).loss, 1e-15);
      assert.equal(r.grad[1]!.length, 0);
      assert.equal(r.stats.empty, 2);
    }
    // nothing to count at all: loss 0, no NaN in the loss or gradients.
    const none = policyLoss([empty], { objective: { surrogate: 'token-clip' } });
    assert.equal(none.loss, 0);
    assert.ok(Number.isNaN(none.stats.ratioMean));
  });

  test('a token mask leaves tokens out of the GSPO mean and out of token-mean', () => {
    // mask [1, 0, 1] on log-ratios [0.1, 9, −0.4]: log s = (0.1 − 0.4)/2 = −0.15, the 9 is ignored.
    const r = policyLoss([seq([0.1, 9, -0.4], 1, { mask: [1, 0, 1] })], {
      objective: { surrogate: 'seq-clip', clip: DAPO_CLIP },
    });
    near(r.stats.ratioMean, Math.exp(-0.15), 1e-12);
    near(r.grad[0]![1]!, 0, 0);
    assert.equal(r.stats.tokens, 2);
  });

  test('micro-batches with the mini-batch denominators add up to the whole mini-batch', () => {
    const c = seq([-0.3], 2);
    for (const aggregation of ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'] as LossAggregation[]) {
      const options: PolicyLossOptions = {
        objective: { surrogate: 'token-clip' },
        aggregation,
        kl: { coef: 0.05, estimator: 'k1' },
      };
      const all = [a, b, c].map((s) => ({ ...s, refLogProbs: s.oldLogProbs }));
      const whole = policyLoss(all, options);
      const denominators = lossUnits(all);
      const first = policyLoss(all.slice(0, 2), { ...options, denominators });
      const second = policyLoss(all.slice(2), { ...options, denominators });
      near(first.loss + second.loss, whole.loss, 1e-15);
      near(
        [...first.grad, ...second.grad].flatMap((g) => Array.from(g)),
        whole.grad.flatMap((g) => Array.from(g)),
        0,
      );
    }
    assert.throws(
      () => policyLoss([a, b], { objective: { surrogate: 'token-clip' }, denominators: lossUnits([a]) }),
      /smaller/,
    );
  });
});

describe('gradients equal central finite differences of the loss (float64)', () => {
  const objectives: [string, PolicyObjective, number][] = [
    // log-ratio noise wide enough that both clips fire at ε 0.2 / 0.28 (and dual clip at c = 1.5).
    ['grpo', { surrogate: 'token-clip' }, 0.3],
    ['grpo dual clip', { surrogate: 'token-clip', dualClip: 1.5 }, 0.5],
    ['gspo', { surrogate: 'seq-clip' }, 6e-4],
    ['gspo wide clip', { surrogate: 'seq-clip', clip: DAPO_CLIP }, 0.3],
  ];
  const aggregations: LossAggregation[] = ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'];
  const kls: (PolicyLossOptions['kl'] | undefined)[] = [undefined, { coef: 0.3, estimator: 'k1' }, { coef: 0.3 }];

  /** Random sequences of 0–6 tokens, some masked tokens, one truncated. */
  function randomBatch(seed: number, noise: number): PolicySequence[] {
    const rng = mulberry32(seed);
    return Array.from({ length: 5 }, (_, i) => {
      const n = i === 0 ? 0 : 1 + Math.floor(rng() * 6);
      const old = Array.from(randn(n, rng, 0.5), (x) => -1.5 + x);
      const logProbs = Float64Array.from(randn(n, rng, noise), (x, t) => old[t]! + x);
      const refLogProbs = Array.from(randn(n, rng, 0.3), (x, t) => old[t]! + x);
      const mask = Array.from({ length: n }, () => (rng() < 0.15 ? 0 : 1));
      return { logProbs, oldLogProbs: old, refLogProbs, mask, advantage: 2 * rng() - 1, truncated: i === 4 };
    });
  }

  let clippedSomewhere = 0;
  let seed = 1;
  for (const [name, objective, noise] of objectives) {
    for (const aggregation of aggregations) {
      for (const kl of kls) {
        for (const maskTruncated of [false, true]) {
          const label = `${name}, ${aggregation}, KL ${kl?.estimator ?? (kl ? 'k3' : 'off')}, maskTruncated ${maskTruncated}`;
          const batchSeed = seed++;
          test(label, () => {
            const options: PolicyLossOptions = { objective, aggregation, kl, maskTruncated };
            const batch = randomBatch(batchSeed, noise);
            const r = policyLoss(batch, options);
            const s = r.stats;
            clippedSomewhere += s.clipFracLow + s.clipFracHigh + s.clipFracDual > 0 ? 1 : 0;
            const fd = logProbFiniteDifferences(batch, (b) => policyLoss(b, options).loss);
            assertGradientMatches(r.grad, fd, label);
          });
        }
      }
    }
  }

  test('the random cases exercised the clipped branches', () => {
    assert.ok(clippedSomewhere >= 20, `clipping happened in only ${clippedSomewhere} cases`);
  });
});
