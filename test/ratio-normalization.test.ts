// The cross-agent log-ratio per token (HACRL Eq. 11) and per character of the response text (spec §7), against
// hand-worked values; the gradient against finite differences; the 'char' form inside the policy loss.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  crossLogRatio,
  inBandFraction,
  learnerLogRatioGradient,
  normalizedLogProb,
  ratioDivisor,
  responseCharacters,
} from '../src/algorithms/hacpo/ratio-normalization.js';
import { crossSequenceLogRatio } from '../src/algorithms/hacpo/index.js';
import { mean as meanOf } from '../src/util/stats.js';
import { policyLoss, type PolicyLossOptions } from '../src/algorithms/policy-loss.js';
import type { PolicySequence } from '../src/algorithms/sequence.js';
import { assertGradientMatches, logProbFiniteDifferences, mulberry32, near, randn } from './helpers.js';

describe('ratio normalisation: per token vs per character', () => {
  // "ab1": a character-level learner sees 3 tokens, a BPE generator 2 ("ab", "1").
  const learner = [-0.5, -1.0, -1.5]; // Σ = −3.0
  const generator = [-1.2, -0.6]; // Σ = −1.8

  test('hand-worked: token −3/3 − (−1.8/2) = −0.1; char −3/3 − (−1.8/3) = −0.4', () => {
    near(crossLogRatio(learner, generator, 'ab1', 'token'), -0.1, 1e-12);
    near(crossLogRatio(learner, generator, 'ab1', 'char'), -0.4, 1e-12);
  });

  test('the token form is the trainer’s Eq. 11 (crossSequenceLogRatio with the generator mean)', () => {
    near(crossLogRatio(learner, generator, 'ab1', 'token'), crossSequenceLogRatio(learner, meanOf(generator)), 1e-12);
  });

  test('equal likelihood of the text on both sides: char gives ratio 1, token moves with granularity alone', () => {
    // Both agents give "12+3" total log-prob −2.4: learner in 4 character tokens, generator in 2 BPE tokens.
    const l = [-0.6, -0.6, -0.6, -0.6];
    const g = [-1.2, -1.2];
    near(crossLogRatio(l, g, '12+3', 'char'), 0, 1e-12);
    near(crossLogRatio(l, g, '12+3', 'token'), -0.6 + 1.2, 1e-12); // s = e^0.6 ≈ 1.82, outside the band [·, 1]
  });

  test('own response (same tokens): char = token form × T/C', () => {
    const lp = [-0.2, -0.4, -0.9];
    const old = [-0.3, -0.3, -1.0];
    const token = crossLogRatio(lp, old, 'abcdef', 'token');
    near(token, (-1.5 - -1.6) / 3, 1e-12);
    near(crossLogRatio(lp, old, 'abcdef', 'char'), (token * 3) / 6, 1e-12);
  });

  test('characters are code points, at least one', () => {
    assert.equal(responseCharacters('12+3'), 4);
    assert.equal(responseCharacters('😀a'), 2); // 3 UTF-16 units
    assert.equal(responseCharacters('½'), 1);
    assert.equal(responseCharacters(''), 1); // an EOS-only response
  });

  test('divisors and the learner-side gradient; finite differences agree', () => {
    assert.equal(ratioDivisor('token', 3, 7), 3);
    assert.equal(ratioDivisor('char', 3, 7), 7);
    near(normalizedLogProb([-1, -2], 4), -0.75, 1e-15);
    const gt = learnerLogRatioGradient('token', 3, 6);
    const gc = learnerLogRatioGradient('char', 3, 6);
    assert.deepEqual(gt, { perToken: 1 / 3, scaleFromTokenMean: 1 });
    near(gc.perToken, 1 / 6, 1e-15);
    near(gc.scaleFromTokenMean, 0.5, 1e-15);
    const h = 1e-6;
    for (const mode of ['token', 'char'] as const)
      for (let t = 0; t < learner.length; t++) {
        const up = learner.map((x, i) => (i === t ? x + h : x));
        const down = learner.map((x, i) => (i === t ? x - h : x));
        const fd =
          (crossLogRatio(up, generator, 'abcdef', mode) - crossLogRatio(down, generator, 'abcdef', mode)) / (2 * h);
        near(fd, learnerLogRatioGradient(mode, 3, 6).perToken, 1e-8);
      }
  });

  test('in-band fraction of ratios in [lower, 1]', () => {
    const lrs = [Math.log(0.5), Math.log(0.9), 0, Math.log(1.1)];
    assert.equal(inBandFraction(lrs, 0.8), 0.5);
    assert.equal(inBandFraction(lrs, 0.4), 0.75);
    assert.ok(Number.isNaN(inBandFraction([], 0.8)));
  });

  test('bad input names what to change', () => {
    assert.throws(() => ratioDivisor('byte' as 'char', 2, 2), /must be 'token' or 'char', got "byte"/);
    assert.throws(() => crossLogRatio([], [-1], 'a', 'token'), /at least one token/);
    assert.throws(() => ratioDivisor('char', 2, 0), /characters must be a positive integer/);
  });
});

