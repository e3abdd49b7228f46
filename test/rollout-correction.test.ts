// Rollout correction: the sampler's log-probs against the learner's old ones, as TIS weights or a mask in the one
// policy loss, at the token and the sequence level — checked against values worked out by hand — and the config
// that turns it on (off by default, refused where it cannot apply).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { policyLoss, type PolicyLossOptions } from '../src/algorithms/policy-loss.js';
import {
  OLD_LOG_PROB_SOURCES,
  ROLLOUT_CORRECTIONS,
  rolloutMismatch,
  sequenceRolloutRatio,
  tisWeight,
  maskWeight,
  type RolloutCorrection,
} from '../src/algorithms/rollout-correction.js';
import type { PolicySequence } from '../src/algorithms/sequence.js';
import { parseRunConfig } from '../src/config/load-config.js';
import { configJsonSchema } from '../src/config/rl-config.js';
import { resolveRun } from '../src/train/resolved-run.js';
import { engine } from '../src/backend/engine.js';
import { mathReward } from '../src/rewards/reward.js';
import { closeDefaultPool } from '../src/rewards/worker-pool.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { scoreResponses } from '../src/model/response-log-probs.js';
import { RolloutSource } from '../src/train/sample-sources.js';
import type { SampleRecord } from '../src/train/sample-table.js';
import { Rng } from '../src/util/rng.js';
import { near } from './helpers.js';
import { CONFIGS, testModel } from './tiny-models.js';

const ln = Math.log;

// The hand-worked example: two own sequences of two tokens, new = old (every PPO ratio is 1, inside the clip), so
// under token-clip each token's term is −A·w and its gradient −A·w, times the correction weight c.
//   A (advantage +1): old [ln .6, ln .3], sampler [ln .4, ln .1] → ρ_t = [1.5, 3]
//   B (advantage −1): old [ln .2, ln .5], sampler [ln .5, ln .5] → ρ_t = [0.4, 1]
// Cap C = 2 (mask band [0.5, 2]):
//   token TIS   c = [1.5, 2 | 0.4, 1], w = ¼: L = ¼(−1.5 − 2 + 0.4 + 1) = −0.525; ∂ = [−.375, −.5 | .1, .25]
//   token mask  keep [1, 0 | 0, 1]: 2 tokens, w = ½: L = ½(−1 + 1) = 0;             ∂ = [−.5, 0 | 0, .5]
//   seq TIS     ρ_A = √(1.5·3) = √4.5 ≈ 2.121 → 2; ρ_B = √0.4 ≈ 0.6325, w = ¼:
//               L = ¼(−2·2 + 2·√0.4) ≈ −0.683772;                                   ∂ = [−.5, −.5 | √0.4/4 ×2]
//   seq mask    A leaves (2.121 > 2), B stays: 2 tokens, w = ½: L = ½(1 + 1) = 1;  ∂ = [0, 0 | .5, .5]
//   mismatch    k3 = ρ − 1 − ln ρ: 0.094535, 0.901388, 0.316291, 0 → mean 0.328053; max ρ 3 (token), √4.5 (seq)
const A: PolicySequence = { logProbs: [ln(0.6), ln(0.3)], oldLogProbs: [ln(0.6), ln(0.3)], advantage: 1 };
const B: PolicySequence = { logProbs: [ln(0.2), ln(0.5)], oldLogProbs: [ln(0.2), ln(0.5)], advantage: -1 };
const BATCH: PolicySequence[] = [
  { ...A, samplingLogProbs: [ln(0.4), ln(0.1)] },
  { ...B, samplingLogProbs: [ln(0.5), ln(0.5)] },
];
const cap = 2;
const loss = (c: RolloutCorrection | undefined, batch = BATCH, extra: Partial<PolicyLossOptions> = {}) =>
  policyLoss(batch, {
    objective: { surrogate: 'token-clip' },
    aggregation: 'token-mean',
    ...(c ? { rolloutCorrection: c } : {}),
    ...extra,
  });
const grads = (r: ReturnType<typeof loss>): number[] => r.grad.flatMap((g) => Array.from(g));

