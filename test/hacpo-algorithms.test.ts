// HACPO's algorithm layer as pure functions (HACRL Eqs. 6–14): capability tracking, capability-aware advantages,
// cross-agent ratios, exponential IS, stepwise clipping and the mini-batch loss — hand-worked values, finite
// differences of the loss, and a Monte-Carlo check of Theorem 4.1.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { LossAggregation } from '../src/algorithms/aggregate.js';
import { DAPO_CLIP } from '../src/algorithms/clipped-surrogate.js';
import { policyLoss } from '../src/algorithms/policy-loss.js';
import { lossUnits, type LossUnits, type PolicySequence } from '../src/algorithms/sequence.js';
import type { SurrogateName } from '../src/algorithms/surrogates.js';
import type { StepwiseClip } from '../src/algorithms/hacpo/stepwise-clip.js';
import type { ClipRange } from '../src/algorithms/clipped-surrogate.js';
import {
  CAPABILITY_FLOOR,
  CapabilityTracker,
  DEFAULT_STEPWISE_CLIP,
  baselineRatios,
  capabilityAwareAdvantages,
  capabilityAwareBatchAdvantages,
  capabilityBaseline,
  capabilityRatio,
  crossSequenceLogRatio,
  discrepancyCoefficients,
  exponentialIs,
  foreignSequenceLoss,
  stepwiseLowerBound,
} from '../src/algorithms/hacpo/index.js';
import { Rng } from '../src/util/rng.js';
import { mean as meanOf } from '../src/util/stats.js';
import { assertGradientMatches, logProbFiniteDifferences, mulberry32, near, randn } from './helpers.js';

const ln = Math.log;

/** One response in a learner's mini-batch: its own (generatorOldMean = mean of its old log-probs) or a foreign one. */
type HacpoSequence = PolicySequence & { generatorOldMean: number; own: boolean };

/** HACPO's objective for one mini-batch, as the trainer runs it: the one policyLoss, GSPO on own responses. */
interface HacpoLossOptions {
  ownClip?: ClipRange | undefined;
  foreign?: SurrogateName;
  alpha?: number;
  stepwise?: StepwiseClip;
  update: number;
  aggregation?: LossAggregation;
  kl?: { coef: number } | undefined;
  maskTruncated?: boolean;
  denominators?: LossUnits;
}

/** policyLoss with 'seq-clip' on own responses and HACPO's foreign surrogate (default 'hacpo-foreign'). */
function hacpoLoss(batch: readonly HacpoSequence[], o: HacpoLossOptions) {
  return policyLoss(batch, {
    objective: { surrogate: 'seq-clip', ...(o.ownClip ? { clip: o.ownClip } : {}) },
    foreign: {
      ...(o.foreign === undefined ? {} : { surrogate: o.foreign }),
      ...(o.alpha === undefined ? {} : { alpha: o.alpha }),
      ...(o.stepwise ? { stepwise: o.stepwise } : {}),
      update: o.update,
    },
    ...(o.aggregation ? { aggregation: o.aggregation } : {}),
    ...(o.kl ? { kl: o.kl } : {}),
    ...(o.maskTruncated === undefined ? {} : { maskTruncated: o.maskTruncated }),
    ...(o.denominators ? { denominators: o.denominators } : {}),
  });
}
const hacpoLossUnits = lossUnits;