describe("the policy loss with 'char' ratios (foreign responses carry ratioCharacters)", () => {
  // A BPE learner's 2 tokens of "ab12" (Σ −1.2) that a character-level generator wrote in 4 tokens (Σ −0.8).
  const learnerLp = [-0.8, -0.4];
  const foreign = (perChar: boolean): PolicySequence => ({
    logProbs: learnerLp,
    advantage: 0.5,
    own: false,
    generatorOldMean: -0.8 / 4, // the generator's Σ / its 4 tokens, = Σ / the 4 characters
    ...(perChar ? { ratioCharacters: 4 } : {}),
  });
  // α 0, band [1 − 0.2 + 0·0.025, 1] = [0.8, 1], one sequence: loss = −A·clip(s, 0.8, 1).
  const options: PolicyLossOptions = { objective: { surrogate: 'seq-clip' }, foreign: { alpha: 0, update: 0 } };

  test('hand-worked: char log s = −1.2/4 − (−0.8/4) = −0.1, in band; token −1.2/2 + 0.2 = −0.4, clipped out', () => {
    const c = policyLoss([foreign(true)], options);
    near(c.loss, -0.5 * Math.exp(-0.1), 1e-12);
    // ∂loss/∂ log π(t) = −A·s·(1/C) for each of the learner's tokens: 1/C, not 1/T.
    near(c.grad[0]!, [-0.5 * Math.exp(-0.1) * 0.25, -0.5 * Math.exp(-0.1) * 0.25], 1e-7);
    near(c.stats.foreign.inBandFrac, 1, 0);
    const t = policyLoss([foreign(false)], options);
    near(t.loss, -0.5 * 0.8, 1e-12);
    near(t.grad[0]!, [0, 0], 0);
    near(t.stats.foreign.inBandFrac, 0, 0);
  });

  test('gradients match finite differences (HACPO and naive foreign objectives, every aggregation)', () => {
    const rng = mulberry32(7);
    const batch: PolicySequence[] = [];
    for (let i = 0; i < 6; i++) {
      const n = 2 + (i % 4);
      const logProbs = Float64Array.from(randn(n, rng, 0.5), (x) => -1 - Math.abs(x));
      const sum = logProbs.reduce((a, b) => a + b, 0);
      if (i % 3 === 0) {
        // Own: plain GSPO, old log-probs near the new ones.
        batch.push({ logProbs, oldLogProbs: logProbs.map((x) => x + 1e-4 * (rng() - 0.5)), advantage: rng() - 0.5 });
        continue;
      }
      const chars = n + 1 + (i % 3) * 2;
      // log s = Σ/C − generatorOld ∈ [−0.15, −0.02]: strictly inside the band, away from its kinks.
      const generatorOldMean = sum / chars + 0.02 + 0.13 * rng();
      batch.push({ logProbs, own: false, generatorOldMean, ratioCharacters: chars, advantage: rng() - 0.5 });
    }
    for (const aggregation of ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'] as const)
      for (const surrogate of ['hacpo-foreign', 'seq-clip'] as const) {
        const o: PolicyLossOptions = {
          objective: { surrogate: 'seq-clip', clip: { low: 0.5, high: 0.5 } },
          foreign: { surrogate, alpha: 0, update: 0 }, // α 0: sg(s)^α would hide from finite differences
          aggregation,
        };
        const r = policyLoss(batch, o);
        assertGradientMatches(
          r.grad,
          logProbFiniteDifferences(batch, (b) => policyLoss(b, o).loss),
          aggregation,
        );
        assert.equal(r.stats.foreign.inBandFrac, 1);
      }
  });

  test('own responses keep GSPO’s ratio; a bad character count names the field', () => {
    const own: PolicySequence = { logProbs: [-1], oldLogProbs: [-1], advantage: 1, ratioCharacters: 3 };
    assert.throws(() => policyLoss([own], options), /ratioCharacters is for foreign responses/);
    assert.throws(() => policyLoss([{ ...foreign(true), ratioCharacters: 0 }], options), /ratioCharacters 0/);
  });
});
