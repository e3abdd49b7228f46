/**
 * `npm run bench:rl [-- --json] [-- --steps=N] [-- --no-torch] [-- --single]`: where the time of an RL step goes — generate / score /
 * train — with tokens/s, matmul GFLOP/s and the fraction of the machine's measured FMA peak per part, and the resident
 * memory after each step, for
 *  - one agent: the ~1.8M-parameter Qwen3-style char agent `hacrl sft` builds, B=16 prompts × G=8 responses of up to
 *    64 tokens, GRPO's recipe with 4 mini-batches: a team of one learner that does not share;
 *  - a HACPO pair: that agent with a Llama-style agent of another size on a byte-level BPE tokenizer, HACPO's recipe
 *    (both sample, both learn from all 2·G responses per prompt);
 *  - PyTorch on the single agent's weights (bench/torch_rl_bench.py): the same sampling and a GRPO update of the same
 *    shape, timed the same way, as the side-by-side peer.
 * Both hacrl settings run the trainer's own pipeline (docs/learner-pipeline.md): `RolloutSource` fills the step's
 * table, each learner's `learnerStep` updates it. Steps after the first are averaged (the first warms caches and the
 * reward worker pool). --single times only the one agent (no pair, no PyTorch). With --json the last line is one JSON
 * object.
 *
 * `--shape NAME` (smollm2-135m, qwen2.5-0.5b, qwen3-0.6b, llama-3.2-1b; src/model/shapes.ts) times one GRPO agent of
 * that public checkpoint's shape with random weights made here — B=8 prompts × G=4 responses of 256 new tokens
 * (--new-tokens=N changes the length), 1 timed step after the warm-up unless --steps=N (0: the warm-up step
 * itself) — with no pair and no PyTorch peer: the split, tokens/s and peak memory of the step the issue's targets name. --prompts=B and --group=G change
 * the step's prompts and responses per prompt, --checkpointing trains with activation checkpointing,
 * --old-log-probs=sampler takes the old log-probs from the sampler instead of a forward pass, --lora=R trains
 * LoRA adapters of rank R (alpha 2R) on every linear projection of the frozen random base, --precision=bf16 computes
 * the agent's products in bf16 (its frozen LoRA base held as bfloat16 bits). `--pair=NAME2` (under --shape) times a
 * HACPO pair instead of the one agent: the --shape agent on the character tokenizer and an agent of shape NAME2 on a
 * byte-level BPE tokenizer (two tokenizers: each learns from the other's responses re-tokenized), HACPO's recipe, the
 * same LoRA, precision and checkpointing for both — the pair of the memory target, with its plan beside its measured
 * peak.
 *
 * After the single agent's steps it prints the memory plan's estimate of that setting (src/model/memory-plan.ts)
 * beside the process's measured peak (VmHWM) and their ratio.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { CapabilityTracker } from '../src/algorithms/hacpo/index.js';
import { ALGORITHM_RECIPES, type Recipe } from '../src/algorithms/recipes.js';
import { OLD_LOG_PROB_SOURCES, type OldLogProbSource } from '../src/algorithms/rollout-correction.js';
import { engine } from '../src/backend/engine.js';
import { nativeBackend } from '../src/backend/select.js';
import { shapeConfig } from '../src/model/shapes.js';
import { initModel, saveModel } from '../src/model/weights.js';
import { AdamW } from '../src/optim/adamw.js';
import { mathReward } from '../src/rewards/reward.js';
import { closeDefaultPool } from '../src/rewards/worker-pool.js';
import type { Agent } from '../src/rollout/rollout.js';
import type { Tokenizer } from '../src/tokenizer/tokenizer.js';
import { DEFAULT_PLAIN_FORMAT, renderPrompt } from '../src/tasks/prompt.js';
import { makeTaskDataset, presetSpec } from '../src/tasks/splits.js';
import { AgentSpecSchema, buildModel, buildTokenizer } from '../src/model/agent-spec.js';
import type { LocalLearner } from '../src/train/learners.js';
import type { UpdateRecipe } from '../src/train/learner-step.js';
import { RolloutSource } from '../src/train/sample-sources.js';
import { learnerView, type SampleRecord } from '../src/train/sample-table.js';
import { teamStep } from '../src/train/team-step.js';
import { memoryMetrics, peakResidentBytes } from '../src/util/memory.js';
import { adapterMemory, planMemory } from '../src/model/memory-plan.js';
import { ALL_LINEAR, LoraAdapters, type LoraSettings } from '../src/model/lora.js';
import { Transformer } from '../src/model/transformer.js';
import { PRECISIONS, type Precision } from '../src/tensor/bf16.js';
import { Tensor } from '../src/tensor/tensor.js';
import { adapt } from '../src/model/peft.js';
import { Rng } from '../src/util/rng.js';
import { mean } from '../src/util/stats.js';
import { matmulParams } from './flops.js';
import { machinePeak, peakLine } from './peak.js';
import { openmpWaitPolicy } from '../src/backend/native.js';
import { count, option } from './cli-args.js';
import { TORCH_PYTHON } from './torch-python.js';

const argv = process.argv.slice(2);
const json = argv.includes('--json');
/** A public checkpoint's shape (src/model/shapes.ts) for the one agent, checked before any work. */
const SHAPE = option('shape');
if (SHAPE !== undefined) shapeConfig(SHAPE);
/** --pair=NAME2: under --shape, a HACPO pair of the --shape agent and a NAME2 agent instead of the one agent. */
const PAIR_SHAPE = option('pair');
if (PAIR_SHAPE !== undefined) {
  if (SHAPE === undefined) throw new Error('--pair=NAME2 needs --shape=NAME (the pair is NAME and NAME2)');
  shapeConfig(PAIR_SHAPE);
}
const singleOnly = argv.includes('--single') || SHAPE !== undefined;
const withTorch = !argv.includes('--no-torch') && !singleOnly;
/**
 * Timed steps per setting after the warm-up step; default 3 (1 under --shape). 0 reports the warm-up step itself
 * (its time includes first-call costs; its peak memory is the step's): half the wall time at the largest shapes.
 */
