/**
 * `npm run bench:rl [-- --json] [-- --steps N] [-- --no-torch]`: where the time of an RL step goes — generate / score /
 * train — with tokens/s, matmul GFLOP/s and the fraction of the machine's measured FMA peak per part, and the peak
 * resident memory after each step, for
 *  - one agent: the ~1.8M-parameter Qwen3-style char agent `hacrl sft` builds, B=16 prompts × G=8 responses of up to
 *    64 tokens, GRPO with 4 mini-batches (the step `rlStep` runs);
 *  - a HACPO pair: that agent with a Llama-style agent of another size on a byte-level BPE tokenizer (the step
 *    `hacpoStep` runs: both sample, both learn from all 2·G responses per prompt);
 *  - PyTorch on the single agent's weights (bench/torch_rl_bench.py): the same sampling and the same GRPO update,
 *    timed the same way, as the side-by-side peer.
 * Steps after the first are averaged (the first warms caches and the reward worker pool). With --json the last line
 * is one JSON object.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { engine } from '../src/backend/engine.js';
import { nativeBackend } from '../src/backend/select.js';
import type { Transformer } from '../src/model/transformer.js';
import { saveModel } from '../src/model/weights.js';
import { CapabilityTracker } from '../src/algorithms/hacpo/index.js';
import { AdamW } from '../src/optim/adamw.js';
import { mathReward } from '../src/rewards/reward.js';
import { closeDefaultPool } from '../src/rewards/worker-pool.js';
import type { Rollout } from '../src/rollout/rollout.js';
import { DEFAULT_PLAIN_FORMAT, renderPrompt } from '../src/tasks/prompt.js';
import { makeTaskDataset, presetSpec } from '../src/tasks/splits.js';
import { AgentSpecSchema, buildModel, buildTokenizer } from '../src/train/agent-spec.js';
import { hacpoStep, type Collaborator, type HacpoStepOptions } from '../src/train/hacpo-step.js';
import { rlStep, type RlStepOptions } from '../src/train/rl-step.js';
import { Rng } from '../src/util/rng.js';

const argv = process.argv.slice(2);
const json = argv.includes('--json');
const withTorch = !argv.includes('--no-torch');
/** Timed steps per setting after the warm-up step; default 3. */
const STEPS = Number(argv.find((a) => a.startsWith('--steps='))?.split('=')[1] ?? 3);
const log = (s: string): void => {
  if (!json) console.log(s);
};
const PYTHON = '/usr/bin/python3';
const TORCH_SCRIPT = fileURLToPath(new URL('../../bench/torch_rl_bench.py', import.meta.url));

const k = engine();
const B = 16;
const G = 8;
const MAX_NEW = 64;
const MINI_BATCHES = 4;
const LR = 1e-5;
const problems = makeTaskDataset(presetSpec('easy', 'train', B * (STEPS + 1), 0)).problems;
const corpus = [DEFAULT_PLAIN_FORMAT, ...problems.flatMap((p) => [p.prompt, p.solution])];
const rewards = [{ name: 'math', fn: mathReward(), weight: 1 }];
const rollout = {
  groupSize: G,
  sampling: { temperature: 1, maxNewTokens: MAX_NEW },
  prompt: { template: '{question}' },
  rewards,
  generationBatch: 64,
};

/** An agent from a spec (see AgentSpecSchema), its tokenizer fitted to the task's text. */
function makeAgent(name: string, spec: Record<string, unknown>) {
  const s = AgentSpecSchema.parse(spec);
  const tokenizer = buildTokenizer(s, corpus);
  return { name, model: buildModel(s, tokenizer), tokenizer };
}

/** Parameters that take part in a matrix multiply per token: every 2-D weight, the embedding only as a tied head. */
function matmulParams(model: Transformer): number {
  let n = 0;
  for (const [name, t] of model.params)
    if (t.shape.length === 2 && (model.cfg.tiedEmbeddings || !name.endsWith('embed_tokens.weight'))) n += t.size;
  return n;
}

/**
 * Matmul FLOPs of one agent's part of a step (attention's own products left out, under 5% at these lengths):
 * generating is one forward pass over every prompt and generated token (2·N each); training scores the rollouts once
 * (old log-probs, 2·N per token) and runs forward + backward over them once per epoch (6·N), on its own and, in
 * HACPO, on the other agents' responses re-tokenized (counted with its own responses' lengths, which they are close to).
 */