describe('capability estimate and ratio (HACRL Eqs. 8–10)', () => {
  test('sliding window of K = 3: plain mean of the last 3 step accuracies, fewer before K steps', () => {
    const t = new CapabilityTracker(3);
    assert.ok(Number.isNaN(t.estimate()), 'no history: NaN');
    t.record(0.2);
    near(t.estimate(), 0.2, 1e-15); // one step: 0.2/1
    t.record(0.4);
    t.record(0.6);
    near(t.estimate(), 0.4, 1e-15); // (0.2 + 0.4 + 0.6)/3 = 0.4
    t.record(0.8);
    near(t.estimate(), 0.6, 1e-15); // 0.2 leaves the window: (0.4 + 0.6 + 0.8)/3 = 0.6 (an EMA would not drop it)
    near(t.history(), [0.4, 0.6, 0.8], 0);
    const restored = CapabilityTracker.fromHistory(3, t.history());
    near(restored.estimate(), 0.6, 1e-15);
    // a longer history keeps its last K values: [0.1, 0.4, 0.6, 0.8] → (0.4 + 0.6 + 0.8)/3.
    near(CapabilityTracker.fromHistory(3, [0.1, 0.4, 0.6, 0.8]).history(), [0.4, 0.6, 0.8], 0);
    assert.equal(new CapabilityTracker().window, 5);
  });

  test('an agent that solved nothing is floored at 1e-8', () => {
    const t = new CapabilityTracker(2);
    t.record(0);
    t.record(0);
    assert.equal(t.estimate(), CAPABILITY_FLOOR);
  });

  test('ω = P̂_k / P̂_j, clamped to [0.1, 10]; 1 without history', () => {
    near(capabilityRatio(0.5, 0.75), 2 / 3, 1e-15); // 0.5/0.75
    near(capabilityRatio(0.75, 0.5), 1.5, 1e-15);
    assert.equal(capabilityRatio(0.5, NaN), 1);
    assert.equal(capabilityRatio(NaN, 0.5), 1);
    assert.equal(capabilityRatio(0.9, 0.05), 10); // 18 → 10
    assert.equal(capabilityRatio(0, 0.5), 0.1); // 1e-8/0.5 = 2e-8 → 0.1
    assert.equal(capabilityRatio(0.3, 0), 10); // 0.3/1e-8 → 10
    assert.equal(capabilityRatio(0, 0), 1); // both floored: 1e-8/1e-8
  });

  test('baseline ratios ω^(k,j) and discrepancy coefficients ω^(j,k) (Eq. 10) for learner k = 0', () => {
    // P̂ = [0.5, 0.75, NaN]: ω^(0,1) = 0.5/0.75 = 2/3, ω^(1,0) = 1.5; agent 2 has no history → 1 both ways.
    near(baselineRatios([0.5, 0.75, NaN], 0), [1, 2 / 3, 1], 1e-15);
    near(discrepancyCoefficients([0.5, 0.75, NaN], 0), [1, 1.5, 1], 1e-15);
    assert.throws(() => baselineRatios([0.5], 1), /learner 1 is not one of the 1 agents/);
  });

  test('bad windows and non-finite records are errors', () => {
    assert.throws(() => new CapabilityTracker(0), /window K must be an integer ≥ 1/);
    assert.throws(() => new CapabilityTracker(2.5), /window K must be an integer ≥ 1/);
    assert.throws(() => new CapabilityTracker().record(NaN), /finite mean reward/);
  });
});

