// The capability-aware baseline's variants (hacpo.baseline): hand-worked values of each, the paper's staying the
// default, bad settings rejected, and seeded simulations of which are unbiased on average over questions.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type BaselineSettings,
  DEFAULT_BASELINE,
  baselineRatios,
  blendBaseline,
  blendParts,
  blendWeight,
  capabilityAwareBatchAdvantages,
  clampedRatios,
  groupBaseline,
  paperBaseline,
  perQuestionRatios,
  validateBaseline,
} from '../src/algorithms/hacpo/index.js';
import { parseRunConfig } from '../src/config/load-config.js';
import { Rng } from '../src/util/rng.js';

const close = (a: number, b: number, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);

// One question: learner 0 got [1,0,0,0], agent 1 got [1,1,0,0].
const REWARDS = [1, 0, 0, 0, 1, 1, 0, 0];
const GENERATORS = [0, 0, 0, 0, 1, 1, 1, 1];
const MEMBERS = [0, 1, 2, 3, 4, 5, 6, 7];
const settings = (s: Partial<BaselineSettings>): BaselineSettings => ({ ...DEFAULT_BASELINE, ...s });

describe('baseline variants on hand-worked values', () => {
  test('paper: Eq. 7, (1 + 0.5·2)/8', () => {
    close(paperBaseline(REWARDS, GENERATORS, [1, 0.5], MEMBERS), 0.25);
  });

  test('clamped: ω = 0.5 raised to the band edge 0.6, (1 + 0.6·2)/8', () => {
    assert.deepEqual([...clampedRatios([1, 0.5, 7], [0.6, 2])], [1, 0.6, 2]);
    const c = { settings: settings({ kind: 'clamped', omegaBand: [0.6, 2] }), learner: 0, omega: [1, 0.5] };
    close(groupBaseline(REWARDS, GENERATORS, MEMBERS, { ...c, capability: [NaN, NaN], beta: 0 }), 0.275);
  });

  test('per-question: p̃ = (S + c·P̂)/(n + c), ω = p̃_k/p̃_j; c = 0 gives the own mean, c → ∞ the batch ratio', () => {
    // p̃_0 = (1 + 4·0.3)/8 = 0.275, p̃_1 = (2 + 4·0.4)/8 = 0.45, ω = 11/18, μ̂ = (1 + 2·11/18)/8 = 5/18.
    const w = perQuestionRatios(REWARDS, GENERATORS, MEMBERS, 0, [0.3, 0.4], 4);
    close(w[0]!, 1);
    close(w[1]!, 11 / 18);
    const c = { learner: 0, omega: [1, 0.75], capability: [0.3, 0.4], beta: 0 };
    close(
      groupBaseline(REWARDS, GENERATORS, MEMBERS, {
        ...c,
        settings: settings({ kind: 'per-question', omegaPrior: 4 }),
      }),
      5 / 18,
    );
    close(
      groupBaseline(REWARDS, GENERATORS, MEMBERS, {
        ...c,
        settings: settings({ kind: 'per-question', omegaPrior: 0 }),
      }),
      0.25,
    );
    close(perQuestionRatios(REWARDS, GENERATORS, MEMBERS, 0, [0.3, 0.4], 1e12)[1]!, 0.75, 1e-9);
    assert.deepEqual([...perQuestionRatios(REWARDS, GENERATORS, MEMBERS, 0, [NaN, 0.4], 4)], [1, 1]);
  });

  test('blend: β = V/M over the step, b = (1 − β)·ō + β·f̄', () => {
    // Group A: own [1,0,0,0] (ō = 1/4, s²/n = 1/16), f̄ = 0.75 → (f̄ − ō)² = 1/4.
    // Group B: own [1,1,0,0] (ō = 1/2, s²/n = 1/12), f̄ = 0.5 → 0.  V = 7/96, M = 1/8, β = 7/12.
    const a = { own: [1, 0, 0, 0], foreign: 0.75 };
    const b = { own: [1, 1, 0, 0], foreign: 0.5 };
    close(blendWeight([a, b]), 7 / 12);
    close(blendBaseline(a, 7 / 12), 13 / 24);
    assert.deepEqual(blendParts(REWARDS, GENERATORS, 0, [1, 0.5], MEMBERS), { own: [1, 0, 0, 0], foreign: 0.25 });
    assert.equal(blendWeight([{ own: [1, 0], foreign: NaN }]), 0, 'no foreign part: β = 0');
    assert.equal(blendWeight([{ own: [1, 0], foreign: 0.5 }]), 0, 'f̄ equal to ō everywhere: β = 0');
    close(blendBaseline({ own: [1, 0], foreign: NaN }, 0.7), 0.5);
  });

  test('blend in the batch advantage: the fitted β over both groups sets group A baseline to 13/24', () => {
    // Group A: partner [1,1,1,0] scaled by ω = 1 → f̄ = 0.75; group B: partner [1,1,0,0].
    const rewards = [1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 0, 0, 1, 1, 0, 0];
    const generators = [0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1];
    const groups = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    const out = capabilityAwareBatchAdvantages(rewards, generators, groups, 0, [1, 1], {
      baseline: settings({ kind: 'blend' }),
    });
    const std = Math.sqrt((8 * 0.25) / 7) + 1e-6; // four 1s and four 0s
    close(out.advantages[0]!, (1 - 13 / 24) / std, 1e-12);
    close(out.advantages[1]!, -13 / 24 / std, 1e-12);
  });

  test('the paper is the default: no option and DEFAULT_BASELINE give identical advantages', () => {
    const rng = new Rng(5);
    const rewards = Array.from({ length: 64 }, () => (rng.next() < 0.4 ? 1 : 0));
    const generators = rewards.map((_, i) => (i % 8 < 4 ? 0 : 1));
    const groups = rewards.map((_, i) => Math.floor(i / 8));
    const omega = baselineRatios([0.35, 0.1], 0);
    const a = capabilityAwareBatchAdvantages(rewards, generators, groups, 0, omega);
    const b = capabilityAwareBatchAdvantages(rewards, generators, groups, 0, omega, { baseline: DEFAULT_BASELINE });
    assert.deepEqual(a, b);
    assert.ok(a.fallbackGroups > 0, 'ω = 3.5 makes some groups fall back, so the default path was exercised');
  });

  test('bad settings are rejected with the field named', () => {
    assert.throws(() => validateBaseline(settings({ omegaBand: [1.5, 2] })), /omegaBand/);
    assert.throws(() => validateBaseline(settings({ omegaPrior: -1 })), /omegaPrior/);
    assert.throws(
      () =>
        capabilityAwareBatchAdvantages([1, 0], [0, 0], [0, 0], 0, [1], { baseline: settings({ omegaBand: [0, 2] }) }),
      /omegaBand/,
    );
    const base = {
      agents: [
        { name: 'a', checkpoint: 'x' },
        { name: 'b', checkpoint: 'y' },
      ],
      algorithm: 'hacpo',
    };
    assert.throws(() => parseRunConfig({ ...base, hacpo: { baseline: 'median' } }), /baseline/);
    assert.throws(() => parseRunConfig({ ...base, hacpo: { omegaBand: [2, 3] } }), /omegaBand/);
    const ok = parseRunConfig({ ...base, hacpo: { baseline: 'blend' } });
    assert.equal(ok.hacpo.baseline, 'blend');
    assert.deepEqual(parseRunConfig(base).hacpo.omegaBand, [0.5, 2]);
  });
});

