// The cross-agent log-ratio per token (HACRL Eq. 11) and per character of the response text (spec §7), against
// hand-worked values; the gradient against finite differences.
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
import { crossSequenceLogRatio, meanOf } from '../src/algorithms/hacpo/index.js';
import { near } from './helpers.js';

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