test('token-level TIS weighs each token by min(ρ_t, C), token-level mask drops tokens outside [1/C, C]', () => {
  const tis = loss({ mode: 'tis', cap, level: 'token' });
  near(tis.loss, -0.525, 1e-12, 'TIS loss');
  near(grads(tis), [-0.375, -0.5, 0.1, 0.25], 1e-7, 'TIS gradient');
  assert.equal(tis.stats.tokens, 4, 'TIS keeps every token in the denominator');
  const mask = loss({ mode: 'mask', cap, level: 'token' });
  near(mask.loss, 0, 1e-12, 'mask loss');
  near(grads(mask), [-0.5, 0, 0, 0.5], 1e-7, 'mask gradient');
  assert.equal(mask.stats.tokens, 2, 'masked tokens leave the denominator');
  // Uncorrected, for contrast: every token at weight 1.
  near(grads(loss(undefined)), [-0.25, -0.25, 0.25, 0.25], 1e-7, 'uncorrected');
});

test('sequence-level correction weighs or drops whole responses by the geometric mean of their ratios', () => {
  near(sequenceRolloutRatio([ln(0.6), ln(0.3)], [ln(0.4), ln(0.1)], [0, 1]), Math.sqrt(4.5), 1e-12);
  const tis = loss({ mode: 'tis', cap, level: 'sequence' });
  near(tis.loss, 0.25 * (-4 + 2 * Math.sqrt(0.4)), 1e-12, 'TIS loss');
  near(grads(tis), [-0.5, -0.5, Math.sqrt(0.4) / 4, Math.sqrt(0.4) / 4], 1e-7, 'TIS gradient');
  const mask = loss({ mode: 'mask', cap, level: 'sequence' });
  near(mask.loss, 1, 1e-12, 'mask loss');
  near(grads(mask), [0, 0, 0.5, 0.5], 1e-7, 'mask gradient');
  assert.deepEqual([mask.stats.tokens, mask.stats.sequences, mask.stats.empty], [2, 1, 1]);
  // The sequence weight works under a sequence-ratio surrogate too: GSPO's term scaled by min(ρ, C).
  const gspo = (c?: RolloutCorrection) => loss(c, BATCH, { objective: { surrogate: 'seq-clip' } });
  const plain = grads(gspo());
  near(
    grads(gspo({ mode: 'tis', cap, level: 'sequence' })),
    [...plain.slice(0, 2).map((g) => 2 * g), ...plain.slice(2).map((g) => Math.sqrt(0.4) * g)],
    1e-7,
  );
});

test('the mismatch statistics: mean k3 KL per token, the largest ratio, the share the correction changed', () => {
  const responses = BATCH.map((s) => ({ old: s.oldLogProbs!, sampler: s.samplingLogProbs! }));
  const k3 = [1.5, 3, 0.4, 1].map((r) => r - 1 - ln(r));
  near(k3, [0.094535, 0.901388, 0.316291, 0], 1e-6);
  const token = rolloutMismatch(responses, { mode: 'tis', cap, level: 'token' });
  near([token.kl, token.ratioMax, token.correctedFrac], [0.328053, 3, 0.25], 1e-6);
  near(rolloutMismatch(responses, { mode: 'mask', cap, level: 'token' }).correctedFrac, 0.5, 0);
  const seq = rolloutMismatch(responses, { mode: 'tis', cap, level: 'sequence' });
  near([seq.kl, seq.ratioMax, seq.correctedFrac], [0.328053, Math.sqrt(4.5), 0.5], 1e-6);
  assert.ok(Number.isNaN(rolloutMismatch([], { mode: 'tis', cap, level: 'token' }).kl));
  // TIS truncates above the cap only; the mask's band is closed at both ends.
  assert.deepEqual([tisWeight(0.3, 2), tisWeight(5, 2)], [0.3, 2]);
  assert.deepEqual([maskWeight(0.5, 2), maskWeight(2, 2), maskWeight(0.49, 2), maskWeight(2.01, 2)], [1, 1, 0, 0]);
});

test('with no mismatch TIS and mask change nothing: the loss and gradients are those of no correction', () => {
  const agreed = BATCH.map((s) => ({
    ...s,
    samplingLogProbs: s.oldLogProbs!,
    logProbs: Array.from(s.logProbs, (x) => x - 0.1),
  }));
  const plain = loss(undefined, agreed);
  for (const c of [
    { mode: 'mask', cap, level: 'token' },
    { mode: 'mask', cap, level: 'sequence' },
    { mode: 'tis', cap, level: 'sequence' },
  ] as const)
    assert.deepEqual(loss(c, agreed), plain, `${c.mode} ${c.level}`);
  // Token-level TIS adds the same terms one token at a time: equal up to the order of the additions.
  const tis = loss({ mode: 'tis', cap, level: 'token' }, agreed);
  near(tis.loss, plain.loss, 1e-15);
  assert.deepEqual(tis.grad, plain.grad);
});