const STEPS = count('steps', SHAPE === undefined ? 3 : 1, 0);
const log = (s: string): void => {
  if (!json) console.log(s);
};
const TORCH_SCRIPT = fileURLToPath(new URL('../../bench/torch_rl_bench.py', import.meta.url));

const k = engine();
const B = count('prompts', SHAPE === undefined ? 16 : 8);
const G = count('group', SHAPE === undefined ? 8 : 4);
/** Train with activation checkpointing (optim.activationCheckpointing). */
const CHECKPOINTING = argv.includes('--checkpointing');
/** --old-log-probs=sampler: take the old log-probs from the sampler, skipping their forward pass (optim.oldLogProbs). */
const OLD_LOG_PROBS = (option('old-log-probs') ?? 'learner') as OldLogProbSource;
if (!(OLD_LOG_PROB_SOURCES as readonly string[]).includes(OLD_LOG_PROBS))
  throw new Error(`--old-log-probs=${OLD_LOG_PROBS}: use one of ${OLD_LOG_PROB_SOURCES.join(', ')}`);
/** --lora=R: under --shape, train LoRA adapters of rank R (alpha 2R) on every linear projection instead of every weight. */
const LORA: LoraSettings | null =
  option('lora') === undefined
    ? null
    : { rank: count('lora', 16), alpha: 2 * count('lora', 16), dropout: 0, targets: [ALL_LINEAR] };
const MAX_NEW = count('new-tokens', SHAPE === undefined ? 64 : 256);
/** --precision=bf16: under --shape, the agent's products in bf16 (a LoRA agent's frozen base held as bfloat16). */
const PRECISION = (option('precision') ?? 'fp32') as Precision;
if (!(PRECISIONS as readonly string[]).includes(PRECISION))
  throw new Error(`--precision=${PRECISION}: use one of ${PRECISIONS.join(', ')}`);
/** What the fractions are of: the fp32 FMA peak, which bf16 products (two multiply-adds per fp32 lane) can pass. */
const PEAK_NAME = PRECISION === 'bf16' ? 'the fp32 FMA peak' : 'peak';
const MINI_BATCHES = 4;
const EPOCHS = 1;
const LR = 1e-5;
const problems = makeTaskDataset(presetSpec('easy', 'train', B * (STEPS + 1), 0)).problems;
const corpus = [DEFAULT_PLAIN_FORMAT, ...problems.flatMap((p) => [p.prompt, p.solution])];
const rollout = {
  groupSize: G,
  sampling: { temperature: 1, maxNewTokens: MAX_NEW },
  prompt: { template: '{question}' },
  rewards: [{ name: 'math', fn: mathReward(), weight: 1 }],
  generationBatch: 64,
};
/** How the agents would be validated (this benchmark does not validate). */
const validation = {
  maxNewTokens: MAX_NEW,
  template: '{question}',
  system: undefined,
  temperature: 1,
  topP: 1,
  topK: 0,
};