function flops(model: Transformer, own: readonly Rollout[], trainedSequences: number, epochs: number) {
  const n = matmulParams(model);
  const tokens = own.reduce((a, r) => a + r.promptIds.length + r.responseIds.length, 0);
  const perSequence = tokens / Math.max(1, own.length);
  return { generate: 2 * n * tokens, train: (2 * own.length + 6 * epochs * trainedSequences) * n * perSequence };
}

const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
const round = (x: number, d = 3): number => Number(x.toFixed(d));
const rssMb = (): number => round(process.memoryUsage().rss / 2 ** 20, 1);
const peakRssMb = (): number => round(process.resourceUsage().maxRSS / 1024, 1);

/** One setting's averages over its timed steps. */
interface PartSplit {
  agents: { name: string; parameters: number; matmul_parameters: number }[];
  time_generate_s: number;
  time_score_s: number;
  time_train_s: number;
  time_step_s: number;
  generated_tokens: number;
  tokens_per_s: number;
  generate_tokens_per_s: number;
  generate_gflops: number;
  train_gflops: number;
  generate_peak_frac: number;
  train_peak_frac: number;
  /** Resident memory after each step and the process's peak so far, MiB. */
  rss_mb: number[];
  peak_rss_mb: number[];
}

interface StepSample {
  generate: number;
  score: number;
  train: number;
  step: number;
  tokens: number;
  genFlops: number;
  trainFlops: number;
}

function summarize(
  agents: { name: string; model: Transformer }[],
  samples: StepSample[],
  rss: number[],
  peakRss: number[],
  peak: number,
): PartSplit {
  const avg = (f: (s: StepSample) => number): number => mean(samples.map(f));
  const gen = avg((s) => s.generate);
  const train = avg((s) => s.train);
  return {
    agents: agents.map((a) => ({
      name: a.name,
      parameters: a.model.numParameters,
      matmul_parameters: matmulParams(a.model),
    })),
    time_generate_s: round(gen),
    time_score_s: round(avg((s) => s.score)),
    time_train_s: round(train),
    time_step_s: round(avg((s) => s.step)),
    generated_tokens: round(
      avg((s) => s.tokens),
      1,
    ),
    tokens_per_s: round(avg((s) => s.tokens) / avg((s) => s.step), 1),
    generate_tokens_per_s: round(avg((s) => s.tokens) / gen, 1),
    generate_gflops: round(avg((s) => s.genFlops) / gen / 1e9, 2),
    train_gflops: round(avg((s) => s.trainFlops) / train / 1e9, 2),
    generate_peak_frac: round(avg((s) => s.genFlops) / gen / 1e9 / peak),
    train_peak_frac: round(avg((s) => s.trainFlops) / train / 1e9 / peak),
    rss_mb: rss,
    peak_rss_mb: peakRss,
  };
}

const grpo: RlStepOptions = {
  ...rollout,
  miniBatches: MINI_BATCHES,
  epochs: 1,
  loss: { objective: { kind: 'grpo' as const } },
  advantageNormalization: 'group-std' as const,
  filterZeroVariance: false,
  clip: 1,
  lr: LR,
};

/** The single-agent GRPO step; returns the split and the agent (its weights as they were before any step saved). */
async function singleAgent(peak: number, weightsDir: string): Promise<PartSplit> {
  const agent = makeAgent('qwen3-char', {});
  await saveModel(weightsDir, agent.model);
  const optimizer = new AdamW(agent.model.params, { lr: LR });
  const rngs = { sampling: new Rng(1), order: new Rng(2) };
  const samples: StepSample[] = [];
  const rss: number[] = [];
  const peakRss: number[] = [];
  for (let step = 0; step <= STEPS; step++) {
    const t0 = performance.now();
    const r = await rlStep(agent, null, optimizer, k, problems.slice(step * B, (step + 1) * B), grpo, rngs);
    const seconds = (performance.now() - t0) / 1e3;
    rss.push(rssMb());
    peakRss.push(peakRssMb());
    if (step === 0) continue;
    const f = flops(agent.model, r.rollouts, r.rollouts.length, 1);
    samples.push({
      generate: r.metrics.time_generate_s!,
      score: r.metrics.time_score_s!,
      train: r.metrics.time_train_s!,
      step: seconds,
      tokens: r.metrics.tokens!,
      genFlops: f.generate,
      trainFlops: f.train,
    });
  }
  return summarize([agent], samples, rss, peakRss, peak);
}