describe('capability-aware advantage (HACRL Eqs. 6–9)', () => {
  // n = 2, G = 4, learner 0: own rewards [1,0,0,1], agent 1's [1,1,1,0]; P̂_0 = 0.5, P̂_1 = 0.75.
  const rewards = [1, 0, 0, 1, 1, 1, 1, 0];
  const generators = [0, 0, 0, 0, 1, 1, 1, 1];
  const omega = [1, capabilityRatio(0.5, 0.75)]; // ω^(0,1) = 2/3

  test('worked example: μ̂ = 0.5, σ = √(15/56), A = ±0.96609', () => {
    // r̃ = own [1,0,0,1] (sum 2) and (2/3)·[1,1,1,0] (sum 2): μ̂ = 4/8 = 0.5 (the plain mean would be 5/8).
    // σ over the raw 8 rewards (five 1s, three 0s): mean 0.625, Σ dev² = 5·0.375² + 3·0.625² = 0.703125 + 1.171875
    // = 1.875, unbiased var = 1.875/7 = 0.2678571, σ = 0.5175492. A = ±0.5/(0.5175492 + 1e-6) = ±0.9660899,
    // the raw reward for own and foreign alike.
    near(capabilityBaseline(rewards, generators, 0, omega), 0.5, 1e-15);
    const r = capabilityAwareAdvantages(rewards, generators, 0, omega);
    const a = 0.5 / (Math.sqrt(1.875 / 7) + 1e-6);
    near(a, 0.9660899164162359, 1e-15);
    near(r.advantages, [a, -a, -a, a, a, a, a, -a], 1e-12);
    near(r.baseline, 0.5, 1e-15);
    assert.equal(r.fallback, false);
    assert.equal(r.constant, false);
  });

  test('capabilityAware false: μ̂ is the plain mean 5/8 (naive sharing)', () => {
    // A(1) = 0.375/0.5175502 = 0.7245674, A(0) = −0.625/0.5175502 = −1.2076124.
    const r = capabilityAwareAdvantages(rewards, generators, 0, omega, { capabilityAware: false });
    near(r.baseline, 0.625, 1e-15);
    const [hi, lo] = [0.375 / (Math.sqrt(1.875 / 7) + 1e-6), -0.625 / (Math.sqrt(1.875 / 7) + 1e-6)];
    near([hi, lo], [0.724567437312177, -1.2076123955202949], 1e-15);
    near(r.advantages, [hi, lo, lo, hi, hi, hi, hi, lo], 1e-12);
  });

  test('all raw rewards equal → every A is exactly 0, whatever ω does to μ̂', () => {
    const r = capabilityAwareAdvantages([0.1, 0.1, 0.1, 0.1], [0, 0, 1, 1], 0, [1, 10]);
    assert.deepEqual(Array.from(r.advantages), [0, 0, 0, 0]);
    assert.equal(r.constant, true);
    assert.equal(r.fallback, false);
    assert.equal(r.baseline, 0.1);
  });

  test('μ̂ above the largest reward falls back to the learner’s own mean', () => {
    // P̂_0 = 1, P̂_1 = 0.05: ω^(0,1) = 20 → clamped to 10. Own [0,0,0,1], foreign [1,0,0,0]:
    // μ̂ = (1 + 10·1)/8 = 1.375 > max 1 → μ̂ = own mean 1/4. σ: two 1s, six 0s, mean 0.25,
    // Σ dev² = 2·0.5625 + 6·0.0625 = 1.5, var = 1.5/7, σ = 0.4629100; A(1) = 0.75/0.4629110 = 1.6201817,
    // A(0) = −0.25/0.4629110 = −0.5400606.
    const w = [1, capabilityRatio(1, 0.05)];
    assert.equal(w[1], 10);
    const r = capabilityAwareAdvantages([0, 0, 0, 1, 1, 0, 0, 0], generators, 0, w);
    near(capabilityBaseline([0, 0, 0, 1, 1, 0, 0, 0], generators, 0, w), 1.375, 1e-15);
    assert.equal(r.fallback, true);
    near(r.baseline, 0.25, 0);
    const [hi, lo] = [1.6201816746095261, -0.5400605582031753];
    near(r.advantages, [lo, lo, lo, hi, hi, lo, lo, lo], 1e-12);
  });

  test('batch: one group per prompt id, each with its own baseline; edge cases counted', () => {
    // prompt 7 = the worked example (interleaved with prompt 3), prompt 3 = all 1s (constant).
    const r = [1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1];
    const gen = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    const groups = [7, 3, 7, 3, 7, 3, 7, 3, 7, 3, 7, 3, 7, 3, 7, 3];
    const out = capabilityAwareBatchAdvantages(r, gen, groups, 0, omega);
    const a = 0.9660899164162359;
    near(out.advantages, [a, 0, -a, 0, -a, 0, a, 0, a, 0, a, 0, a, 0, -a, 0], 1e-12);
    assert.equal(out.constantGroups, 1);
    assert.equal(out.fallbackGroups, 0);
  });

  test('malformed input is an error that says what to change', () => {
    assert.throws(() => capabilityAwareAdvantages([1, 0], [0], 0, [1, 1]), /1 generators for 2 rewards/);
    assert.throws(() => capabilityAwareAdvantages([1, 0], [1, 1], 0, [1, 1]), /no response of learner 0/);
    assert.throws(() => capabilityAwareAdvantages([1, 0], [0, 2], 0, [1, 1]), /generator 2, not one of the 2/);
    assert.throws(() => capabilityAwareAdvantages([1, 0], [0, 1], 0, [0.5, 1]), /ω\^\(k,k\)\) must be 1/);
    assert.throws(() => capabilityAwareAdvantages([1, 0], [0, 1], 0, [1, 0]), /finite and > 0/);
    assert.throws(
      () => capabilityAwareBatchAdvantages([1, 0, 1, 0], [0, 1, 1, 1], [0, 0, 1, 1], 0, [1, 1]),
      /prompt group 1 \(id 1\) has no response of learner 0/,
    );
  });
});

