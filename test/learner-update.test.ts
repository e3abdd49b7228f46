// What one learner step does to a real (tiny) model, through the public learnerStep: the rewarded response of a
// two-response group becomes likelier and the other less likely, under GRPO's token ratio, GSPO's sequence ratio and
// HACPO's foreign objective; each HACPO mechanism (Eqs. 6–9, 10, 12, 13–14) changes the update of a hand-built team
// the way the spec (shared/spec/hacpo.md §2–5) predicts, read on the learner's log-probs of foreign responses; and a
// rollout correction (TIS, mask) changes the loss and gradient of a step whose sampler disagreed with the learner by
// the weights worked out by hand.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DAPO_CLIP,
  DEFAULT_STEPWISE_CLIP,
  GSPO_CLIP,
  engine,
  learnerStep,
  type Learner,
  type LearnerView,
  type SampleRecord,
  type StepwiseClip,
  type UpdateRecipe,
} from '../src/index.js';
import { scoreResponses } from '../src/model/response-log-probs.js';
import { AdamW } from '../src/optim/adamw.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { Rng } from '../src/util/rng.js';
import { near } from './helpers.js';
import { CONFIGS, VOCAB, testModel } from './tiny-models.js';

const k = engine();
// The update never reads it, but an agent comes with a tokenizer: 96 characters and EOS fill the tiny vocabulary.
const tokenizer = new CharTokenizer({
  alphabet: Array.from({ length: VOCAB - 1 }, (_, i) => String.fromCharCode(32 + i)),
  specialTokens: ['<eos>'],
  names: { eos: '<eos>' },
});

const PROMPT = [5, 6, 7, 8];
/** Responses of disjoint tokens, so that each has a log-prob of its own to watch. */
const [R0, R1, R2, R3] = [10, 20, 30, 40].map((t) => [t, t + 1, t + 2, t + 3]) as [
  number[],
  number[],
  number[],
  number[],
];

/**
 * A learner on a tiny Qwen3-style model. With `descent`, AdamW is made plain gradient descent of that step size
 * (β1 0 and ε far above every |g|, so the step is lr/ε·g): an update then scales with the loss, and the ratios the
 * mechanism tests read are not flattened by Adam's per-weight normalisation of the first step.
 */
function learner(
  name: string,
  seed: number,
  o: { descent?: number; alpha?: number; stepwise?: StepwiseClip } = {},
): Learner {
  const model = testModel(CONFIGS.qwen3!, seed);
  const eps = 1e3;
  const optimizer =
    o.descent === undefined
      ? new AdamW(model.params, { lr: 1e-4, weightDecay: 0 })
      : new AdamW(model.params, { beta1: 0, eps, weightDecay: 0 });
  return {
    policy: { name, model, tokenizer },
    optimizer,
    reference: null,
    lr: o.descent === undefined ? 1e-4 : o.descent * eps,
    alpha: o.alpha ?? 1,
    stepwise: o.stepwise ?? DEFAULT_STEPWISE_CLIP,
    order: 'shuffled',
  };
}

/** The learner's mean log-prob (over tokens) of each response to PROMPT. */
function meanLogProbs(l: Learner, responses: readonly number[][]): number[] {
  const lps = scoreResponses(
    l.policy.model,
    k,
    responses.map((response) => ({ prompt: PROMPT, response })),
  );
  return lps.map((lp) => lp.reduce((a, b) => a + b, 0) / lp.length);
}

/** One response of the hand-built table. */
interface Row {
  generator: string;
  response: number[];
  reward: number;
  /** Foreign rows: the learner's log s of Eq. 11 at the start of the step (the generator's old mean is set to it). */
  logRatio?: number;
  /** Left out of the loss (truncated, under maskTruncated): an own row that only joins the group's baseline. */
  masked?: boolean;
}

/**
 * One prompt group and `l`'s view of it: own rows carry its current log-probs as the generator's (ratio 1); foreign
 * rows are spelled in the same tokens and carry old log-probs that put their ratio at exp(logRatio).
 */
function groupTable(l: Learner, rows: readonly Row[]): { table: SampleRecord[]; view: LearnerView } {
  const current = scoreResponses(
    l.policy.model,
    k,
    rows.map((r) => ({ prompt: PROMPT, response: r.response })),
  );
  const table = rows.map((r, id): SampleRecord => {
    const own = r.generator === l.policy.name;
    return {
      id,
      generator: r.generator,
      role: r.generator,
      episode: id,
      group: 0,
      prompt: 'q',
      gold: '1',
      text: 'x'.repeat(r.response.length),
      tokens: { prompt: PROMPT, response: r.response },
      generatorLogProbs: current[id]!.map((lp) => lp - (own ? 0 : r.logRatio!)),
      reward: r.reward,
      rewardParts: { math: r.reward },
      truncated: r.masked === true,
      stoppedByEos: false,
    };
  });
  const tokens = rows.map((r) => ({ prompt: PROMPT, response: r.response, generatorSpan: r.response.length }));
  return { table, view: { records: rows.map((_, id) => id), tokens, dropped: 0 } };
}