const hacpoOptions: HacpoStepOptions = {
  mechanisms: { capabilityBaseline: true, discrepancyCoefficient: true, foreign: 'hacpo' },
  miniBatches: MINI_BATCHES,
  epochs: 1,
  ownClip: { low: 3e-4, high: 4e-4 },
  aggregation: 'seq-mean-token-mean',
  maskTruncated: false,
  filterZeroVariance: false,
  clip: 1,
};

/** The two-agent HACPO step: the Qwen3 char agent and a smaller Llama-style agent on a BPE tokenizer. */
async function hacpoPair(peak: number): Promise<PartSplit> {
  const agents = [
    makeAgent('qwen3-char', {}),
    makeAgent('llama-bpe', { arch: 'llama', tokenizer: 'bpe', hidden: 128, layers: 3, heads: 4, seed: 1 }),
  ];
  const team: Collaborator[] = agents.map((agent, i) => ({
    agent,
    optimizer: new AdamW(agent.model.params, { lr: LR }),
    reference: null,
    tracker: new CapabilityTracker(5),
    rollout,
    samplingRng: new Rng(10 + i),
    lr: LR,
    alpha: 1,
    stepwise: { delta: 0.2, deltaStep: 0.025 },
    order: 'shuffled',
  }));
  const orderRng = new Rng(3);
  const samples: StepSample[] = [];
  const rss: number[] = [];
  const peakRss: number[] = [];
  for (let step = 0; step <= STEPS; step++) {
    const t0 = performance.now();
    const results = await hacpoStep(team, k, problems.slice(step * B, (step + 1) * B), hacpoOptions, orderRng);
    const seconds = (performance.now() - t0) / 1e3;
    rss.push(rssMb());
    peakRss.push(peakRssMb());
    if (step === 0) continue;
    const all = results.reduce((n, r) => n + r.rollouts.length, 0);
    const f = results.map((r, i) => flops(agents[i]!.model, r.rollouts, all, 1));
    const sumOf = (g: (m: Record<string, number>) => number): number => results.reduce((a, r) => a + g(r.metrics), 0);
    samples.push({
      generate: sumOf((m) => m.time_generate_s!),
      score: sumOf((m) => m.time_score_s!),
      // Everything of the step that is neither sampling nor scoring rewards: old log-probs, re-tokenizing, updates.
      train: seconds - sumOf((m) => m.time_generate_s! + m.time_score_s!),
      step: seconds,
      tokens: sumOf((m) => m.tokens!),
      genFlops: f.reduce((a, x) => a + x.generate, 0),
      trainFlops: f.reduce((a, x) => a + x.train, 0),
    });
  }
  return summarize(agents, samples, rss, peakRss, peak);
}

/** What bench/torch_rl_bench.py prints. */
interface TorchRl {
  torch: string;
  blas: string;
  openblas_coretype: string | null;
  time_generate_s: number;
  time_score_s: number;
  time_train_s: number;
  generated_tokens: number;
  generate_tokens_per_s: number;
  peak_rss_mb: number;
}

/**
 * PyTorch's version of the single-agent step on the same initial weights, prompts, G, length limit and mini-batches,
 * with the OpenBLAS kernel OpenBLAS picks for this CPU (TORCH_OPENBLAS_CORETYPE=NAME forces one).
 */
async function torchPeer(weightsDir: string, threads: number): Promise<TorchRl> {
  const agent = makeAgent('qwen3-char', {});
  const prompts = problems.map((p) => agent.tokenizer.encode(renderPrompt(agent.tokenizer, p.prompt, rollout.prompt)));
  const input = join(weightsDir, 'rl-input.json');
  await writeFile(
    input,
    JSON.stringify({
      checkpoint: weightsDir,
      threads,
      prompts,
      batch: B,
      group_size: G,
      max_new_tokens: MAX_NEW,
      eos_id: agent.tokenizer.eosId,
      pad_id: agent.tokenizer.padId ?? agent.tokenizer.eosId,
      mini_batches: MINI_BATCHES,
      lr: LR,
      clip: 0.2,
      seed: 1,
    }),
  );
  // OpenBLAS detects the CPU and picks its own kernels when OPENBLAS_CORETYPE is unset (on AVX-512 machines its
  // fastest, as bench:model's probe finds); TORCH_OPENBLAS_CORETYPE names another.
  const env: NodeJS.ProcessEnv = { ...process.env, OMP_WAIT_POLICY: 'PASSIVE' };
  delete env.OPENBLAS_CORETYPE;
  if (process.env.TORCH_OPENBLAS_CORETYPE) env.OPENBLAS_CORETYPE = process.env.TORCH_OPENBLAS_CORETYPE;
  const r = spawnSync(PYTHON, [TORCH_SCRIPT, input], { encoding: 'utf8', maxBuffer: 1 << 26, env });
  if (r.status !== 0) throw new Error(`${TORCH_SCRIPT} failed: ${r.error?.message ?? r.stderr}`);
  const lines = r.stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]!) as TorchRl;
}