describe('Theorem 4.1: Eq. 7’s baseline is unbiased for the learner’s own expected reward (Monte Carlo)', () => {
  /**
   * Simulates `groups` prompt groups of G Bernoulli(p[j]) rewards per agent with ω from the true p's, and returns the
   * mean and standard error of Eq. 7's μ̂ and of the plain mean of all n·G rewards.
   */
  function simulate(p: readonly number[], learner: number, G: number, groups: number, seed: number) {
    const rng = new Rng(seed);
    const omega = baselineRatios(p, learner);
    const generators = Array.from({ length: p.length * G }, (_, i) => Math.floor(i / G));
    const rewards = new Float64Array(p.length * G);
    const stats = (xs: Float64Array) => {
      const mean = meanOf(xs);
      let sq = 0;
      for (const x of xs) sq += (x - mean) ** 2;
      return { mean, se: Math.sqrt(sq / (xs.length - 1) / xs.length) };
    };
    const mu = new Float64Array(groups);
    const naive = new Float64Array(groups);
    for (let g = 0; g < groups; g++) {
      for (let i = 0; i < rewards.length; i++) rewards[i] = rng.next() < p[generators[i]!]! ? 1 : 0;
      mu[g] = capabilityBaseline(rewards, generators, learner, omega);
      naive[g] = meanOf(rewards);
    }
    return { capability: stats(mu), naive: stats(naive) };
  }

  const cases: [string, number[], number][] = [
    // E[μ̂] = (1/2)·0.3 + (1/2)·(0.3/0.7)·0.7 = 0.3; the plain mean is (0.3 + 0.7)/2 = 0.5.
    ['n = 2, weak learner p = (0.3, 0.7)', [0.3, 0.7], 0],
    // ω^(1,0) = 7/3: (1/2)·0.7 + (1/2)·(7/3)·0.3 = 0.7; plain mean 0.5.
    ['n = 2, strong learner p = (0.3, 0.7)', [0.3, 0.7], 1],
    // (1/3)·(0.3 + (0.3/0.7)·0.7 + (0.3/0.5)·0.5) = 0.3; plain mean 0.5.
    ['n = 3, p = (0.3, 0.7, 0.5)', [0.3, 0.7, 0.5], 0],
  ];
  for (const [name, p, learner] of cases) {
    test(`${name}, learner ${learner}: |mean μ̂ − p_k| < 4 SE; the plain mean is off by > 10 SE`, () => {
      const r = simulate(p, learner, 4, 20000, 1234 + learner + 10 * p.length);
      const pk = p[learner]!;
      const z = Math.abs(r.capability.mean - pk) / r.capability.se;
      assert.ok(z < 4, `μ̂ mean ${r.capability.mean} vs p_k ${pk}: ${z.toFixed(2)} SE`);
      const zNaive = Math.abs(r.naive.mean - pk) / r.naive.se;
      assert.ok(zNaive > 10, `plain mean ${r.naive.mean} vs p_k ${pk}: only ${zNaive.toFixed(1)} SE`);
    });
  }
});

describe('cross-agent ratio and exponential importance sampling (HACRL Eqs. 11–12)', () => {
  test('log s = mean of the learner’s log-probs − the generator’s old mean, each over its own tokens', () => {
    // learner (3 tokens): mean(−0.5, −0.7, −0.9) = −0.7; generator (other tokenizer): −0.6 → log s = −0.1.
    near(crossSequenceLogRatio([-0.5, -0.7, -0.9], -0.6), -0.1, 1e-15);
    assert.throws(() => crossSequenceLogRatio([], -0.6), /no tokens/);
  });

  test('s̃ = s·sg(s)^α: value s^(1+α); derivative in log s with sg frozen equals finite differences', () => {
    // s = 0.9, α = 1: value 0.81; ∂/∂ log s = s·sg(s) = 0.81 (not 2·0.81, the derivative of s² without sg).
    near([exponentialIs(0.9, 1).value, exponentialIs(0.9, 1).dLogRatio], [0.81, 0.81], 1e-15);
    near(exponentialIs(0.8, 3).value, 0.4096, 1e-15); // 0.8^4
    near(exponentialIs(0.8, 0).value, 0.8, 0); // α = 0: plain s
    for (const [s, alpha] of [
      [0.9, 1],
      [0.7, 3],
      [0.95, 0.5],
    ] as const) {
      const frozen = s ** alpha;
      const h = 1e-6;
      const fd = (Math.exp(ln(s) + h) * frozen - Math.exp(ln(s) - h) * frozen) / (2 * h);
      near(exponentialIs(s, alpha).dLogRatio, fd, 1e-9, `s ${s}, α ${alpha}`);
    }
    assert.throws(() => exponentialIs(0.9, -1), /α ≥ 0/);
  });
});