const GRPO: UpdateRecipe = {
  surrogate: 'token-clip',
  sharing: 'none',
  clip: DAPO_CLIP,
  dualClip: null,
  aggregation: 'token-mean',
  advantage: 'group-std',
  kl: null,
  entropyCoef: 0,
  maskTruncated: false,
  filterZeroVariance: false,
  // One update per step: the direction of the first update is what is asserted.
  miniBatches: 1,
  epochs: 1,
  gradClip: Infinity,
  capabilityBaseline: false,
  discrepancyCoefficient: false,
  foreign: 'hacpo-foreign',
};
const GSPO: UpdateRecipe = { ...GRPO, surrogate: 'seq-clip', clip: GSPO_CLIP, aggregation: 'seq-mean-token-mean' };
/** HACPO with every mechanism on; own rows of the mechanism tests are masked, so only foreign rows move the model. */
const HACPO: UpdateRecipe = {
  ...GSPO,
  sharing: 'hacpo',
  advantage: 'capability-aware',
  maskTruncated: true,
  capabilityBaseline: true,
  discrepancyCoefficient: true,
};

/** Runs learner `index` of `team` on `rows` and returns how far each watched response's mean log-prob moved. */
function moved(
  team: readonly Learner[],
  index: number,
  recipe: UpdateRecipe,
  capability: readonly number[],
  rows: readonly Row[],
  watch: readonly number[][],
): number[] {
  const l = team[index]!;
  const before = meanLogProbs(l, watch);
  const { table, view } = groupTable(l, rows);
  const r = learnerStep(
    table,
    view,
    l,
    team.map((t) => t.policy.name),
    recipe,
    capability,
    k,
    new Rng(0),
  );
  assert.equal(r.skippedUpdates, 0);
  return meanLogProbs(l, watch).map((v, i) => v - before[i]!);
}

describe('one learner step on a two-response group: the rewarded response rises, the other falls', () => {
  for (const [name, recipe] of [
    ['GRPO (token ratio)', GRPO],
    ['GSPO (sequence ratio)', GSPO],
  ] as const)
    test(name, () => {
      const rows = [
        { generator: 'a', response: R0, reward: 1 },
        { generator: 'a', response: R1, reward: 0 },
      ];
      const [up, down] = moved([learner('a', 1)], 0, recipe, [NaN], rows, [R0, R1]);
      assert.ok(up! > 1e-3, `rewarded response: mean log-prob moved ${up}`);
      assert.ok(down! < -1e-3, `unrewarded response: mean log-prob moved ${down}`);
    });

  test('HACPO foreign objective (Eqs. 12–14): the other agent’s rewarded response rises, its other one falls', () => {
    // The learner's own responses only join the baseline; its foreign pair starts inside the band (s = e^-0.1).
    const rows = [
      { generator: 'a', response: R2, reward: 1, masked: true },
      { generator: 'a', response: R3, reward: 0, masked: true },
      { generator: 'b', response: R0, reward: 1, logRatio: -0.1 },
      { generator: 'b', response: R1, reward: 0, logRatio: -0.1 },
    ];
    const team = [learner('a', 1), learner('b', 2)];
    const [up, down] = moved(team, 0, HACPO, [0.5, 0.5], rows, [R0, R1]);
    assert.ok(up! > 1e-3, `rewarded foreign response: mean log-prob moved ${up}`);
    assert.ok(down! < -1e-3, `unrewarded foreign response: mean log-prob moved ${down}`);
  });
});