/** An agent from a spec (see AgentSpecSchema), its tokenizer fitted to the task's text. */
function makeAgent(name: string, spec: Record<string, unknown>): Agent {
  const s = AgentSpecSchema.parse(spec);
  const tokenizer = buildTokenizer(s, corpus);
  return { name, model: buildModel(s, tokenizer), tokenizer };
}

/**
 * An agent of `shape` with random weights and a tokenizer fitted to the task's text (`kind`: character or
 * byte-level BPE), widened to the shape's vocabulary: random weights sample any id, and an id past the tokenizer's
 * reads as one of its own (the text only feeds the reward).
 */
function shapeAgent(shape: string, name = shape, kind: 'char' | 'bpe' = 'char'): Agent {
  const base = buildTokenizer(AgentSpecSchema.parse({ tokenizer: kind }), corpus);
  // As loadModel holds a frozen base at bf16: its matrices as bfloat16 bits (drawn straight into them, so no fp32 copy
  // of the base inflates the measured peak); trainable weights stay fp32 masters.
  const frozenBits = PRECISION === 'bf16' && LORA !== null;
  const init = initModel(shapeConfig(shape), 1, undefined, frozenBits);
  const plain = frozenBits ? init : new Transformer(init.cfg, init.params as Map<string, Tensor>, null, PRECISION);
  const model = LORA ? adapt(plain, LoraAdapters.init(plain.cfg, LORA, 'random weights', 1)) : plain;
  const specials = 2; // EOS and PAD come first in either vocabulary
  const fold = (id: number): number =>
    id < base.vocabSize ? id : specials + ((id - specials) % (base.vocabSize - specials));
  const tokenizer: Tokenizer = Object.create(base, {
    vocabSize: { value: model.cfg.vocabSize },
    decode: {
      value: (ids: readonly number[], o?: Parameters<Tokenizer['decode']>[1]) => base.decode(ids.map(fold), o),
    },
  });
  return { name, model, tokenizer };
}

/** An algorithm's published recipe as one step's update settings, with this benchmark's mini-batches. */
function benchRecipe(r: Recipe): UpdateRecipe {
  return {
    surrogate: r.surrogate,
    sharing: r.sharing,
    clip: r.clip,
    dualClip: null,
    aggregation: r.aggregation,
    advantage: r.advantage,
    kl: null,
    entropyCoef: 0,
    maskTruncated: false,
    filterZeroVariance: false,
    miniBatches: MINI_BATCHES,
    epochs: EPOCHS,
    gradClip: 1,
    capabilityBaseline: r.hacpo?.capabilityBaseline ?? false,
    discrepancyCoefficient: r.hacpo?.discrepancyCoefficient ?? false,
    // HACPO's stepwise foreign band (Eqs. 12–14); unused without sharing.
    foreign: 'hacpo-foreign',
    ...(CHECKPOINTING ? { activationCheckpointing: true } : {}),
  };
}

const tokenCount = (t: { prompt: number[]; response: number[] }): number => t.prompt.length + t.response.length;

/**
 * Matmul FLOPs of one step (attention's own products left out, under 5% at these lengths): generating is one forward
 * pass over every prompt and generated token (2·N of the generator each); training scores each generator's responses
 * once (old log-probs, 2·N per token; none with --old-log-probs=sampler) and runs forward and backward over every
 * record of each learner's view once per epoch — own responses and, when sharing, the re-tokenized foreign ones — in
 * the learner's own tokenization: per token 2·N forward, 2·N input gradients, 2·N weight gradients (not for a frozen
 * LoRA base: its adapters' are negligible) and, under checkpointing, 2·N for the recomputed forward.
 */
function stepFlops(agents: readonly Agent[], table: readonly SampleRecord[], shared: boolean) {
  const n = new Map(agents.map((a) => [a.name, matmulParams(a.model)]));
  let generate = 0;
  for (const r of table) generate += 2 * n.get(r.generator)! * tokenCount(r.tokens);
  let train = OLD_LOG_PROBS === 'learner' ? generate : 0;
  const perToken = 4 + (LORA ? 0 : 2) + (CHECKPOINTING ? 2 : 0);
  const byName = new Map(agents.map((a) => [a.name, a]));
  for (const a of agents) {
    const view = learnerView(table, a, byName, shared);
    for (const i of view.records) train += perToken * EPOCHS * n.get(a.name)! * tokenCount(view.tokens[i]!);
  }
  return { generate, train };
}