describe('stepwise asymmetric clipping of foreign responses (HACRL Eqs. 13–14)', () => {
  test('lower bound 1 − δ + m·δ_step: 0.8, 0.825, 0.85, 0.875, … capped at 1', () => {
    const c = DEFAULT_STEPWISE_CLIP;
    assert.deepEqual(c, { delta: 0.2, deltaStep: 0.025 });
    near(
      [0, 1, 2, 3].map((m) => stepwiseLowerBound(c, m)),
      [0.8, 0.825, 0.85, 0.875],
      1e-15,
    );
    // m = 8: 1 − 0.2 + 0.2 = 1; m = 12: 1.1 → 1.
    near([stepwiseLowerBound(c, 8), stepwiseLowerBound(c, 12)], [1, 1], 0);
    near(stepwiseLowerBound({ delta: 0.2, deltaStep: 0 }, 5), 0.8, 1e-15); // plain asymmetric clip
    assert.throws(() => stepwiseLowerBound(c, -1), /integer ≥ 0/);
    assert.throws(() => stepwiseLowerBound(c, 0.5), /integer ≥ 0/);
    assert.throws(() => stepwiseLowerBound({ delta: 1.2, deltaStep: 0 }, 0), /0 ≤ δ ≤ 1/);
  });

  test('loss −A·ω·c·sg(c)^α at m = 1 (band [0.825, 1]), α = 1, ω = 1.5, A = ±0.5', () => {
    const clip = DEFAULT_STEPWISE_CLIP;
    // in band, s = 0.9: ℓ = −0.5·1.5·0.9² = −0.6075; ∂ℓ/∂ log s = −0.5·1.5·0.9·sg(0.9) = −0.6075. A < 0 flips both.
    const inPos = foreignSequenceLoss(ln(0.9), 0.5, 1.5, 1, clip, 1);
    near([inPos.loss, inPos.dLogRatio, inPos.ratio], [-0.6075, -0.6075, 0.9], 1e-15);
    assert.equal(inPos.inBand, true);
    assert.equal(inPos.clipped, 'none');
    const inNeg = foreignSequenceLoss(ln(0.9), -0.5, 1.5, 1, clip, 1);
    near([inNeg.loss, inNeg.dLogRatio], [0.6075, 0.6075], 1e-15);
    // below, s = 0.8 < 0.825: c = 0.825, ℓ = −0.75·0.825² = −0.5104688, no gradient for either sign of A
    // (GSPO's min would keep the A > 0 gradient here).
    for (const a of [0.5, -0.5]) {
      const r = foreignSequenceLoss(ln(0.8), a, 1.5, 1, clip, 1);
      near([r.loss, r.dLogRatio], [-a * 1.5 * 0.825 ** 2, 0], 1e-15);
      assert.equal(r.clipped, 'low');
      assert.equal(r.inBand, false);
    }
    // above, s = 1.1 > 1: c = 1, ℓ = −A·1.5, no gradient (never up-weighted; GSPO's min would keep A < 0's).
    for (const a of [0.5, -0.5]) {
      const r = foreignSequenceLoss(ln(1.1), a, 1.5, 1, clip, 1);
      near([r.loss, r.dLogRatio], [-a * 1.5, 0], 1e-15);
      assert.equal(r.clipped, 'high');
    }
    // s = 1 exactly is inside (bounds inclusive): ℓ = −0.75, gradient −0.75.
    const one = foreignSequenceLoss(0, 0.5, 1.5, 1, clip, 1);
    near([one.loss, one.dLogRatio], [-0.75, -0.75], 1e-15);
    assert.equal(one.inBand, true);
    // the same s = 0.9 is dropped at m = 5 (band [0.925, 1]).
    assert.equal(foreignSequenceLoss(ln(0.9), 0.5, 1.5, 1, clip, 5).clipped, 'low');
  });

  test('without a band (no Clip ablation) every ratio carries a gradient: ℓ = −A·ω·s^(1+α)', () => {
    // s = 1.1, α = 1, ω = 1.5, A = 0.5: ℓ = −0.75·1.21 = −0.9075 = ∂ℓ/∂ log s; s = 0.5: −0.75·0.25 = −0.1875.
    for (const [s, v] of [
      [1.1, -0.9075],
      [0.5, -0.1875],
    ] as const) {
      const r = foreignSequenceLoss(ln(s), 0.5, 1.5, 1, null, 7);
      near([r.loss, r.dLogRatio], [v, v], 1e-14);
      assert.equal(r.inBand, true);
    }
  });
});