/** Mean over questions × replicates of μ̂ − p_k(q), and the per-group RMSE, for a stronger learner (ω ≈ 3). */
function simulate(s: BaselineSettings, fittedBeta: boolean | number) {
  const rng = new Rng(2026);
  const Q = 150;
  const G = 8;
  // Independent per-question successes: the stronger learner's p_k(q) says nothing about the partner's.
  const pk = Array.from({ length: Q }, () => 0.6 * rng.next());
  const pj = Array.from({ length: Q }, () => 0.2 * rng.next());
  const Pk = pk.reduce((a, b) => a + b) / Q;
  const Pj = pj.reduce((a, b) => a + b) / Q;
  const omega = [1, Pk / Pj];
  const generators = Array.from({ length: 2 * G }, (_, i) => (i < G ? 0 : 1));
  const members = generators.map((_, i) => i);
  let bias = 0;
  let sq = 0;
  let n = 0;
  for (let rep = 0; rep < 200; rep++) {
    const batch = pk.map((p, q) => generators.map((g) => (rng.next() < (g === 0 ? p : pj[q]!) ? 1 : 0)));
    const beta =
      typeof fittedBeta === 'number'
        ? fittedBeta
        : blendWeight(batch.map((r) => blendParts(r, generators, 0, omega, members)));
    for (const [q, r] of batch.entries()) {
      const b = groupBaseline(r, generators, members, { settings: s, learner: 0, omega, capability: [Pk, Pj], beta });
      bias += b - pk[q]!;
      sq += (b - pk[q]!) ** 2;
      n++;
    }
  }
  return { bias: bias / n, rmse: Math.sqrt(sq / n), omega: omega[1]! };
}

describe('baseline variants by simulation (seeded)', () => {
  const paper = simulate(DEFAULT_BASELINE, 0);
  test('paper: unbiased on average over questions with the true ratio (Theorem 4.1), RMSE large at ω ≈ 3', () => {
    assert.ok(paper.omega > 2.5, `ω = ${paper.omega}`);
    assert.ok(Math.abs(paper.bias) < 0.005, `bias ${paper.bias}`);
  });

  test('blend with a fixed β is unbiased too; the fitted β nearly so, with a smaller RMSE than the paper', () => {
    const fixed = simulate(settings({ kind: 'blend' }), 0.3);
    assert.ok(Math.abs(fixed.bias) < 0.005, `bias ${fixed.bias}`);
    const fitted = simulate(settings({ kind: 'blend' }), false);
    assert.ok(Math.abs(fitted.bias) < 0.01, `bias ${fitted.bias}`);
    assert.ok(fitted.rmse < 0.9 * paper.rmse, `blend ${fitted.rmse} vs paper ${paper.rmse}`);
  });

  test('clamped: biased when the true ratio lies outside the band (here ω ≈ 3 clamped to 2)', () => {
    const clamped = simulate(settings({ kind: 'clamped', omegaBand: [0.5, 2] }), 0);
    assert.ok(clamped.bias < -0.02, `bias ${clamped.bias}`);
    assert.ok(clamped.rmse < paper.rmse, `clamped ${clamped.rmse} vs paper ${paper.rmse}`);
  });

  test('per-question: smaller per-group RMSE than the paper when the agents are unrelated', () => {
    const pq = simulate(settings({ kind: 'per-question', omegaPrior: 8 }), 0);
    assert.ok(pq.rmse < paper.rmse, `per-question ${pq.rmse} vs paper ${paper.rmse}`);
  });
});