describe('each HACPO mechanism changes the update of a hand-built team as the spec predicts', () => {
  const STEP = 5e-5;
  /** A fresh team (same initial weights every call) whose learners descend by STEP. */
  const team = (o: { alpha?: number; stepwise?: StepwiseClip } = {}) => [
    learner('a', 1, { descent: STEP, ...o }),
    learner('b', 2, { descent: STEP, ...o }),
  ];
  const names = ['a', 'b'];
  /** Learner `index`'s own pair (masked: baseline only) and one foreign rewarded response at ratio s. */
  const oneForeign = (index: number, s: number, reward = 1, own = [0, 0]): Row[] => [
    { generator: names[index]!, response: R2, reward: own[0]!, masked: true },
    { generator: names[index]!, response: R3, reward: own[1]!, masked: true },
    { generator: names[1 - index]!, response: R0, reward, logRatio: Math.log(s) },
  ];

  test('Eq. 10: a stronger generator’s response moves the learner ω^(j,k) = 2 times as far as with the coefficient off, a weaker one’s 1/2 as far', () => {
    // P̂ = (0.4, 0.8): for learner a, b's responses get ω^(b,a) = 2; for learner b, a's get ω^(a,b) = 0.5. Under
    // plain descent the whole update is linear in the coefficient (the advantage is the same in both arms).
    const capability = [0.4, 0.8];
    for (const [index, want] of [
      [0, 2],
      [1, 0.5],
    ] as const) {
      const on = moved(team(), index, HACPO, capability, oneForeign(index, 0.9), [R0])[0]!;
      const off = moved(
        team(),
        index,
        { ...HACPO, discrepancyCoefficient: false },
        capability,
        oneForeign(index, 0.9),
        [R0],
      )[0]!;
      assert.ok(off > 1e-4, `coefficient off: the rewarded foreign response rises (${off})`);
      const ratio = on / off;
      assert.ok(Math.abs(ratio / want - 1) < 0.03, `learner ${names[index]}: on/off = ${ratio}, want ${want}`);
    }
  });

  test('Eqs. 6–9: the capability-aware baseline credits a weaker learner’s shared group more, a stronger one’s less', () => {
    // Own rewards (1, 0), the other agent's (1, 0) at equal ratios, P̂ = (0.4, 0.6). Learner a: ω^(a,b) = 2/3, μ̂ =
    // (1 + 2/3)/4 = 5/12 below the plain mean 1/2, so every advantage is higher by (1/2 − 5/12)/σ and the pair's summed
    // log-prob rises more than with the plain mean; learner b: ω^(b,a) = 1.5, μ̂ = 2.5/4 = 0.625 > 1/2, rises less.
    const capability = [0.4, 0.6];
    const rows = (index: number): Row[] => [
      { generator: names[index]!, response: R2, reward: 1, masked: true },
      { generator: names[index]!, response: R3, reward: 0, masked: true },
      { generator: names[1 - index]!, response: R0, reward: 1, logRatio: -0.1 },
      { generator: names[1 - index]!, response: R1, reward: 0, logRatio: -0.1 },
    ];
    const sum = (xs: number[]): number => xs[0]! + xs[1]!;
    for (const [index, sign] of [
      [0, 1],
      [1, -1],
    ] as const) {
      const on = sum(moved(team(), index, HACPO, capability, rows(index), [R0, R1]));
      const off = sum(moved(team(), index, { ...HACPO, capabilityBaseline: false }, capability, rows(index), [R0, R1]));
      assert.ok(
        sign * (on - off) > 1e-5,
        `learner ${names[index]}: summed rise ${on} with the baseline, ${off} without`,
      );
    }
  });

  test('Eq. 12: exponential IS scales a foreign update by s^α (s = 0.85: α 1 → 0.85, α 3 → 0.614 of α 0)', () => {
    const capability = [0.5, 0.5];
    const rise = (alpha: number) => moved(team({ alpha }), 0, HACPO, capability, oneForeign(0, 0.85), [R0])[0]!;
    const plain = rise(0);
    assert.ok(plain > 1e-4, `α 0: the rewarded foreign response rises (${plain})`);
    for (const alpha of [1, 3]) {
      const ratio = rise(alpha) / plain;
      assert.ok(Math.abs(ratio / 0.85 ** alpha - 1) < 0.03, `α ${alpha}: ${ratio}, want ${0.85 ** alpha}`);
    }
  });

  test('Eq. 13: outside the band [1 − δ, 1] a foreign response gives no gradient, where GSPO’s clip would keep one', () => {
    const capability = [0.5, 0.5];
    // Above 1 with A < 0 (own rewards 1, 1) and below 0.8 with A > 0 (own 0, 0): HACPO leaves the weights as they
    // were; the naive objective (GSPO's min) pushes the first down and the second up.
    for (const [s, reward, own, sign] of [
      [1.1, 0, [1, 1], -1],
      [0.75, 1, [0, 0], 1],
    ] as const) {
      const rows = oneForeign(0, s, reward, [...own]);
      const t = team();
      const before = [...t[0]!.policy.model.params.values()].map((p) => Float32Array.from(p.data));
      moved(t, 0, HACPO, capability, rows, [R0]);
      const after = [...t[0]!.policy.model.params.values()].map((p) => p.data);
      assert.ok(
        before.every((b, i) => Buffer.from(b.buffer).equals(Buffer.from(after[i]!.buffer))),
        `s ${s}: weights unchanged`,
      );
      const naive = moved(team(), 0, { ...HACPO, foreign: 'seq-clip' }, capability, rows, [R0])[0]!;
      assert.ok(sign * naive > 1e-4, `s ${s}: the naive objective moved it by ${naive}`);
    }
  });

  test('Eq. 14: the band’s lower bound rises with each update: s = 0.81 trains at m = 0 and not at m = 1 when δ_step = 0.1', () => {
    const capability = [0.5, 0.5];
    const rows = oneForeign(0, 0.81);
    const twice = { ...HACPO, epochs: 2 };
    const once = moved(team({ stepwise: { delta: 0.2, deltaStep: 0 } }), 0, HACPO, capability, rows, [R0])[0]!;
    const flat = moved(team({ stepwise: { delta: 0.2, deltaStep: 0 } }), 0, twice, capability, rows, [R0])[0]!;
    const rising = moved(team({ stepwise: { delta: 0.2, deltaStep: 0.1 } }), 0, twice, capability, rows, [R0])[0]!;
    assert.ok(once > 1e-4, `one update: the response rises (${once})`);
    // A fixed band [0.8, 1] keeps it in both updates: about twice one update's rise.
    assert.ok(Math.abs(flat / once - 2) < 0.1, `fixed band, two updates: ${flat} vs one update ${once}`);
    // At m = 1 the band is [0.9, 1]: the second update has no gradient and (plain descent) no step.
    assert.equal(rising, once, 'rising band: the second update adds nothing');
  });
});