test('a foreign response (HACPO) is never corrected: its own importance ratio already weighs its generator', () => {
  const foreign: PolicySequence = {
    logProbs: [ln(0.3), ln(0.4)],
    own: false,
    generatorOldMean: ln(0.35),
    advantage: 0.5,
    coefficient: 1.5,
  };
  const shared = (c?: RolloutCorrection) =>
    policyLoss([...BATCH, foreign], {
      objective: { surrogate: 'seq-clip' },
      foreign: { update: 0 },
      ...(c ? { rolloutCorrection: c } : {}),
    });
  const [plain, tis] = [shared(), shared({ mode: 'tis', cap, level: 'sequence' })];
  assert.deepEqual(tis.grad[2], plain.grad[2], 'the foreign gradient is untouched');
  assert.deepEqual(tis.stats.foreign, plain.stats.foreign);
  assert.notDeepEqual(tis.grad[0], plain.grad[0], 'own responses are corrected');
  assert.throws(
    () =>
      policyLoss([{ ...foreign, samplingLogProbs: [0, 0] }], {
        objective: { surrogate: 'seq-clip' },
        foreign: { update: 0 },
      }),
    /sequence 0: samplingLogProbs is for own responses/,
  );
});

test('refusals name what to change: token level on a sequence ratio, a missing sampler log-prob, a cap ≤ 1', () => {
  assert.throws(
    () => loss({ mode: 'tis', cap, level: 'token' }, BATCH, { objective: { surrogate: 'seq-clip' } }),
    /'seq-clip' has one ratio per sequence: correct at the sequence level/,
  );
  assert.throws(() => loss({ mode: 'mask', cap, level: 'token' }, [A, B]), /sequence 0 \(own\) needs samplingLogProbs/);
  assert.throws(() => loss({ mode: 'tis', cap: 1, level: 'token' }), /cap 1: pass a finite cap above 1/);
});

test('config: off by default (the recipe is unchanged), tis with cap 2 when asked, refused where it cannot apply', () => {
  const agents = [{ name: 'a', checkpoint: 'x' }];
  const off = parseRunConfig({ agents });
  assert.deepEqual(
    [off.optim.rolloutCorrection, off.optim.rolloutCorrectionCap, off.optim.rolloutCorrectionLevel],
    ['none', 2, 'token'],
  );
  assert.ok(!('rolloutCorrection' in resolveRun(off).recipe), 'none leaves the update recipe as it was');
  const on = resolveRun(parseRunConfig({ agents, optim: { rolloutCorrection: 'tis' } })).recipe;
  assert.deepEqual(on.rolloutCorrection, { mode: 'tis', cap: 2, level: 'token' });
  const optim = (configJsonSchema().properties as Record<string, { properties: Record<string, { enum?: unknown }> }>)
    .optim!.properties;
  assert.deepEqual(optim.rolloutCorrection!.enum, ROLLOUT_CORRECTIONS);
  assert.deepEqual(optim.rolloutCorrectionLevel!.enum, ['token', 'sequence']);
  // GSPO forms one ratio per response: token level is refused, naming the field that fixes it.
  assert.throws(
    () => parseRunConfig({ algorithm: 'gspo', agents, optim: { rolloutCorrection: 'tis' } }),
    /set optim\.rolloutCorrectionLevel: sequence\n\s*→ at optim\.rolloutCorrectionLevel/,
  );
  parseRunConfig({
    algorithm: 'gspo',
    agents,
    optim: { rolloutCorrection: 'tis', rolloutCorrectionLevel: 'sequence' },
  });
  assert.throws(
    () => parseRunConfig({ agents, optim: { rolloutCorrection: 'mask', rolloutCorrectionCap: 1 } }),
    /must be above 1[\s\S]*→ at optim\.rolloutCorrectionCap/,
  );
});