const round = (x: number, d = 3): number => Number(x.toFixed(d));

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
  /** Resident memory after each step (the warm-up step first) and the process's peak so far, MiB. */
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
  agents: readonly Agent[],
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

/** Each learner's own knobs besides its policy and optimizer (HACPO's α and stepwise band; unused without sharing). */
type LearnerKnobs = Pick<LocalLearner, 'alpha' | 'stepwise' | 'order'>;

/**
 * STEPS + 1 steps of the trainer's pipeline for `agents` under `recipe`, as `hacrl train` runs them: the source fills
 * the table, shared runs add every learner's tokens and record each agent's P̂ (Eq. 9), then each learner updates.
 * The train part is everything of the step that is neither sampling nor scoring rewards: old log-probs,
 * re-tokenizing, advantages and updates.
 */
async function benchSetting(agents: Agent[], recipe: UpdateRecipe, knobs: LearnerKnobs, peak: number) {
  const shared = recipe.sharing !== 'none';
  const team: LocalLearner[] = agents.map((policy, i) => ({
    policy,
    local: true,
    optimizer: new AdamW(policy.model.trainable, { lr: LR }),
    reference: null,
    rng: new Rng(10 + i),
    capability: new CapabilityTracker(5),
    lr: () => LR,
    ...knobs,
  }));
  let drawn = 0;
  const source = new RolloutSource(
    team.map((l) => ({ name: l.policy.name, policy: l.policy, rollout, rng: l.rng, validation })),
    {
      train: { next: (n) => problems.slice(drawn, (drawn += n)) },
      promptsPerStep: B,
      validation: [],
      samplesLogged: 0,
      oldLogProbs: OLD_LOG_PROBS,
    },
  );
  const orderRng = new Rng(3);
  const samples: StepSample[] = [];
  const rss: number[] = [];
  const peakRss: number[] = [];
  for (let step = 0; step <= STEPS; step++) {
    const t0 = performance.now();
    const table: SampleRecord[] = [];
    const sampled = await source.collect({ k, step }, table);
    teamStep(table, team, recipe, k, orderRng, step);
    const seconds = (performance.now() - t0) / 1e3;
    const memory = memoryMetrics();
    rss.push(memory['mem/rss_mib']);
    peakRss.push(memory['mem/peak_rss_mib']);
    if (step === 0 && STEPS > 0) continue;
    const sumOf = (key: string): number => agents.reduce((a, p) => a + sampled.get(p.name)![key]!, 0);
    const f = stepFlops(agents, table, shared);
    samples.push({
      generate: sumOf('time_generate_s'),
      score: sumOf('time_score_s'),
      train: seconds - sumOf('time_generate_s') - sumOf('time_score_s'),
      step: seconds,
      tokens: sumOf('tokens'),
      genFlops: f.generate,
      trainFlops: f.train,
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
 * with the OpenBLAS kernel OpenBLAS picks for this CPU (TORCH_OPENBLAS_CORETYPE=NAME forces one). Its clip is
 * symmetric at the low ε (the same arithmetic as the clip-higher range).
 */
async function torchPeer(weightsDir: string, threads: number, clip: number): Promise<TorchRl> {
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
      clip,
      seed: 1,
    }),
  );
  // OpenBLAS detects the CPU and picks its own kernels when OPENBLAS_CORETYPE is unset (on AVX-512 machines its
  // fastest, as bench:model's probe finds); TORCH_OPENBLAS_CORETYPE names another.
  const env: NodeJS.ProcessEnv = { ...process.env, OMP_WAIT_POLICY: 'PASSIVE' };
  delete env.OPENBLAS_CORETYPE;
  if (process.env.TORCH_OPENBLAS_CORETYPE) env.OPENBLAS_CORETYPE = process.env.TORCH_OPENBLAS_CORETYPE;
  const r = spawnSync(TORCH_PYTHON, [TORCH_SCRIPT, input], { encoding: 'utf8', maxBuffer: 1 << 26, env });
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
      `${s.generate_gflops} GFLOP/s, ${(100 * s.generate_peak_frac).toFixed(1)}% of ${PEAK_NAME}`,
    ],
    ['score', s.time_score_s, 'rewards'],
    ['train', s.time_train_s, `${s.train_gflops} GFLOP/s, ${(100 * s.train_peak_frac).toFixed(1)}% of ${PEAK_NAME}`],
  ];
  for (const [name, t, note] of parts)
    log(`  ${name.padEnd(9)} ${t.toFixed(2)} s (${((100 * t) / s.time_step_s).toFixed(0).padStart(2)}%)   ${note}`);
  log(
    `  step ${s.time_step_s.toFixed(2)} s; ${s.generated_tokens} generated tokens per step, ${s.tokens_per_s} tokens/s ` +
      `overall, ${s.generate_tokens_per_s} while generating; peak FMA ${peak} GFLOP/s`,
  );
  log(`  resident memory after each step ${s.rss_mb.join(', ')} MiB; process peak ${s.peak_rss_mb.join(', ')} MiB`);
}

