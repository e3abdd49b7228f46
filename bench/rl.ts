/**
 * `npm run bench:rl [-- --json]`: where the time of one RL step goes — generate / score / train — and tokens/s, for a
 * ~1.8M-parameter Qwen3-style agent (the size `hacrl sft` builds) with B=16 prompts × G=8 responses of up to 64 tokens,
 * GRPO with 4 mini-batches. With --json the last line is one JSON object.
 */
import { engine } from '../src/backend/engine.js';
import { AdamW } from '../src/optim/adamw.js';
import { mathReward } from '../src/rewards/reward.js';
import { closeDefaultPool } from '../src/rewards/worker-pool.js';
import { DEFAULT_PLAIN_FORMAT } from '../src/tasks/prompt.js';
import { makeTaskDataset, presetSpec } from '../src/tasks/splits.js';
import { AgentSpecSchema, buildModel, buildTokenizer } from '../src/zoo/agent-spec.js';
import { rlStep } from '../src/train/rl-step.js';
import { Rng } from '../src/util/rng.js';

const json = process.argv.includes('--json');
const k = engine();
const problems = makeTaskDataset(presetSpec('easy', 'train', 256, 0)).problems;
const spec = AgentSpecSchema.parse({});
const tokenizer = buildTokenizer(spec, [DEFAULT_PLAIN_FORMAT, ...problems.flatMap((p) => [p.prompt, p.solution])]);
const model = buildModel(spec, tokenizer);
const agent = { name: 'bench', model, tokenizer };
const optimizer = new AdamW(model.params, { lr: 1e-5 });
const rngs = { sampling: new Rng(1), order: new Rng(2) };
const B = 16;
const options = {
  groupSize: 8,
  sampling: { temperature: 1, maxNewTokens: 64 },
  prompt: { template: '{question}' },
  miniBatches: 4,
  epochs: 1,
  loss: { objective: { kind: 'grpo' as const } },
  advantageNormalization: 'group-std' as const,
  filterZeroVariance: false,
  clip: 1,
  lr: 1e-5,
  rewards: [{ name: 'math', fn: mathReward(), weight: 1 }],
  generationBatch: 64,
};
const rows: Record<string, number>[] = [];
for (let step = 0; step < 4; step++) {
  const r = await rlStep(agent, null, optimizer, k, problems.slice(step * B, (step + 1) * B), options, rngs);
  if (step > 0) rows.push(r.metrics); // step 0 warms up caches and the worker pool
}
await closeDefaultPool();
const avg = (key: string): number => rows.reduce((a, r) => a + r[key]!, 0) / rows.length;
const result = {
  blas: k.blas,
  openblas_coretype: process.env.OPENBLAS_CORETYPE ?? null,
  parameters: model.numParameters,
  prompts: B,
  group_size: options.groupSize,
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