describe('a rollout correction reaches the update: a learner step weighs or masks by the sampler/learner ratio', () => {
  const rows = [
    { generator: 'a', response: R0, reward: 1 },
    { generator: 'a', response: R1, reward: 0 },
  ];
  // Group-std advantages of rewards (1, 0): ±0.5 / (std + 1e-6), std the unbiased √0.5.
  const A = 0.5 / (Math.sqrt(0.5) + 1e-6);
  /**
   * One GRPO step of a fresh learner, its own responses recorded by a sampler whose ratio ρ_t = π_old/π_sampler is
   * `rho[i]` on every token of response i; the step's metrics.
   */
  const step = (rho: readonly [number, number], correction?: UpdateRecipe['rolloutCorrection']) => {
    const l = learner('a', 1);
    const { table, view } = groupTable(l, rows);
    const sampled = table.map((r, i) => ({
      ...r,
      samplingLogProbs: Array.from(r.generatorLogProbs, (old) => old - Math.log(rho[i]!)),
    }));
    const recipe = correction ? { ...GRPO, rolloutCorrection: correction } : GRPO;
    const r = learnerStep(sampled, view, l, [l.policy.name], recipe, [NaN], k, new Rng(0));
    assert.equal(r.skippedUpdates, 0);
    return r.metrics;
  };
  // Every PPO ratio starts at 1 (the old log-probs are the current ones), so under token-mean each token's term is
  // −A_i·c_t / (tokens counted), c_t the correction's weight. R0 (A > 0) at ρ = 3, R1 (A < 0) at ρ = 0.6, cap 2
  // (ρ = 0.5 would sit on the mask's edge, on either side by rounding).
  const skewed = [3, 0.6] as const;

  test('uncorrected, the two responses cancel: loss 0', () => {
    assert.ok(Math.abs(step(skewed).loss!) < 1e-6);
  });

  test('token TIS weighs R0 by min(3, 2) = 2 and R1 by 0.6: loss −(4·2·A − 4·0.6·A)/8 = −0.7·A', () => {
    const m = step(skewed, { mode: 'tis', cap: 2, level: 'token' });
    near(m.loss!, -0.7 * A, 1e-5, 'loss');
    near([m.rollout_ratio_max!, m.rollout_corrected_frac!], [3, 0.5], 1e-9, 'mismatch metrics');
  });

  test('token mask drops R0 (ρ = 3 outside [0.5, 2]) from the loss and its denominator: loss −(4·(−A))/4 = A', () => {
    near(step(skewed, { mode: 'mask', cap: 2, level: 'token' }).loss!, A, 1e-5, 'loss');
  });

  test('TIS weight 0.6 on every token scales the gradient the optimizer steps on by 0.6', () => {
    const plain = step([0.6, 0.6]).grad_norm!;
    const tis = step([0.6, 0.6], { mode: 'tis', cap: 2, level: 'token' }).grad_norm!;
    assert.ok(plain > 1e-3, `gradient norm ${plain}`);
    near(tis / plain, 0.6, 1e-6, `gradient norms ${tis} and ${plain}`);
  });
});