/**
 * The memory plan of the setting just run (each agent samples B·G sequences and trains on its own, plus the other's
 * when `shared`; its longest prompt) beside the process's peak resident memory so far, and their ratio.
 */
function planVsMeasured(
  agents: readonly Agent[],
  shared: boolean,
): { estimate_mib: number; measured_mib: number; ratio: number } {
  const promptTokens = (agent: Agent): number =>
    Math.max(
      ...problems.map((p) => agent.tokenizer.encode(renderPrompt(agent.tokenizer, p.prompt, rollout.prompt)).length),
    );
  const plan = planMemory(
    agents.map((agent) => ({
      name: agent.name,
      cfg: agent.model.cfg,
      ...(LORA ? { adapters: adapterMemory(agent.model.cfg, LORA) } : {}),
      precision: PRECISION,
      // shapeAgent draws a bf16 LoRA base straight into bfloat16 bits, embedding tables included (as a BF16 checkpoint).
      tablesBf16: PRECISION === 'bf16' && LORA !== null,
      reference: false,
      scores: OLD_LOG_PROBS === 'learner',
      sequences: B * G,
      generationBatch: rollout.generationBatch,
      promptTokens: promptTokens(agent),
      maxNewTokens: MAX_NEW,
      trainSequences: (shared ? agents.length : 1) * B * G,
      miniBatches: MINI_BATCHES,
      checkpointing: CHECKPOINTING,
    })),
  );
  const mib = (bytes: number): number => round(bytes / 2 ** 20, 1);
  const measured = peakResidentBytes();
  for (const a of plan.agents)
    log(
      `\nmemory plan of ${a.name}: ${a.parts.map((p) => `${p.name} ${mib(p.bytes)}`).join(', ')} MiB; ` +
        `largest phase ${a.phase.name}`,
    );
  log(
    `  estimated peak ${mib(plan.total)} MiB, measured peak (VmHWM) ${mib(measured)} MiB: ` +
      `estimate/measured ${round(plan.total / measured, 3)}`,
  );
  return { estimate_mib: mib(plan.total), measured_mib: mib(measured), ratio: round(plan.total / measured, 3) };
}

/**
 * The HACPO pair's setting, HACPO's recipe: by default the single agent with a 0.6M Llama-style agent on a BPE
 * tokenizer; under --pair, the two shapes' agents.
 */
function hacpoPair(peak: number, pairAgents = defaultPair()) {
  const hacpo = benchRecipe(ALGORITHM_RECIPES.hacpo);
  return benchSetting(
    pairAgents,
    hacpo,
    { alpha: 1, stepwise: { delta: 0.2, deltaStep: 0.025 }, order: 'shuffled' },
    peak,
  );
}

function defaultPair(): Agent[] {
  return [
    makeAgent('qwen3-char', {}),
    makeAgent('llama-bpe', { arch: 'llama', tokenizer: 'bpe', hidden: 128, layers: 3, heads: 4, seed: 1 }),
  ];
}