describe('HACPO mini-batch loss', () => {
  /** One own response with s = 1 (mean new −1.1 = mean old −1.1) and one foreign with log s = −0.1. */
  const own: HacpoSequence = {
    logProbs: [-1.0, -1.2],
    oldLogProbs: [-1.05, -1.15],
    generatorOldMean: -1.1,
    advantage: 1,
    own: true,
  };
  const foreign: HacpoSequence = {
    logProbs: [-0.5, -0.7, -0.9],
    generatorOldMean: -0.6,
    advantage: 0.5,
    own: false,
    coefficient: 1.5,
  };

  test('worked example: own GSPO term + foreign HACPO term, seq-mean-token-mean, m = 0, α = 1', () => {
    // own: s = 1, A = 1 → ℓ = −1, ∂ℓ/∂ log s = −1. foreign: s = e^−0.1 = 0.9048374 ∈ [0.8, 1],
    // ℓ = −0.5·1.5·s² = −0.75·0.8187308 = −0.6140481 = ∂ℓ/∂ log s.
    // weights 1/(2·2) = 0.25 and 1/(2·3) = 1/6: L = 0.25·2·(−1) + (1/6)·3·(−0.6140481) = −0.8070240;
    // gradients −0.25 per own token and −0.6140481/6 = −0.1023413 per foreign token.
    const r = hacpoLoss([own, foreign], { update: 0 });
    near(r.loss, -0.5 - 0.5 * 0.75 * Math.exp(-0.2), 1e-15);
    near(r.loss, -0.8070240324042431, 1e-15);
    near(r.grad[0]!, [-0.25, -0.25], 0);
    near(r.grad[1]!, [-0.10234134644269943, -0.10234134644269943, -0.10234134644269943], 1e-8);
    const s = r.stats;
    near(
      [s.ratioMean, s.ownCount, s.foreign.ratioMean, s.foreign.inBandFrac, s.foreign.count],
      [1, 1, 0.9048374180359595, 1, 1],
      1e-15,
    );
    near([s.lowerBound, s.sequences, s.tokens, s.approxKl], [0.8, 2, 5, 0], 1e-15);
    assert.ok(Number.isNaN(s.kl));
  });

  test('the coefficient ω^(j,k) (Eq. 10) scales the foreign term linearly; own responses take 1', () => {
    const base = hacpoLoss([{ ...foreign, coefficient: 1 }], { update: 0 });
    const scaled = hacpoLoss([{ ...foreign, coefficient: 1.5 }], { update: 0 });
    near(scaled.loss, 1.5 * base.loss, 1e-15);
    near(
      scaled.grad[0]!,
      Array.from(base.grad[0]!, (g) => 1.5 * g),
      1e-7,
    );
    assert.throws(() => hacpoLoss([{ ...own, coefficient: 2 }], { update: 0 }), /own response takes coefficient 1/);
  });

  test('later updates drop the same foreign response: m = 5 gives band [0.925, 1], s = 0.905 is out', () => {
    const r = hacpoLoss([own, foreign], { update: 5 });
    near(r.grad[1]!, [0, 0, 0], 0);
    near([r.stats.foreign.inBandFrac, r.stats.foreign.clipFracLow, r.stats.lowerBound], [0, 1, 0.925], 1e-15);
  });

  test("foreign 'seq-clip' with coefficient 1 equals policyLoss with a GSPO objective (naive sharing)", () => {
    const rng = mulberry32(42);
    for (const aggregation of ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'] as LossAggregation[]) {
      for (const noise of [3e-4, 0.2]) {
        const plain: PolicySequence[] = Array.from({ length: 6 }, (_, i) => {
          const n = 1 + Math.floor(rng() * 5);
          const oldLogProbs = Array.from(randn(n, rng, 0.5), (x) => -1.5 + x);
          const logProbs = Array.from(randn(n, rng, noise), (x, t) => oldLogProbs[t]! + x);
          return { logProbs, oldLogProbs, advantage: 2 * rng() - 1, truncated: i === 3 };
        });
        const shared: HacpoSequence[] = plain.map((p, i) => ({
          logProbs: p.logProbs,
          generatorOldMean: meanOf(p.oldLogProbs!),
          advantage: p.advantage,
          own: i % 2 === 0,
          coefficient: 1,
          truncated: p.truncated,
        }));
        for (const maskTruncated of [false, true]) {
          const clip = noise > 0.01 ? DAPO_CLIP : undefined;
          const want = policyLoss(plain, { objective: { surrogate: 'seq-clip', clip }, aggregation, maskTruncated });
          const got = hacpoLoss(shared, { foreign: 'seq-clip', ownClip: clip, update: 3, aggregation, maskTruncated });
          near(got.loss, want.loss, 1e-12, `${aggregation} noise ${noise}`);
          near(
            got.grad.flatMap((g) => Array.from(g)),
            want.grad.flatMap((g) => Array.from(g)),
            1e-7,
          );
          assert.equal(got.stats.sequences, want.stats.sequences);
          assert.ok(Number.isNaN(got.stats.lowerBound));
        }
      }
    }
  });

  test('KL penalty on own responses only; an own response without refLogProbs is an error when β > 0', () => {
    // own token new −1, ref −1.5: k3 = e^−0.5 + 0.5 − 1 = 0.1065307, ∂ = 1 − e^−0.5 = 0.3934693. One own sequence
    // of one token with A = 0, and one foreign with A = 0 carrying refLogProbs that must be ignored.
    const o: HacpoSequence = { logProbs: [-1], generatorOldMean: -1, refLogProbs: [-1.5], advantage: 0, own: true };
    const f: HacpoSequence = { logProbs: [-1], generatorOldMean: -1, refLogProbs: [-3], advantage: 0, own: false };
    const r = hacpoLoss([o, f], { update: 0, kl: { coef: 0.1 } });
    // w = 1/(2·1) = 0.5: klLoss = 0.1·0.5·0.1065307 = 0.0053265; own gradient 0.1·0.5·0.3934693 = 0.0196735.
    near(
      [r.loss, r.stats.klLoss, r.stats.kl],
      [0.005326532985631671, 0.005326532985631671, 0.10653065971263342],
      1e-15,
    );
    near(r.grad[0]!, [0.01967346701436833], 1e-9);
    near(r.grad[1]!, [0], 0);
    assert.throws(
      () => hacpoLoss([{ ...o, refLogProbs: undefined }], { update: 0, kl: { coef: 0.1 } }),
      /sequence 0 \(own\) has no refLogProbs/,
    );
    // a foreign response needs none.
    assert.doesNotThrow(() => hacpoLoss([{ ...f, refLogProbs: undefined }], { update: 0, kl: { coef: 0.1 } }));
  });

  test('truncated, empty and micro-batched sequences are counted as in policyLoss', () => {
    const empty: HacpoSequence = { logProbs: [], generatorOldMean: 0, advantage: 1, own: false };
    const alone = hacpoLoss([own, foreign], { update: 1 });
    const r = hacpoLoss([own, empty, { ...foreign, truncated: true }, foreign], { update: 1, maskTruncated: true });
    near(r.loss, alone.loss, 1e-15);
    assert.deepEqual([r.stats.empty, r.stats.truncatedDropped, r.stats.sequences], [1, 1, 2]);
    const units = hacpoLossUnits([own, foreign]);
    assert.deepEqual(units, { sequences: 2, tokens: 5 });
    const a = hacpoLoss([own], { update: 1, denominators: units });
    const b = hacpoLoss([foreign], { update: 1, denominators: units });
    near(a.loss + b.loss, alone.loss, 1e-15);
    assert.throws(() => hacpoLoss([own, foreign], { update: 1, denominators: { sequences: 1, tokens: 5 } }), /smaller/);
  });

  test('bad options and inconsistent own responses are errors', () => {
    assert.throws(() => hacpoLoss([own], { update: 0, alpha: -1 }), /α must be finite and ≥ 0/);
    assert.throws(() => hacpoLoss([own], { update: -1 }), /integer ≥ 0/);
    assert.throws(() => hacpoLoss([{ ...own, generatorOldMean: -0.9 }], { update: 0 }), /oldLogProbs average -1\.1/);
    assert.throws(() => hacpoLoss([{ ...own, oldLogProbs: [-1] }], { update: 0 }), /oldLogProbs has 1 entries/);
    assert.throws(() => hacpoLoss([{ ...foreign, coefficient: 0 }], { update: 0 }), /finite and > 0/);
  });
});

