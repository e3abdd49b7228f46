/**
 * `npm run bench:rl [-- --json]`: where the time of one RL step goes — generate / score / train — and tokens/s, for a
 * ~1.8M-parameter Qwen3-style agent (the size `hacrl sft` builds) with B=16 prompts × G=8 responses of up to 64 tokens,
 * GRPO with 4 mini-batches. With --json the last line is one JSON object.
 */
import { performance } from 'node:perf_hooks';
import { engine } from '../src/backend/engine.js';
import { AdamW } from '../src/optim/adamw.js';
import { mathReward } from '../src/rewards/reward.js';
import { closeDefaultPool } from '../src/rewards/worker-pool.js';
import { DEFAULT_PLAIN_FORMAT } from '../src/tasks/prompt.js';
import { makeTaskDataset, presetSpec } from '../src/tasks/splits.js';
import { AgentSpecSchema, buildModel, buildTokenizer } from '../src/train/agent-spec.js';
import { learnerStep, type UpdateRecipe } from '../src/train/learner-step.js';
import { RolloutSource } from '../src/train/sample-sources.js';
import type { SampleRecord } from '../src/train/sample-table.js';
import { Rng } from '../src/util/rng.js';

const json = process.argv.includes('--json');
const k = engine();
const problems = makeTaskDataset(presetSpec('easy', 'train', 256, 0)).problems;
const spec = AgentSpecSchema.parse({});
const tokenizer = buildTokenizer(spec, [DEFAULT_PLAIN_FORMAT, ...problems.flatMap((p) => [p.prompt, p.solution])]);
const model = buildModel(spec, tokenizer);
const agent = { name: 'bench', model, tokenizer };
const optimizer = new AdamW(model.params, { lr: 1e-5 });
const order = new Rng(2);
const B = 16;
const rollout = {
  groupSize: 8,
  sampling: { temperature: 1, maxNewTokens: 64 },
  prompt: { template: '{question}' },
  rewards: [{ name: 'math', fn: mathReward(), weight: 1 }],
  generationBatch: 64,
};
const source = new RolloutSource([{ name: 'bench', policy: agent, rollout, rng: new Rng(1) }]);
const recipe: UpdateRecipe = {
  surrogate: 'token',
  sharing: 'none',
  clip: { low: 0.2, high: 0.28 },
  dualClip: null,
  aggregation: 'token-mean',
  advantage: 'group-std',
  kl: null,
  entropyCoef: 0,
  maskTruncated: false,
  filterZeroVariance: false,
  miniBatches: 4,
  epochs: 1,
  gradClip: 1,
  capabilityBaseline: false,
  discrepancyCoefficient: false,
  foreign: 'gspo',
};
const learner = {
  policy: agent,
  optimizer,
  reference: null,
  lr: 1e-5,
  alpha: 0,
  stepwise: { delta: 0.2, deltaStep: 0 },
};
const rows: Record<string, number>[] = [];
for (let step = 0; step < 4; step++) {
  const table: SampleRecord[] = [];
  const t0 = performance.now();
  const sampled = await source.collect({ problems: problems.slice(step * B, (step + 1) * B), k, step }, table);
  const t1 = performance.now();
  learnerStep(table, [{ ...learner, order: 'shuffled' }], 0, recipe, [NaN], k, order);
  const t2 = performance.now();
  const m = sampled.get('bench')!;
  const metrics = { ...m, time_train_s: (t2 - t1) / 1e3, tokens_per_s: m.tokens! / ((t2 - t0) / 1e3) };
  if (step > 0) rows.push(metrics); // step 0 warms up caches and the worker pool
}
await closeDefaultPool();
const avg = (key: string): number => rows.reduce((a, r) => a + r[key]!, 0) / rows.length;
const result = {
  blas: k.blas,
  openblas_coretype: process.env.OPENBLAS_CORETYPE ?? null,
  parameters: model.numParameters,
  prompts: B,
  group_size: rollout.groupSize,
  time_generate_s: avg('time_generate_s'),
  time_score_s: avg('time_score_s'),
  time_train_s: avg('time_train_s'),
  generated_tokens: avg('tokens'),
  tokens_per_s: avg('tokens_per_s'),
};
if (json) console.log(JSON.stringify(result));
else {
  console.log(`hacrl RL step benchmark — ${(result.parameters / 1e6).toFixed(2)}M-parameter agent, B=${B}, G=8, GRPO`);
  console.log(`BLAS in use: ${result.blas} (OPENBLAS_CORETYPE=${result.openblas_coretype ?? 'unset'})`);
  const total = result.time_generate_s + result.time_score_s + result.time_train_s;
  for (const part of ['generate', 'score', 'train'] as const) {
    const t = result[`time_${part}_s`];
    console.log(`  ${part.padEnd(9)} ${t.toFixed(2)} s (${((100 * t) / total).toFixed(0)}%)`);
  }
  console.log(
    `  ${result.generated_tokens.toFixed(0)} generated tokens per step, ${result.tokens_per_s.toFixed(0)} tokens/s overall`,
  );
}