function print(title: string, s: PartSplit, peak: number): void {
  log(`\n${title}`);
  for (const a of s.agents)
    log(`  ${a.name}: ${a.parameters.toLocaleString('en-US')} parameters (${a.matmul_parameters} in matmuls)`);
  const parts: [string, number, string][] = [
    [
      'generate',
      s.time_generate_s,
      `${s.generate_gflops} GFLOP/s, ${(100 * s.generate_peak_frac).toFixed(1)}% of peak`,
    ],
    ['score', s.time_score_s, 'rewards'],
    ['train', s.time_train_s, `${s.train_gflops} GFLOP/s, ${(100 * s.train_peak_frac).toFixed(1)}% of peak`],
  ];
  for (const [name, t, note] of parts)
    log(`  ${name.padEnd(9)} ${t.toFixed(2)} s (${((100 * t) / s.time_step_s).toFixed(0).padStart(2)}%)   ${note}`);
  log(
    `  step ${s.time_step_s.toFixed(2)} s; ${s.generated_tokens} generated tokens per step, ${s.tokens_per_s} tokens/s ` +
      `overall, ${s.generate_tokens_per_s} while generating; peak FMA ${peak} GFLOP/s`,
  );
  log(`  resident memory after each step ${s.rss_mb.join(', ')} MiB; process peak ${s.peak_rss_mb.join(', ')} MiB`);
}

async function main(): Promise<void> {
  const native = nativeBackend();
  const threads = native?.maxThreads() ?? 1;
  const peak = round(native ? native.fmaPeak(threads, 500) : NaN, 1);
  log(
    `hacrl RL step benchmark — B=${B}, G=${G}, ≤ ${MAX_NEW} new tokens, ${MINI_BATCHES} mini-batches, ${threads} threads`,
  );
  log(`BLAS in use: ${k.blas} (OPENBLAS_CORETYPE=${process.env.OPENBLAS_CORETYPE ?? 'unset'})`);
  const dir = await mkdtemp(join(tmpdir(), 'hacrl-bench-rl-'));
  try {
    const single = await singleAgent(peak, dir);
    print('single agent, GRPO (rlStep)', single, peak);
    const pair = await hacpoPair(peak);
    print('HACPO pair (hacpoStep): both agents sample, both learn from all responses', pair, peak);
    await closeDefaultPool();
    let torch: TorchRl | null = null;
    if (withTorch) {
      torch = await torchPeer(dir, threads);
      log(`\nPyTorch peer (${torch.torch}, ${torch.blas}) on the single agent's initial weights, same step shape:`);
      log(
        `  generate ${torch.time_generate_s.toFixed(2)} s (${torch.generate_tokens_per_s} tokens/s)  ` +
          `score ${torch.time_score_s.toFixed(2)} s  train ${torch.time_train_s.toFixed(2)} s; peak RSS ${torch.peak_rss_mb} MiB`,
      );
      const tStep = torch.time_generate_s + torch.time_train_s;
      const hStep = single.time_generate_s + single.time_train_s;
      log(
        `  hacrl/torch (generate + train, per generated token): ` +
          `${round(tStep / torch.generated_tokens / (hStep / single.generated_tokens), 2)}×`,
      );
    }
    if (json)
      console.log(
        JSON.stringify({
          blas: k.blas,
          openblas_coretype: process.env.OPENBLAS_CORETYPE ?? null,
          threads,
          peak_gflops: peak,
          prompts: B,
          group_size: G,
          steps_averaged: STEPS,
          single,
          hacpo_pair: pair,
          torch,
          // The fields earlier versions printed, for scripts that read them.
          parameters: single.agents[0]!.parameters,
          time_generate_s: single.time_generate_s,
          time_score_s: single.time_score_s,
          time_train_s: single.time_train_s,
          generated_tokens: single.generated_tokens,
          tokens_per_s: single.tokens_per_s,
        }),
      );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