describe('HACPO gradients equal finite differences of the loss (float64)', () => {
  const aggregations: LossAggregation[] = ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'];

  /**
   * Sequences of 0–5 tokens, own and foreign mixed: own log-ratios near 1 ± a few ε so GSPO's clip fires; foreign
   * log-ratios spread over −0.45…+0.15 so some fall below the band at m = 1 (0.825), some inside, some above 1.
   */
  function randomBatch(seed: number): HacpoSequence[] {
    const rng = mulberry32(seed);
    return Array.from({ length: 10 }, (_, i) => {
      const n = i === 0 ? 0 : 1 + Math.floor(rng() * 5);
      const isOwn = i % 3 === 1;
      const old = Array.from(randn(n, rng, 0.5), (x) => -1.5 + x);
      const shift = isOwn ? 6e-4 * (2 * rng() - 1) : -0.45 + 0.6 * rng();
      const logProbs = Float64Array.from(randn(n, rng, isOwn ? 3e-4 : 0.3), (x, t) => old[t]! + x + shift);
      const generatorOldMean = isOwn ? meanOf(old) : meanOf(logProbs) - shift;
      return {
        logProbs,
        generatorOldMean,
        oldLogProbs: isOwn ? old : undefined,
        refLogProbs: Array.from(randn(n, rng, 0.3), (x, t) => old[t]! + x),
        advantage: 2 * rng() - 1,
        own: isOwn,
        coefficient: isOwn ? undefined : 0.5 + rng(),
        truncated: i === 4,
      };
    });
  }

  /** Central finite differences of hacpoLoss in every learner log-prob. */
  const finiteDifferences = (batch: readonly HacpoSequence[], options: HacpoLossOptions): number[] =>
    logProbFiniteDifferences(batch, (b) => hacpoLoss(b, options).loss);

  let seed = 100;
  const bands = { low: 0, none: 0, high: 0, ownClipped: 0 };
  for (const aggregation of aggregations) {
    for (const kl of [undefined, { coef: 0.3 }]) {
      for (const maskTruncated of [false, true]) {
        const batchSeed = seed++;
        const label = `${aggregation}, KL ${kl ? 'k3' : 'off'}, maskTruncated ${maskTruncated}`;

        test(`α = 0: plain finite differences, ${label}`, () => {
          const options: HacpoLossOptions = { update: 1, alpha: 0, aggregation, kl, maskTruncated };
          const batch = randomBatch(batchSeed);
          const r = hacpoLoss(batch, options);
          const f = r.stats.foreign;
          bands.low += f.clipFracLow * f.count;
          bands.high += f.clipFracHigh * f.count;
          bands.none += f.inBandFrac * f.count;
          bands.ownClipped += r.stats.clipFracLow + r.stats.clipFracHigh;
          const fd = finiteDifferences(batch, options);
          assertGradientMatches(r.grad, fd, label);
        });

        test(`α = 1 and 3: w·∂ℓ/∂log s equals finite differences with sg(c)^α frozen, ${label}`, () => {
          for (const alpha of [1, 3]) {
            const options: HacpoLossOptions = { update: 1, alpha, aggregation, kl, maskTruncated };
            const batch = randomBatch(batchSeed);
            const r = hacpoLoss(batch, options);
            // Freeze sg(c)^α at the evaluation point by folding it into the coefficient of an α = 0 loss: its value
            // is the same there, and its derivative is the derivative with the stop-gradient held constant.
            const frozen = batch.map((sq) => {
              if (sq.own || sq.logProbs.length === 0) return sq;
              const s = Math.exp(crossSequenceLogRatio(sq.logProbs, sq.generatorOldMean));
              const c = Math.min(1, Math.max(stepwiseLowerBound(DEFAULT_STEPWISE_CLIP, 1), s));
              return { ...sq, coefficient: (sq.coefficient ?? 1) * c ** alpha };
            });
            const frozenOptions = { ...options, alpha: 0 };
            near(hacpoLoss(frozen, frozenOptions).loss, r.loss, 1e-12, 'same value at the point');
            const fd = finiteDifferences(frozen, frozenOptions);
            const scale = Math.max(1e-3, ...fd.map(Math.abs));
            near(
              r.grad.flatMap((g) => Array.from(g)),
              fd,
              2e-5 * scale,
              `${label}, α ${alpha}`,
            );
          }
        });
      }
    }
  }

  test('the random cases exercised every foreign band and the own clip', () => {
    assert.ok(bands.low >= 5 && bands.none >= 5 && bands.high >= 5, `bands ${JSON.stringify(bands)}`);
    assert.ok(bands.ownClipped > 0, 'own GSPO clip never fired');
  });
});