async function main(): Promise<void> {
  const native = nativeBackend();
  const threads = native?.maxThreads() ?? 1;
  const peakProbe = native ? machinePeak(native, [threads]) : null;
  const peak = round(peakProbe ? peakProbe.gflops[threads]! : NaN, 1);
  log(
    `hacrl RL step benchmark — B=${B}, G=${G}, ≤ ${MAX_NEW} new tokens, ${MINI_BATCHES} mini-batches, ${threads} threads` +
      (SHAPE === undefined
        ? ''
        : PAIR_SHAPE === undefined
          ? `, shape ${SHAPE} (random weights)`
          : `, HACPO pair of shapes ${SHAPE} (character tokenizer) and ${PAIR_SHAPE} (BPE tokenizer), random weights`) +
      (CHECKPOINTING ? ', activation checkpointing' : '') +
      (OLD_LOG_PROBS === 'sampler' ? ", the sampler's log-probs as old log-probs" : '') +
      (LORA ? `, LoRA rank ${LORA.rank} on every linear projection` : '') +
      `, precision ${PRECISION}` +
      (PRECISION === 'bf16' ? ` (${k.bf16})` : ''),
  );
  log(`resident memory at start ${round(process.memoryUsage.rss() / 2 ** 20, 1)} MiB`);
  log(`BLAS in use: ${k.blas} (OPENBLAS_CORETYPE=${process.env.OPENBLAS_CORETYPE ?? 'unset'})`);
  log(`OpenMP wait policy: ${openmpWaitPolicy()}`);
  if (peakProbe) log(peakLine(peakProbe));
  const dir = await mkdtemp(join(tmpdir(), 'hacrl-bench-rl-'));
  try {
    if (SHAPE !== undefined && PAIR_SHAPE !== undefined) {
      const names = SHAPE === PAIR_SHAPE ? [`${SHAPE}-a`, `${SHAPE}-b`] : [SHAPE, PAIR_SHAPE];
      const agents = [shapeAgent(SHAPE, names[0]), shapeAgent(PAIR_SHAPE, names[1], 'bpe')];
      const pair = await hacpoPair(peak, agents);
      print(
        'HACPO pair (RolloutSource + learnerStep per agent): both sample, both learn from all responses',
        pair,
        peak,
      );
      const memoryPlan = planVsMeasured(agents, true);
      await closeDefaultPool();
      if (json)
        console.log(
          JSON.stringify({ blas: k.blas, threads, peak_gflops: peak, hacpo_pair: pair, memory_plan: memoryPlan }),
        );
      return;
    }
    const grpo = benchRecipe(ALGORITHM_RECIPES.grpo);
    const single = SHAPE === undefined ? makeAgent('qwen3-char', {}) : shapeAgent(SHAPE);
    if (withTorch) await saveModel(dir, single.model); // the torch peer starts from these weights
    const solo = await benchSetting(
      [single],
      grpo,
      { alpha: 0, stepwise: { delta: 0.2, deltaStep: 0 }, order: 'shuffled' },
      peak,
    );
    print('single agent, GRPO (RolloutSource + learnerStep, no sharing)', solo, peak);
    const memoryPlan = planVsMeasured([single], false);
    const pair = singleOnly ? null : await hacpoPair(peak);
    if (pair)
      print(
        'HACPO pair (RolloutSource + learnerStep per agent): both sample, both learn from all responses',
        pair,
        peak,
      );
    await closeDefaultPool();
    let torch: TorchRl | null = null;
    if (withTorch) {
      torch = await torchPeer(dir, threads, grpo.clip.low);
      log(`\nPyTorch peer (${torch.torch}, ${torch.blas}) on the single agent's initial weights, same step shape:`);
      log(
        `  generate ${torch.time_generate_s.toFixed(2)} s (${torch.generate_tokens_per_s} tokens/s)  ` +
          `score ${torch.time_score_s.toFixed(2)} s  train ${torch.time_train_s.toFixed(2)} s; peak RSS ${torch.peak_rss_mb} MiB`,
      );
      const tStep = torch.time_generate_s + torch.time_train_s;
      const hStep = solo.time_generate_s + solo.time_train_s;
      log(
        `  hacrl/torch (generate + train, per generated token): ` +
          `${round(tStep / torch.generated_tokens / (hStep / solo.generated_tokens), 2)}×`,
      );
    }
    if (json)
      console.log(
        JSON.stringify({
          blas: k.blas,
          openmp_wait_policy: openmpWaitPolicy(),
          openblas_coretype: process.env.OPENBLAS_CORETYPE ?? null,
          threads,
          peak_gflops: peak,
          peak_below_linear: peakProbe?.below_linear ?? [],
          prompts: B,
          group_size: G,
          steps_averaged: STEPS,
          single: solo,
          hacpo_pair: pair,
          torch,
          memory_plan: memoryPlan,
          activation_checkpointing: CHECKPOINTING,
          old_log_probs: OLD_LOG_PROBS,
          lora_rank: LORA?.rank ?? null,
          // The fields earlier versions printed, for scripts that read them.
          parameters: solo.agents[0]!.parameters,
          time_generate_s: solo.time_generate_s,
          time_score_s: solo.time_score_s,
          time_train_s: solo.time_train_s,
          generated_tokens: solo.generated_tokens,
          tokens_per_s: solo.tokens_per_s,
        }),
      );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