test("config: old log-probs from the learner by default; 'sampler' refused with a correction or a workflow", () => {
  const agents = [{ name: 'a', checkpoint: 'x' }];
  assert.equal(parseRunConfig({ agents }).optim.oldLogProbs, 'learner');
  assert.equal(parseRunConfig({ agents, optim: { oldLogProbs: 'sampler' } }).optim.oldLogProbs, 'sampler');
  const optim = (configJsonSchema().properties as Record<string, { properties: Record<string, { enum?: unknown }> }>)
    .optim!.properties;
  assert.deepEqual(optim.oldLogProbs!.enum, OLD_LOG_PROB_SOURCES);
  assert.throws(
    () => parseRunConfig({ agents, optim: { oldLogProbs: 'sampler', rolloutCorrection: 'tis' } }),
    /no mismatch left to correct: set optim\.rolloutCorrection: none, or optim\.oldLogProbs: learner/,
  );
  assert.throws(
    () =>
      parseRunConfig({
        algorithm: 'at-grpo',
        agents: [{ name: 'shared', checkpoint: 'x' }],
        workflow: {},
        optim: { oldLogProbs: 'sampler' },
      }),
    /does not record its sampling log-probs: set it to 'learner'\n\s*→ at optim\.oldLogProbs/,
  );
});

test("RolloutSource: 'sampler' records the sampler's log-probs as old ones and runs no forward pass for them", async () => {
  const tokenizer = new CharTokenizer({
    alphabet: ' 0123456789+-*/=()abcdefghijklmnopqrstuvwxyzQA:.?\n',
    specialTokens: ['<eos>', '<pad>'],
    names: { eos: '<eos>', pad: '<pad>' },
  });
  const agent = { name: 'a', model: testModel({ ...CONFIGS.qwen3!, vocab_size: tokenizer.vocabSize }, 1), tokenizer };
  const problems = [
    ['1+2=', '3'],
    ['4*5=', '20'],
  ].map(([prompt, answer], i) => ({
    id: `p${i}`,
    prompt: prompt!,
    answer: answer!,
    solution: '',
    task: 'arith',
    difficulty: {},
  }));
  const k = engine();
  const collect = async (oldLogProbs: 'learner' | 'sampler'): Promise<{ table: SampleRecord[]; products: number }> => {
    const source = new RolloutSource(
      [
        {
          name: 'a',
          policy: agent,
          rollout: {
            groupSize: 3,
            sampling: { temperature: 1, maxNewTokens: 6 },
            prompt: { template: '{question}' },
            rewards: [{ name: 'math', fn: mathReward(), weight: 1 }],
            generationBatch: 8,
          },
          rng: new Rng(5),
          validation: { maxNewTokens: 6, template: '{question}', system: undefined, temperature: 1, topP: 1, topK: 0 },
        },
      ],
      {
        train: { next: () => problems },
        promptsPerStep: 2,
        validation: [],
        samplesLogged: 0,
        oldLogProbs,
      },
    );
    const table: SampleRecord[] = [];
    const products = await countProducts(() => source.collect({ k, step: 0 }, table));
    return { table, products };
  };
  /** The products `run` makes (calls of the backend's gemm). */
  const countProducts = async (run: () => unknown): Promise<number> => {
    const backend = k.backend as unknown as { gemm: (...args: unknown[]) => unknown };
    const gemm = backend.gemm;
    let products = 0;
    backend.gemm = (...args) => (products++, gemm.apply(backend, args));
    try {
      await run();
      return products;
    } finally {
      backend.gemm = gemm;
    }
  };
  try {
    const learner = await collect('learner');
    const sampler = await collect('sampler');
    assert.equal(sampler.table.length, 6);
    for (const [i, r] of sampler.table.entries()) {
      const l = learner.table[i]!;
      assert.equal(r.text, l.text, 'the same draws');
      assert.deepEqual(r.generatorLogProbs, r.samplingLogProbs);
      // The learner's forward pass gives the same log-probs up to rounding.
      near(r.generatorLogProbs, l.generatorLogProbs, 1e-4, `record ${i}`);
    }
    // Sampling the same tokens costs the same products; the learner's scoring pass is exactly what 'sampler' leaves out.
    const items = learner.table.map((r) => r.tokens);
    const scoring = await countProducts(() => scoreResponses(agent.model, k, items));
    assert.ok(scoring > 0);
    assert.equal(learner.products - sampler.products, scoring);
  } finally {
    await closeDefaultPool();
  }
});
