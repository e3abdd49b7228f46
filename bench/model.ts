/**
 * `npm run bench:model [-- --json] [-- --quick] [-- --torch-openblas-core=NAME]`: whole-model throughput of three
 * Qwen3-style models (about 1M, 10M and 50M parameters) against PyTorch on the same checkpoint, batch, thread count
 * and machine, in one run: SFT training tokens/s (forward, backward, AdamW) and greedy decode tokens/s with a KV cache
 * at batch 1, 16 and 64, with the ratios hacrl/torch (> 1: hacrl faster) and model FLOPs utilisation against the FMA
 * peak measured here. The torch side is bench/torch_model_bench.py run by Debian's /usr/bin/python3 (or
 * $HACRL_TORCH_PYTHON), in its fastest configuration on this machine: each OpenBLAS kernel it accepts
 * (OPENBLAS_CORETYPE) is timed on the benchmark's matrix products first and the fastest is used for the headline
 * ratios; the environment's own setting, when it differs, is run as well and shown as a second column. Decoding is also timed in llama.cpp (bench/llama-cpp.ts:
 * node-llama-cpp's prebuilt CPU build on the same weights exported to GGUF f32, same prompts, threads and batch).
 * With --json the last line is one JSON object.
 *
 * `--shape NAME` (smollm2-135m, qwen2.5-0.5b, qwen3-0.6b, llama-3.2-1b; src/model/shapes.ts) times hacrl on that public
 * checkpoint's shape with random weights made here, on every thread: greedy decode tokens/s at batch 16 (32-token
 * prompts, 64 new tokens, --quick: 16; after an untimed 2-token run), then SFT training tokens/s (B=8 × T=256 with
 * 32-token prompts, --quick: 4 × 128 and 16; 1 warm-up step, then --steps=N timed, default 1) and the process's peak
 * memory. `--precision=fp32,bf16` (default fp32) times each listed precision on the same weights in the same run (bf16:
 * fp32 masters rounded at each product, the products on oneDNN's bf16 kernel where the CPU has one) and prints the bf16
 * / fp32 ratios; every precision's decoding comes before any training. `--torch` (default off: it about doubles the
 * run's time) adds PyTorch's column for each precision, with the ratios hacrl / torch: the weights saved once to a
 * temporary folder, the same train ids and decode prompts, the same thread count; fp32 is plain PyTorch on its fastest
 * OpenBLAS kernel (probed as above, or --torch-openblas-core), bf16 is PyTorch's mixed precision, torch.autocast("cpu",
 * bfloat16) around training's forward and loss and around decoding (fp32 master weights and AdamW, its bf16 products on
 * oneDNN). Each torch process (one per precision) decodes, then trains, and ends before hacrl's runs begin, so its
 * training state never shares memory with hacrl's (this process holds only the weights meanwhile); its peak memory is
 * printed apart. Both sides decode the initial weights at every precision, and their greedy tokens are compared (at
 * bf16 printed, not expected to agree). Each torch process trains the initial weights, hacrl's later precisions the
 * weights its earlier ones left (one copy of the model), so only the first precision's first losses are compared.
 * Before any training, llama.cpp's column: each precision's weights exported to GGUF (bf16 matrices at bf16, f32 at
 * fp32), 1, 8 and 32 sequences of other 32-token prompts greedily decoded on both sides on the same threads, with
 * decode tokens/s, the ratio hacrl / llama.cpp and the sequences whose first 8 greedy tokens agree. Then the prefill
 * of GRPO's groups (8 prompts × G = 4 samples of 150 tokens, generate() for one new token) with each sequence's own
 * prefill and with the group's shared one: time, CPU seconds, tokens computed, and whether the samples are identical.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { engine } from '../src/backend/engine.js';
import type { Kernels } from '../src/backend/kernels.js';
import { nativeBackend, nativeLoadError } from '../src/backend/select.js';
import { generate, sampleRows } from '../src/model/generate.js';
import { parseHfConfig, type TransformerConfig } from '../src/model/hf-config.js';
import { shapeConfig } from '../src/model/shapes.js';
import { KVCache } from '../src/model/kv-cache.js';
import type { PromptResponse } from '../src/model/pack.js';
import { sftLoss } from '../src/model/sft.js';
import { Transformer } from '../src/model/transformer.js';
import { PRECISIONS, type Precision } from '../src/tensor/bf16.js';
import type { Tensor } from '../src/tensor/tensor.js';
import { initModel, loadModel, saveModel } from '../src/model/weights.js';
import { AdamW } from '../src/optim/adamw.js';
import { Tape } from '../src/tensor/tape.js';
import { backgroundCores, cpuTicks } from '../src/util/cpu-load.js';
import { Rng } from '../src/util/rng.js';
import { matmulParams } from './flops.js';
import { machinePeak, peakLine } from './peak.js';
import { openmpWaitPolicy } from '../src/backend/native.js';
import {
  closeLlamaCpp,
  llamaCppDecode,
  llamaCppInfo,
  loadLlamaModel,
  writeBenchGguf,
  type LlamaDecodeTiming,
} from './llama-cpp.js';
import { TORCH_PYTHON } from './torch-python.js';

const args = new Set(process.argv.slice(2));
/**
 * --torch-openblas-core=NAME runs the torch side with OPENBLAS_CORETYPE=NAME only, skipping the search for its fastest
 * kernel; hacrl's side is unaffected (it multiplies with oneDNN unless HACRL_BLAS says else).
 */
const forcedCore = process.argv.find((a) => a.startsWith('--torch-openblas-core='))?.split('=')[1];
/** The environment's OpenBLAS kernel setting, kept as the second torch column ('' = unset: OpenBLAS detects it). */
const envCore = process.env.OPENBLAS_CORETYPE ?? '';
/** OpenBLAS kernels worth trying on x86-64 ('' = let OpenBLAS detect the CPU). */
const CANDIDATE_CORES = ['', 'SkylakeX', 'Cooperlake', 'Haswell', 'Zen'];
const json = args.has('--json');
const quick = args.has('--quick');
/** --shape=NAME or --shape NAME: a public checkpoint's shape (src/model/shapes.ts) instead of the built-in models. */
const shapeArg = ((): string | undefined => {
  const argv = process.argv.slice(2);
  const i = argv.indexOf('--shape');
  return i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith('--shape='))?.split('=')[1];
})();
/** --precision=fp32,bf16: the precisions timed under --shape, one after the other on the same weights; default fp32. */
const shapePrecisions = ((): Precision[] => {
  const list = (process.argv.find((a) => a.startsWith('--precision='))?.split('=')[1] ?? 'fp32').split(',');
  for (const p of list)
    if (!(PRECISIONS as readonly string[]).includes(p))
      throw new Error(`--precision=${list.join(',')}: each must be one of ${PRECISIONS.join(', ')}`);
  return list as Precision[];
})();
/** --torch: under --shape, PyTorch's figures beside hacrl's (off by default: it doubles the run's time). */
const shapeTorch = args.has('--torch');
/** Timed training steps under --shape (after one warm-up step); default 1. */
const shapeSteps = Number(process.argv.find((a) => a.startsWith('--steps='))?.split('=')[1] ?? 1);
if (!Number.isInteger(shapeSteps) || shapeSteps < 1) throw new Error(`--steps=N needs a whole number ≥ 1`);
const log = (s: string): void => {
  if (!json) console.log(s);
};

const TORCH_SCRIPT = fileURLToPath(new URL('../../bench/torch_model_bench.py', import.meta.url));
const SEED = 1234;
/** Headline ratios: this model, the most threads measured, and this decode batch. */
const HEADLINE = { model: '10M', decodeBatch: 16 };

/** A Qwen3-style shape: head_dim 64, grouped-query attention with half as many kv heads, tied embeddings. */
interface ModelSpec {
  name: string;
  hidden: number;
  layers: number;
  heads: number;
  intermediate: number;
  vocab: number;
  /** Training steps timed after one warm-up step (fewer for the big model keeps the run within minutes). */
  steps: number;
}

const MODELS: ModelSpec[] = [
  { name: '1M', hidden: 128, layers: 4, heads: 2, intermediate: 384, vocab: 4096, steps: 6 },
  { name: '10M', hidden: 320, layers: 6, heads: 4, intermediate: 960, vocab: 8192, steps: 5 },
  { name: '50M', hidden: 640, layers: 8, heads: 10, intermediate: 1920, vocab: 16384, steps: 3 },
];

const TRAIN = quick ? { batch: 4, seqLen: 128, promptLen: 16 } : { batch: 8, seqLen: 256, promptLen: 32 };
/** repeats: timed runs of each decode case on each side, the fastest kept (a single run moved cells by ±0.5×). */
const DECODE = quick
  ? { promptLen: 32, newTokens: 16, batches: [1, 16], repeats: 1 }
  : { promptLen: 32, newTokens: 64, batches: [1, 16, 64], repeats: 3 };
const ADAMW = { lr: 1e-4, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.01 };

function qwen3Config(s: ModelSpec): TransformerConfig {
  return parseHfConfig({
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    vocab_size: s.vocab,
    hidden_size: s.hidden,
    intermediate_size: s.intermediate,
    num_hidden_layers: s.layers,
    num_attention_heads: s.heads,
    num_key_value_heads: s.heads / 2,
    head_dim: 64,
    max_position_embeddings: 4096,
    rms_norm_eps: 1e-6,
    rope_theta: 1e6,
    hidden_act: 'silu',
    attention_bias: false,
    tie_word_embeddings: true,
  });
}

/**
 * Model FLOPs per trained token: 6·N for the matrix multiplies (forward 2, backward 4) plus causal attention,
 * 3 (forward and backward) × 2 products (QKᵀ, PV) × 2·D per key over (T+1)/2 keys on average, per query head and layer.
 * Recomputation in the backward pass is not model work and is not counted.
 */
function trainFlopsPerToken(cfg: TransformerConfig, n: number, seqLen: number): number {
  return 6 * n + 6 * cfg.layers * cfg.heads * cfg.headDim * (seqLen + 1);
}

/** Model FLOPs per generated token of a decode step attending `keys` cached positions on average. */
function decodeFlopsPerToken(cfg: TransformerConfig, n: number, keys: number): number {
  return 2 * n + 4 * cfg.layers * cfg.heads * cfg.headDim * keys;
}

function randomIds(rng: Rng, n: number, vocab: number): number[] {
  return Array.from({ length: n }, () => 1 + rng.int(vocab - 1));
}

const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

/** Seconds per SFT step after one warm-up step, and the first step's loss. */
function hacrlTrain(k: Kernels, model: Transformer, items: PromptResponse[], steps: number) {
  const opt = new AdamW(model.params, ADAMW);
  const step = (): number => {
    const tape = new Tape();
    const { loss } = sftLoss({ k, tape }, model, items);
    tape.backward(loss);
    opt.step(k);
    opt.zeroGrad();
    return loss.data[0]!;
  };
  const firstLoss = step();
  const times: number[] = [];
  for (let i = 0; i < steps; i++) {
    const t0 = performance.now();
    step();
    times.push((performance.now() - t0) / 1e3);
  }
  return { stepS: times, firstLoss };
}

interface DecodeTiming {
  prefillS: number;
  /** Seconds of each decode step. */
  stepS: number[];
  /** Greedy tokens [B][newTokens]. */
  tokens: number[][];
}

/**
 * generate()'s loop with the prefill timed apart, built from the same calls (sampleRows, gatherLogProbs): prefill
 * with the cache, then per step one token of every sequence through decodeStep, the head, the greedy pick and that
 * token's log-prob. The first new token comes from the prefill, each of the other newTokens − 1 from one decode step.
 */
function hacrlDecode(k: Kernels, model: Transformer, prompts: number[][], newTokens: number): DecodeTiming {
  // As generate() does: inference uses [in, out] copies of the weights, made before the timed region.
  return model.withInferenceWeights(() => decodeLoop(k, model, prompts, newTokens));
}

function decodeLoop(k: Kernels, model: Transformer, prompts: number[][], newTokens: number): DecodeTiming {
  const { cfg } = model;
  const batch = prompts.length;
  const promptLen = prompts[0]!.length;
  const vocab = cfg.vocabSize;
  const keyStart = new Int32Array(batch);
  const cache = new KVCache(cfg.layers, batch, cfg.kvHeads, cfg.headDim, promptLen + newTokens, keyStart);
  const greedy = { temperature: 0, topK: 0, topP: 1 };
  const rng = new Rng(0);
  const active = new Array<boolean>(batch).fill(true);
  const tokens = prompts.map((): number[] => []);
  const next = new Int32Array(batch);
  const logProb = new Float32Array(batch);
  const lse = new Float32Array(batch);
  let logProbSum = 0;
  const pick = (logits: Float32Array): void => {
    next.set(sampleRows(k, logits, vocab, active, greedy, rng));
    k.gatherLogProbs(logits, next, logProb, lse, batch, vocab);
    for (let b = 0; b < batch; b++) {
      tokens[b]!.push(next[b]!);
      logProbSum += logProb[b]!;
    }
  };
  const t0 = performance.now();
  const ids = Int32Array.from(prompts.flat());
  const hidden = model.forward({ k, tape: null }, { ids, batch, seqLen: promptLen, keyStart }, cache);
  const last = new Float32Array(batch * cfg.hidden);
  for (let b = 0; b < batch; b++)
    last.set(
      hidden.data.subarray(((b + 1) * promptLen - 1) * cfg.hidden, (b + 1) * promptLen * cfg.hidden),
      b * cfg.hidden,
    );
  const logits = cache.buffer('logits', batch * vocab);
  pick(model.logits(k, last, batch, logits));
  const t1 = performance.now();
  const stepS: number[] = [];
  for (let step = 1; step < newTokens; step++) {
    const s0 = performance.now();
    pick(model.logits(k, model.decodeStep(k, next, cache), batch, logits));
    stepS.push((performance.now() - s0) / 1e3);
  }
  if (!Number.isFinite(logProbSum)) throw new Error('decode produced a non-finite log-prob');
  return { prefillS: (t1 - t0) / 1e3, stepS, tokens };
}

/** What bench/torch_model_bench.py prints (snake_case, as Python writes it). */
interface TorchResult {
  torch: string;
  blas: string;
  /** "fp32", or "bf16": under torch.autocast. */
  precision: string;
  /** The torch process's peak resident memory, MiB. */
  peak_rss_mb: number;
  runs: {
    threads: number;
    torch_threads: number;
    train?: { step_s: number[]; tokens: number; first_loss: number };
    decode?: { prefill_s: number; step_s: number[]; tokens: number[][] }[];
  }[];
}

/**
 * torch runs two thread pools here, OpenMP for its own ops and pthreads OpenBLAS for matmuls; with OpenMP's default
 * spin-waiting they fight over the cores and torch on 2 threads runs 4–10× slower than on 1, so its OpenMP threads
 * sleep when idle instead (its fastest setting on this machine; no effect on 1 thread).
 */
function torchEnv(core: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, OMP_WAIT_POLICY: 'PASSIVE' };
  if (core) env.OPENBLAS_CORETYPE = core;
  else delete env.OPENBLAS_CORETYPE;
  return env;
}

function runPython(args: string[], core: string): string {
  const r = spawnSync(TORCH_PYTHON, [TORCH_SCRIPT, ...args], {
    encoding: 'utf8',
    maxBuffer: 1 << 28,
    env: torchEnv(core),
  });
  if (r.status !== 0)
    throw new Error(`${TORCH_SCRIPT} failed (needs ${TORCH_PYTHON} with torch): ${r.error?.message ?? r.stderr}`);
  const lines = r.stdout.trim().split('\n');
  return lines[lines.length - 1]!;
}

function runTorch(input: string, core: string): TorchResult {
  return JSON.parse(runPython([input], core)) as TorchResult;
}

/** One OpenBLAS kernel setting as the torch side ran it: what was asked, what OpenBLAS used, its probe time. */
interface TorchConfig {
  /** OPENBLAS_CORETYPE given ('' = unset). */
  requested: string;
  /** The kernel OpenBLAS reports it uses. */
  core: string;
  /** Seconds of the probe's products, summed over the thread counts. */
  probe_s: number;
}

/**
 * PyTorch's fastest OpenBLAS kernel here: every candidate is probed on the benchmark's products (a kernel OpenBLAS
 * does not accept falls back to another, which is then counted once); returns the probes, fastest first.
 */
function probeTorchCores(threadCounts: number[]): TorchConfig[] {
  const seen = new Map<string, TorchConfig>();
  for (const requested of new Set([envCore, ...CANDIDATE_CORES])) {
    let out: string;
    try {
      out = runPython(['--probe', threadCounts.join(',')], requested);
    } catch (e) {
      // A kernel this CPU cannot run (e.g. SkylakeX without AVX-512) kills the probe: it is no candidate here.
      if (!requested || requested === envCore) throw e;
      console.error(`torch OpenBLAS kernel ${requested}: not runnable on this CPU, left out`);
      continue;
    }
    const p = JSON.parse(out) as { core: string | null; probe_s: Record<string, number> };
    const core = p.core ?? 'not OpenBLAS';
    // A request OpenBLAS did not honour names another kernel: keep the first request that reached it.
    if (requested && core !== requested && requested !== envCore) continue;
    if (seen.has(core)) continue;
    seen.set(core, { requested, core, probe_s: round(sum(Object.values(p.probe_s)), 4) });
  }
  return [...seen.values()].sort((a, b) => a.probe_s - b.probe_s);
}

/** Makes every hacrl kernel use at most `threads` threads (the addon reads HACRL_THREADS on each call). */
function useThreads(threads: number): void {
  process.env.HACRL_THREADS = String(threads);
  const got = nativeBackend()!.maxThreads();
  if (got !== threads) throw new Error(`HACRL_THREADS=${threads} did not take effect (the addon reports ${got})`);
}

const round = (x: number, d = 1): number => Number(x.toFixed(d));
const ratio = (a: number, b: number): number => round(a / b, 2);
const mfuOf = (flopsPerToken: number, tokensPerS: number, peakGflops: number): number =>
  round((flopsPerToken * tokensPerS) / (peakGflops * 1e9), 3);
const fmt = (x: number): string => (x >= 100 ? String(Math.round(x)) : String(round(x)));

interface TrainRow {
  threads: number;
  hacrl_tokens_per_s: number;
  /** PyTorch at its fastest kernel (the headline). */
  torch_tokens_per_s: number;
  ratio_vs_torch: number;
  /** PyTorch with the environment's OPENBLAS_CORETYPE (null when that is the fastest). */
  torch_env_tokens_per_s: number | null;
  ratio_vs_torch_env: number | null;
  hacrl_mfu: number;
  torch_mfu: number;
  hacrl_first_loss: number;
  torch_first_loss: number;
}

interface DecodeRow {
  threads: number;
  batch: number;
  hacrl_tokens_per_s: number;
  /** PyTorch at its fastest kernel (the headline). */
  torch_tokens_per_s: number;
  ratio_vs_torch: number;
  /** PyTorch with the environment's OPENBLAS_CORETYPE (null when that is the fastest). */
  torch_env_tokens_per_s: number | null;
  ratio_vs_torch_env: number | null;
  hacrl_mfu: number;
  torch_mfu: number;
  hacrl_prefill_ms: number;
  torch_prefill_ms: number;
  /** Fraction of sequences whose greedy tokens are identical on both sides (same weights, same work). */
  greedy_agreement: number;
  /** llama.cpp on the same weights (GGUF f32, f32 KV cache), same threads and batch. */
  llama_tokens_per_s: number;
  ratio_vs_llama: number;
  llama_prefill_ms: number;
  /** Fraction of sequences whose greedy tokens llama.cpp and hacrl agree on. */
  llama_greedy_agreement: number;
}

interface ModelResult {
  name: string;
  params: number;
  matmul_params: number;
  config: Pick<ModelSpec, 'hidden' | 'layers' | 'heads' | 'intermediate' | 'vocab'> & {
    kv_heads: number;
    head_dim: number;
  };
  train: TrainRow[];
  decode: DecodeRow[];
  /** Average cores used by other processes while each side ran (see backgroundCores). */
  background_cores: { hacrl: number | null; torch: number | null; torch_env: number | null; llama: number | null };
  /**
   * Peak resident memory, MiB: this process after this model's runs (a running maximum over the benchmark, so it
   * includes the smaller models before it) and the torch process of this model.
   */
  peak_rss_mb: { hacrl: number; torch: number };
}

/**
 * llama.cpp's decode timings of `model` per thread count, one per DECODE batch: an untimed short run per shape first,
 * then the fastest of DECODE.repeats, as on hacrl's side.
 */
async function llamaDecodeRuns(
  model: Transformer,
  file: string,
  prompts: number[][],
  threadCounts: number[],
): Promise<Map<number, LlamaDecodeTiming[]>> {
  await writeBenchGguf(model, file);
  const llamaModel = await loadLlamaModel(file);
  try {
    const out = new Map<number, LlamaDecodeTiming[]>();
    for (const threads of threadCounts) {
      const runs: LlamaDecodeTiming[] = [];
      for (const b of DECODE.batches) {
        await llamaCppDecode(llamaModel, prompts.slice(0, b), 2, threads);
        let best: LlamaDecodeTiming | null = null;
        for (let r = 0; r < DECODE.repeats; r++) {
          const t = await llamaCppDecode(llamaModel, prompts.slice(0, b), DECODE.newTokens, threads);
          if (best === null || t.decodeS < best.decodeS) best = t;
        }
        runs.push(best!);
      }
      out.set(threads, runs);
    }
    return out;
  } finally {
    await llamaModel.dispose();
  }
}

async function benchModel(
  s: ModelSpec,
  threadCounts: number[],
  peak: Record<number, number>,
  k: Kernels,
  torchCores: { best: string; env: string | null },
): Promise<{ result: ModelResult; torch: TorchResult }> {
  const cfg = qwen3Config(s);
  const dir = await mkdtemp(join(tmpdir(), `hacrl-bench-${s.name}-`));
  try {
    const initial = initModel(cfg, SEED);
    await saveModel(dir, initial);
    const n = matmulParams(initial);
    const rng = new Rng(SEED + 1);
    const trainIds = Array.from({ length: TRAIN.batch }, () => randomIds(rng, TRAIN.seqLen, cfg.vocabSize));
    const items = trainIds.map((ids) => ({
      prompt: ids.slice(0, TRAIN.promptLen),
      response: ids.slice(TRAIN.promptLen),
    }));
    const maxBatch = Math.max(...DECODE.batches);
    const prompts = Array.from({ length: maxBatch }, () => randomIds(rng, DECODE.promptLen, cfg.vocabSize));
    const steps = quick ? 1 : s.steps;

    const beforeHacrl = cpuTicks();
    const hacrl = threadCounts.map((threads) => ({
      threads,
      train: { stepS: [0], firstLoss: 0 },
      decode: [] as DecodeTiming[],
    }));
    for (const h of hacrl) {
      useThreads(h.threads);
      // A fresh copy of the checkpoint for each run: training changes the weights in place.
      h.train = hacrlTrain(k, await loadModel(dir), items, steps);
      const model = await loadModel(dir);
      // One set of inference copies for all of this model's decode runs (hacrlDecode reuses them): rebuilding 40 MB
      // of copies before each run left the garbage collector marking on a second thread during the timed steps.
      h.decode = model.withInferenceWeights(() =>
        DECODE.batches.map((b) => {
          // An untimed short run first: the BLAS prepares its kernels for each new shape on the first call.
          hacrlDecode(k, model, prompts.slice(0, b), 2);
          const runs = Array.from({ length: DECODE.repeats }, () =>
            hacrlDecode(k, model, prompts.slice(0, b), DECODE.newTokens),
          );
          return runs.reduce((best, r) => (sum(r.stepS) < sum(best.stepS) ? r : best));
        }),
      );
    }

    const afterHacrl = cpuTicks();
    const hacrlPeakRss = round(process.resourceUsage().maxRSS / 1024);
    const input = join(dir, 'bench-input.json');
    await writeFile(
      input,
      JSON.stringify({
        checkpoint: dir,
        threads: threadCounts,
        train: {
          ids: trainIds,
          prompt_len: TRAIN.promptLen,
          warmup: 1,
          steps,
          adamw: { ...ADAMW, weight_decay: ADAMW.weightDecay },
        },
        decode: { prompts, batches: DECODE.batches, new_tokens: DECODE.newTokens, repeats: DECODE.repeats },
      }),
    );
    const torch = runTorch(input, torchCores.best);
    const afterTorch = cpuTicks();
    const torchEnvRun = torchCores.env === null ? null : runTorch(input, torchCores.env);
    const afterTorchEnv = cpuTicks();
    const llama = await llamaDecodeRuns(initial, join(dir, 'model.gguf'), prompts, threadCounts);
    const background = {
      hacrl: backgroundCores(beforeHacrl, afterHacrl),
      torch: backgroundCores(afterHacrl, afterTorch),
      torch_env: torchEnvRun ? backgroundCores(afterTorch, afterTorchEnv) : null,
      llama: backgroundCores(afterTorchEnv, cpuTicks()),
    };

    const trainTokens = TRAIN.batch * TRAIN.seqLen;
    const trainFlops = trainFlopsPerToken(cfg, n, TRAIN.seqLen);
    const decodeKeys = DECODE.promptLen + 1 + (DECODE.newTokens - 2) / 2;
    const decodeFlops = decodeFlopsPerToken(cfg, n, decodeKeys);
    const train: TrainRow[] = [];
    const decode: DecodeRow[] = [];
    for (const h of hacrl) {
      const t = torch.runs.find((r) => r.threads === h.threads)!;
      const te = torchEnvRun?.runs.find((r) => r.threads === h.threads) ?? null;
      const hTps = trainTokens / median(h.train.stepS);
      const tTps = t.train!.tokens / median(t.train!.step_s);
      const teTps = te ? te.train!.tokens / median(te.train!.step_s) : null;
      train.push({
        threads: h.threads,
        hacrl_tokens_per_s: round(hTps),
        torch_tokens_per_s: round(tTps),
        ratio_vs_torch: ratio(hTps, tTps),
        torch_env_tokens_per_s: teTps === null ? null : round(teTps),
        ratio_vs_torch_env: teTps === null ? null : ratio(hTps, teTps),
        hacrl_mfu: mfuOf(trainFlops, hTps, peak[h.threads]!),
        torch_mfu: mfuOf(trainFlops, tTps, peak[h.threads]!),
        hacrl_first_loss: round(h.train.firstLoss, 5),
        torch_first_loss: round(t.train!.first_loss, 5),
      });
      DECODE.batches.forEach((batch, i) => {
        const hd = h.decode[i]!;
        const td = t.decode![i]!;
        const ted = te?.decode![i] ?? null;
        const hTok = (batch * hd.stepS.length) / sum(hd.stepS);
        const tTok = (batch * td.step_s.length) / sum(td.step_s);
        const teTok = ted ? (batch * ted.step_s.length) / sum(ted.step_s) : null;
        const same = hd.tokens.filter((seq, b) => seq.every((tok, j) => tok === td.tokens[b]![j])).length;
        const ld = llama.get(h.threads)![i]!;
        const lTok = (batch * (DECODE.newTokens - 1)) / ld.decodeS;
        const llamaSame = hd.tokens.filter((seq, b) => seq.every((tok, j) => tok === ld.tokens[b]![j])).length;
        decode.push({
          threads: h.threads,
          batch,
          hacrl_tokens_per_s: round(hTok),
          torch_tokens_per_s: round(tTok),
          ratio_vs_torch: ratio(hTok, tTok),
          torch_env_tokens_per_s: teTok === null ? null : round(teTok),
          ratio_vs_torch_env: teTok === null ? null : ratio(hTok, teTok),
          hacrl_mfu: mfuOf(decodeFlops, hTok, peak[h.threads]!),
          torch_mfu: mfuOf(decodeFlops, tTok, peak[h.threads]!),
          hacrl_prefill_ms: round(hd.prefillS * 1e3),
          torch_prefill_ms: round(td.prefill_s * 1e3),
          greedy_agreement: round(same / batch, 2),
          llama_tokens_per_s: round(lTok),
          ratio_vs_llama: ratio(hTok, lTok),
          llama_prefill_ms: round(ld.prefillS * 1e3),
          llama_greedy_agreement: round(llamaSame / batch, 2),
        });
      });
    }
    const result: ModelResult = {
      name: s.name,
      params: initial.numParameters,
      matmul_params: n,
      config: {
        hidden: s.hidden,
        layers: s.layers,
        heads: s.heads,
        kv_heads: cfg.kvHeads,
        head_dim: cfg.headDim,
        intermediate: s.intermediate,
        vocab: s.vocab,
      },
      train,
      decode,
      background_cores: background,
      peak_rss_mb: { hacrl: hacrlPeakRss, torch: round(torch.peak_rss_mb) },
    };
    return { result, torch };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * hacrl's generate() on the headline decode case, to check that the timed loop above does what the library does
 * (identical greedy tokens) and to show its end-to-end rate, prefill and per-token log-prob bookkeeping included.
 */
interface GenerateCheck {
  threads: number;
  batch: number;
  tokens_match_timed_loop: boolean;
  generate_tokens_per_s_with_prefill: number;
  timed_loop_tokens_per_s_with_prefill: number;
  background_cores: number | null;
}

async function generateCheck(k: Kernels, threads: number): Promise<GenerateCheck> {
  const s = MODELS.find((m) => m.name === HEADLINE.model)!;
  const cfg = qwen3Config(s);
  const model = initModel(cfg, SEED);
  const rng = new Rng(SEED + 2);
  const prompts = Array.from({ length: HEADLINE.decodeBatch }, () => randomIds(rng, DECODE.promptLen, cfg.vocabSize));
  useThreads(threads);
  const timedGenerate = () => {
    const t0 = performance.now();
    const out = generate(model, k, prompts, { maxNewTokens: DECODE.newTokens, temperature: 0 });
    return { out, seconds: (performance.now() - t0) / 1e3 };
  };
  // Each side twice, alternating, the second run counted: neither gets the other's warm-up.
  const before = cpuTicks();
  hacrlDecode(k, model, prompts, DECODE.newTokens);
  timedGenerate();
  const loop = hacrlDecode(k, model, prompts, DECODE.newTokens);
  const gen = timedGenerate();
  const tokens = prompts.length * DECODE.newTokens;
  return {
    threads,
    batch: HEADLINE.decodeBatch,
    tokens_match_timed_loop: gen.out.every((g, b) => g.ids.every((t, j) => t === loop.tokens[b]![j])),
    generate_tokens_per_s_with_prefill: round(tokens / gen.seconds),
    timed_loop_tokens_per_s_with_prefill: round(tokens / (loop.prefillS + sum(loop.stepS))),
    background_cores: backgroundCores(before, cpuTicks()),
  };
}

/** Sequence counts of the llama.cpp column under --shape. */
const LLAMA_BATCHES = [1, 8, 32];
/** New tokens over which the llama.cpp column counts sequences whose greedy tokens agree with hacrl's. */
const LLAMA_AGREE_STEPS = 8;

/** One sequence count of the llama.cpp column under --shape: both sides on the same GGUF-exported weights. */
interface LlamaShapeRow {
  batch: number;
  hacrl_tokens_per_s: number;
  llama_tokens_per_s: number;
  hacrl_over_llama: number;
  hacrl_prefill_s: number;
  llama_prefill_s: number;
  /** Sequences whose greedy tokens equal on both sides over the first `steps` new tokens, of `of`. */
  same_greedy_tokens: { steps: number; agree: number; of: number };
}

/**
 * The llama.cpp column of --shape at `precision`: the weights exported to GGUF (bf16 matrices at bf16, else f32), then
 * for each of LLAMA_BATCHES the first that many of `prompts` greedily decoded on both sides, each after an untimed
 * 2-token run, on `threads` threads; decode tokens/s exclude the prefill, as the rest of --shape does.
 */
async function llamaShapeRuns(
  k: Kernels,
  model: Transformer,
  prompts: number[][],
  threads: number,
): Promise<LlamaShapeRow[]> {
  const dir = await mkdtemp(join(tmpdir(), 'hacrl-bench-gguf-'));
  try {
    const file = join(dir, 'model.gguf');
    await writeBenchGguf(model, file, model.precision === 'bf16' ? 'bf16' : 'f32');
    const llamaModel = await loadLlamaModel(file);
    try {
      const rows: LlamaShapeRow[] = [];
      for (const batch of LLAMA_BATCHES) {
        const ps = prompts.slice(0, batch);
        const ours = model.withInferenceWeights(() => {
          decodeLoop(k, model, ps, 2);
          return decodeLoop(k, model, ps, DECODE.newTokens);
        });
        await llamaCppDecode(llamaModel, ps, 2, threads);
        const theirs = await llamaCppDecode(llamaModel, ps, DECODE.newTokens, threads);
        const hacrlTps = (batch * ours.stepS.length) / sum(ours.stepS);
        // llama.cpp's first new token also comes from the prefill: decodeS covers the other newTokens − 1.
        const llamaTps = (batch * (DECODE.newTokens - 1)) / theirs.decodeS;
        const steps = Math.min(LLAMA_AGREE_STEPS, DECODE.newTokens);
        const agree = ours.tokens.filter((seq, b) =>
          seq.slice(0, steps).every((t, j) => t === theirs.tokens[b]![j]),
        ).length;
        rows.push({
          batch,
          hacrl_tokens_per_s: round(hacrlTps),
          llama_tokens_per_s: round(llamaTps),
          hacrl_over_llama: ratio(hacrlTps, llamaTps),
          hacrl_prefill_s: round(ours.prefillS, 3),
          llama_prefill_s: round(theirs.prefillS, 3),
          same_greedy_tokens: { steps, agree, of: batch },
        });
        log(
          `  ${model.precision} llama.cpp (GGUF ${model.precision === 'bf16' ? 'bf16' : 'f32'}): ${batch} sequences, ` +
            `hacrl ${fmt(hacrlTps)} tokens/s, llama.cpp ${fmt(llamaTps)} tokens/s, hacrl / llama.cpp ` +
            `${ratio(hacrlTps, llamaTps)}×; greedy tokens equal in ${agree}/${batch} sequences over the first ${steps}`,
        );
      }
      return rows;
    } finally {
      await llamaModel.dispose();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The shared-prefill case of --shape: GRPO's groups, PREFILL.prompts prompts × PREFILL.group samples. */
const PREFILL = { prompts: 8, group: 4, promptLen: 150 };

/** generate()'s prefill with each sequence's own and with the group's shared, at one precision. */
interface PrefillRow {
  /** Prompt tokens computed (left padding included) each way. */
  own_tokens: number;
  shared_tokens: number;
  own_s: number;
  shared_s: number;
  /** CPU seconds of this process (every thread), each way. */
  own_cpu_s: number;
  shared_cpu_s: number;
  /** Whether both ways sampled the same tokens with the same log-probs, bit for bit. */
  identical: boolean;
}

/**
 * generate() on PREFILL's groups for one new token (sampled at temperature 1, seed 0), so that its time is the
 * prefill's: each sequence's own prefill, then the groups' shared one, each after an untimed run.
 */
function prefillRun(k: Kernels, model: Transformer, prompts: number[][]): PrefillRow {
  const sequences = prompts.flatMap((p) => Array<number[]>(PREFILL.group).fill(p));
  const run = (sharePrefill: boolean) => {
    const go = () => generate(model, k, sequences, { maxNewTokens: 1, seed: 0, sharePrefill });
    go();
    const [t0, c0] = [performance.now(), process.cpuUsage()];
    const out = go();
    const cpu = process.cpuUsage(c0);
    return { out, s: (performance.now() - t0) / 1e3, cpuS: (cpu.user + cpu.system) / 1e6 };
  };
  const [own, shared] = [run(false), run(true)];
  const row: PrefillRow = {
    own_tokens: sequences.length * PREFILL.promptLen,
    shared_tokens: prompts.length * PREFILL.promptLen,
    own_s: round(own.s, 2),
    shared_s: round(shared.s, 2),
    own_cpu_s: round(own.cpuS, 2),
    shared_cpu_s: round(shared.cpuS, 2),
    identical: own.out.every(
      (g, i) =>
        g.ids.join() === shared.out[i]!.ids.join() &&
        g.logProbs.every((x, j) => Object.is(x, shared.out[i]!.logProbs[j])),
    ),
  };
  log(
    `  ${model.precision} prefill of ${PREFILL.prompts} prompts × G=${PREFILL.group} of ${PREFILL.promptLen} tokens ` +
      `(generate, 1 new token): each sequence's own ${row.own_tokens} tokens ${row.own_s} s (${row.own_cpu_s} CPU s), ` +
      `shared ${row.shared_tokens} tokens ${row.shared_s} s (${row.shared_cpu_s} CPU s), ` +
      `${ratio(own.s, shared.s)}× faster; same samples and log-probs: ${row.identical}`,
  );
  return row;
}

/** One precision's figures at a --shape. */
interface ShapeRun {
  precision: Precision;
  train: { step_s: number[]; tokens_per_s: number; first_loss: number };
  decode: { prefill_s: number; tokens_per_s: number };
  /** PyTorch on the same weights, ids and threads (--torch), else null. */
  torch: {
    train: { step_s: number[]; tokens_per_s: number; first_loss: number };
    decode: { prefill_s: number; tokens_per_s: number };
    peak_rss_mb: number;
    /** Sequences whose greedy tokens equal hacrl's over the first `steps` new tokens, and over all of them. */
    same_greedy_tokens: { steps: number; first_steps: number; all: number; of: number };
  } | null;
  hacrl_over_torch: { train: number; decode: number } | null;
  /** llama.cpp on the same weights exported to GGUF, at each of LLAMA_BATCHES sequences. */
  llama: LlamaShapeRow[];
  prefill: PrefillRow;
}

/** New tokens over which --shape --torch counts sequences whose greedy tokens agree with PyTorch's. */
const AGREE_STEPS = 4;

/** PyTorch's side of --shape --torch: its kernel choice and one run per precision. */
interface TorchShape {
  torch: string;
  blas: string;
  /** OPENBLAS_CORETYPE it ran with ('' = unset). */
  core: string;
  probes: TorchConfig[];
  runs: Map<Precision, TorchResult>;
}

/**
 * PyTorch on `model`'s weights (saved once to a temporary folder), the same train ids and decode prompts and
 * `threads`, one process per precision, each waited for: run before hacrl's own runs, its model never shares the
 * machine with hacrl's gradients, optimizer state and inference copies (this process holds only the weights).
 */
async function torchShapeRuns(
  model: Transformer,
  trainIds: number[][],
  prompts: number[][],
  threads: number,
): Promise<TorchShape> {
  const dir = await mkdtemp(join(tmpdir(), 'hacrl-bench-shape-'));
  try {
    await saveModel(dir, model);
    const probes = forcedCore === undefined ? probeTorchCores([threads]) : [];
    const core = forcedCore ?? probes[0]!.requested;
    const runs = new Map<Precision, TorchResult>();
    for (const precision of shapePrecisions) {
      const input = join(dir, `bench-input-${precision}.json`);
      await writeFile(
        input,
        JSON.stringify({
          checkpoint: dir,
          threads: [threads],
          precision,
          train: {
            ids: trainIds,
            prompt_len: TRAIN.promptLen,
            warmup: 1,
            steps: shapeSteps,
            adamw: { ...ADAMW, weight_decay: ADAMW.weightDecay },
          },
          decode: { prompts, batches: [prompts.length], new_tokens: DECODE.newTokens, repeats: 1 },
        }),
      );
      runs.set(precision, runTorch(input, core));
    }
    const first = runs.get(shapePrecisions[0]!)!;
    return { torch: first.torch, blas: first.blas, core, probes, runs };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function benchShape(name: string, k: Kernels, threads: number): Promise<void> {
  const cfg = shapeConfig(name);
  const fp32 = initModel(cfg, SEED);
  const n = matmulParams(fp32);
  log(
    `${name}: ${fp32.numParameters.toLocaleString('en-US')} parameters (${n.toLocaleString('en-US')} in matmuls), ` +
      `random weights, ${threads} threads, precision ${shapePrecisions.join(' and ')} (bf16: ${k.bf16})`,
  );
  // One draw of ids for every precision and for PyTorch, so that all see the same work.
  const rng = new Rng(SEED + 1);
  const trainIds = Array.from({ length: TRAIN.batch }, () => randomIds(rng, TRAIN.seqLen, cfg.vocabSize));
  const items = trainIds.map((ids) => ({
    prompt: ids.slice(0, TRAIN.promptLen),
    response: ids.slice(TRAIN.promptLen),
  }));
  const batch = HEADLINE.decodeBatch;
  const prompts = Array.from({ length: batch }, () => randomIds(rng, DECODE.promptLen, cfg.vocabSize));
  const llamaPrompts = Array.from({ length: Math.max(...LLAMA_BATCHES) }, () =>
    randomIds(rng, DECODE.promptLen, cfg.vocabSize),
  );
  const groupPrompts = Array.from({ length: PREFILL.prompts }, () => randomIds(rng, PREFILL.promptLen, cfg.vocabSize));
  const beforeTorch = cpuTicks();
  const torch = shapeTorch ? await torchShapeRuns(fp32, trainIds, prompts, threads) : null;
  const beforeHacrl = cpuTicks();
  if (torch)
    log(
      `torch ${torch.torch}, same weights, ids and threads (torch.set_num_threads and openblas_set_num_threads ` +
        `${threads}, OMP_WAIT_POLICY=PASSIVE); fp32 on ${torch.blas}, OPENBLAS_CORETYPE=${torch.core || 'unset'}` +
        (forcedCore === undefined
          ? ` (its fastest: ${torch.probes.map((p) => `${p.core}${p.requested ? '' : ' (auto)'} ${p.probe_s} s`).join(', ')})`
          : ', as asked') +
        '; bf16: torch.autocast("cpu", bfloat16) on oneDNN, fp32 masters and AdamW, fp32 loss, bf16 KV cache',
    );
  // The same weights at every precision: at bf16 fp32 masters whose products round them (full fine-tuning at bf16).
  const models = new Map(
    shapePrecisions.map((p) => [
      p,
      p === 'fp32' ? fp32 : new Transformer(cfg, fp32.params as Map<string, Tensor>, null, p),
    ]),
  );
  // Every decode run before any training, as each PyTorch process decodes its checkpoint before training it: the
  // greedy tokens of both sides, at every precision, come from the initial weights.
  const decodes = new Map<Precision, DecodeTiming>();
  for (const precision of shapePrecisions) {
    const model = models.get(precision)!;
    const decode = model.withInferenceWeights(() => {
      // An untimed short run first, as PyTorch's side has: the BLAS prepares its kernels for each new shape.
      decodeLoop(k, model, prompts, 2);
      return decodeLoop(k, model, prompts, DECODE.newTokens);
    });
    decodes.set(precision, decode);
    log(
      `  ${precision} decode: batch ${batch}, prompt ${DECODE.promptLen}, ${DECODE.newTokens} new tokens: prefill ` +
        `${round(decode.prefillS, 2)} s, ${fmt((batch * decode.stepS.length) / sum(decode.stepS))} tokens/s`,
    );
  }
  const llamaVersion = await llamaCppInfo();
  log(`  ${llamaVersion}: the same ${DECODE.promptLen}-token prompts and threads on both sides, f32 KV cache`);
  const llama = new Map<Precision, LlamaShapeRow[]>();
  for (const precision of shapePrecisions)
    llama.set(precision, await llamaShapeRuns(k, models.get(precision)!, llamaPrompts, threads));
  await closeLlamaCpp();
  const prefills = new Map(shapePrecisions.map((p) => [p, prefillRun(k, models.get(p)!, groupPrompts)]));
  const runs: ShapeRun[] = [];
  for (const precision of shapePrecisions) {
    const decode = decodes.get(precision)!;
    const decodeTps = (batch * decode.stepS.length) / sum(decode.stepS);
    const train = hacrlTrain(k, models.get(precision)!, items, shapeSteps);
    const trainTps = (TRAIN.batch * TRAIN.seqLen) / median(train.stepS);
    log(
      `  ${precision} train: B=${TRAIN.batch} × T=${TRAIN.seqLen}, ${round(median(train.stepS), 2)} s per step ` +
        `(median of ${shapeSteps}), ${fmt(trainTps)} tokens/s`,
    );
    const run: ShapeRun = {
      precision,
      train: { step_s: train.stepS, tokens_per_s: round(trainTps), first_loss: round(train.firstLoss, 5) },
      decode: { prefill_s: decode.prefillS, tokens_per_s: round(decodeTps) },
      torch: null,
      hacrl_over_torch: null,
      llama: llama.get(precision)!,
      prefill: prefills.get(precision)!,
    };
    const t = torch?.runs.get(precision)?.runs[0];
    if (t?.train && t.decode) {
      const td = t.decode[0]!;
      const tTrain = t.train.tokens / median(t.train.step_s);
      const tDecode = (batch * td.step_s.length) / sum(td.step_s);
      const steps = Math.min(AGREE_STEPS, DECODE.newTokens);
      const agree = (upTo: number): number =>
        decode.tokens.filter((seq, b) => seq.slice(0, upTo).every((tok, j) => tok === td.tokens[b]![j])).length;
      run.torch = {
        train: { step_s: t.train.step_s, tokens_per_s: round(tTrain), first_loss: round(t.train.first_loss, 5) },
        decode: { prefill_s: td.prefill_s, tokens_per_s: round(tDecode) },
        peak_rss_mb: round(torch!.runs.get(precision)!.peak_rss_mb),
        same_greedy_tokens: { steps, first_steps: agree(steps), all: agree(DECODE.newTokens), of: batch },
      };
      run.hacrl_over_torch = { train: ratio(trainTps, tTrain), decode: ratio(decodeTps, tDecode) };
      const same = run.torch.same_greedy_tokens;
      // Each torch process trains the initial weights; hacrl's later precisions train what the earlier ones left.
      const loss =
        precision === shapePrecisions[0]
          ? `first loss ${run.torch.train.first_loss}, hacrl ${run.train.first_loss}`
          : `first loss ${run.torch.train.first_loss} on the initial weights`;
      log(
        `  ${precision} torch train ${fmt(tTrain)} tokens/s (${loss}), decode ${fmt(tDecode)} tokens/s (prefill ` +
          `${round(td.prefill_s, 2)} s); peak resident memory ${fmt(run.torch.peak_rss_mb)} MiB; greedy tokens equal ` +
          `to hacrl's in ${same.first_steps}/${batch} sequences over the first ${steps}, ${same.all}/${batch} over ` +
          `all ${DECODE.newTokens}${precision === 'fp32' ? '' : ' (need not agree: the roundings differ)'}`,
      );
      log(
        `  ${precision} hacrl / torch: training ${run.hacrl_over_torch.train}×, decoding ` +
          `${run.hacrl_over_torch.decode}×`,
      );
    }
    runs.push(run);
  }
  const [a, b] = [runs.find((r) => r.precision === 'fp32'), runs.find((r) => r.precision === 'bf16')];
  const ratios =
    a && b
      ? {
          train: round(b.train.tokens_per_s / a.train.tokens_per_s, 2),
          decode: round(b.decode.tokens_per_s / a.decode.tokens_per_s, 2),
        }
      : null;
  const torchRatios =
    a?.torch && b?.torch
      ? {
          train: round(b.torch.train.tokens_per_s / a.torch.train.tokens_per_s, 2),
          decode: round(b.torch.decode.tokens_per_s / a.torch.decode.tokens_per_s, 2),
        }
      : null;
  // Cores other processes kept busy while each side ran: on a shared 2-core machine they move every figure.
  const background = {
    hacrl: backgroundCores(beforeHacrl, cpuTicks()),
    torch: torch ? backgroundCores(beforeTorch, beforeHacrl) : null,
  };
  if (ratios) log(`  bf16 / fp32, same run: training ${ratios.train}×, decoding ${ratios.decode}×`);
  if (torchRatios) log(`  torch bf16 / fp32: training ${torchRatios.train}×, decoding ${torchRatios.decode}×`);
  const peakRss = round(process.resourceUsage().maxRSS / 1024);
  log(`  peak resident memory ${fmt(peakRss)} MiB`);
  if (Math.max(background.hacrl ?? 0, background.torch ?? 0) > 0.1)
    log(
      `  WARNING: other processes kept ${background.hacrl} (hacrl part) / ${background.torch} (torch part) cores ` +
        'busy: these numbers are not trustworthy, rerun on an idle machine',
    );
  if (json)
    console.log(
      JSON.stringify({
        shape: name,
        threads,
        bf16: k.bf16,
        parameters: fp32.numParameters,
        matmul_parameters: n,
        train: { batch: TRAIN.batch, seq_len: TRAIN.seqLen, prompt_len: TRAIN.promptLen },
        decode: { batch: HEADLINE.decodeBatch, prompt_len: DECODE.promptLen, new_tokens: DECODE.newTokens },
        llama_cpp: llamaVersion,
        runs,
        bf16_over_fp32: ratios,
        background_cores: background,
        torch: torch
          ? {
              version: torch.torch,
              blas: torch.blas,
              openblas_coretype: torch.core || null,
              core_choice:
                forcedCore === undefined ? 'fastest of the probed kernels' : 'forced by --torch-openblas-core',
              core_probes: torch.probes,
              threading: 'torch.set_num_threads(n), openblas_set_num_threads(n), OMP_WAIT_POLICY=PASSIVE',
              bf16: 'torch.autocast("cpu", dtype=torch.bfloat16): forward and loss of training, all of decoding',
              bf16_over_fp32: torchRatios,
            }
          : null,
        peak_rss_mb: peakRss,
      }),
    );
}

async function main(): Promise<void> {
  const started = performance.now();
  const native = nativeBackend();
  if (!native) {
    console.error(`bench:model needs the native addon: ${nativeLoadError()}`);
    process.exit(1);
  }
  const k = engine();
  const maxThreads = native.maxThreads();
  if (shapeArg !== undefined) return benchShape(shapeArg, k, maxThreads);
  const threadCounts = quick ? [Math.min(2, maxThreads)] : maxThreads >= 2 ? [1, 2] : [1];
  const peakProbe = machinePeak(native, threadCounts);
  const peak = peakProbe.gflops;
  const models = quick ? MODELS.filter((m) => m.name !== '50M') : MODELS;

  log(`hacrl model benchmark — ${cpus()[0]?.model ?? 'cpu'}, ${maxThreads} threads`);
  log(`hacrl BLAS: ${k.blas}   (OPENBLAS_CORETYPE=${process.env.OPENBLAS_CORETYPE ?? 'unset'})`);
  log(`OpenMP wait policy: ${openmpWaitPolicy()}`);
  const llamaVersion = await llamaCppInfo();
  log(`${llamaVersion}: GGUF f32 of the same weights, f32 KV cache, same threads and prompts`);
  log(peakLine(peakProbe));
  log(
    `training: SFT loss on B=${TRAIN.batch} × T=${TRAIN.seqLen} (prompt ${TRAIN.promptLen}, loss on the rest), ` +
      `forward + backward + AdamW, 1 warm-up step, median of the timed steps; ` +
      `MFU = (6·N + 6·L·Hq·D·(T+1))·tokens/s / peak, N = matmul parameters`,
  );
  log(
    `decode: greedy, prompt ${DECODE.promptLen}, ${DECODE.newTokens} new tokens (1 from the prefill, ` +
      `${DECODE.newTokens - 1} from decode steps), no early stop; tokens/s = decode-step tokens / decode-step ` +
      `time (GC pauses included, prefill not: its time is shown apart) of the fastest of ${DECODE.repeats} runs on ` +
      `each side; MFU = (2·N + 4·L·Hq·D·keys)·tokens/s / peak`,
  );

  const probes = forcedCore === undefined ? probeTorchCores(threadCounts) : [];
  const bestCore = forcedCore ?? probes[0]!.requested;
  const torchCores = { best: bestCore, env: forcedCore !== undefined || bestCore === envCore ? null : envCore };
  const coreName = (c: string): string => (c ? c : 'unset');
  if (probes.length)
    log(
      `torch OpenBLAS kernels probed on the benchmark's products (s, ${threadCounts.join('+')} threads): ` +
        probes.map((p) => `${p.core}${p.requested ? '' : ' (auto)'} ${p.probe_s}`).join(', '),
    );
  const results: ModelResult[] = [];
  let torchInfo: Pick<TorchResult, 'torch' | 'blas'> | null = null;
  for (const s of models) {
    const { result, torch } = await benchModel(s, threadCounts, peak, k, torchCores);
    results.push(result);
    if (!torchInfo) {
      torchInfo = { torch: torch.torch, blas: torch.blas };
      log(
        `torch ${torch.torch} BLAS: ${torch.blas}   (OPENBLAS_CORETYPE=${coreName(bestCore)}` +
          `${forcedCore === undefined ? ', its fastest here' : ', as asked'}; ` +
          `torch.set_num_threads(n) and openblas_set_num_threads(n), OMP_WAIT_POLICY=PASSIVE)`,
      );
      if (torchCores.env !== null)
        log(`second torch column "env": the environment's OPENBLAS_CORETYPE=${coreName(envCore)}`);
    }
    const c = result.config;
    log(
      `\n${s.name}: hidden ${c.hidden}, ${c.layers} layers, ${c.heads} query / ${c.kv_heads} kv heads × ${c.head_dim}, ` +
        `intermediate ${c.intermediate}, vocab ${c.vocab} (tied) — ${result.params.toLocaleString('en-US')} parameters, ` +
        `${result.matmul_params.toLocaleString('en-US')} in matmuls`,
    );
    const envCol = (tps: number | null, r: number | null): string =>
      torchCores.env === null
        ? ''
        : `   ${tps === null ? '' : fmt(tps).padStart(8)} ${r === null ? '' : r.toFixed(2).padStart(6)}`;
    const envHead = torchCores.env === null ? '' : '   torch env  hacrl/env';
    log(`  training tokens/s        hacrl (MFU)        torch (MFU)   hacrl/torch${envHead}   first loss hacrl / torch`);
    for (const r of result.train)
      log(
        `    ${r.threads} thread(s)         ${fmt(r.hacrl_tokens_per_s).padStart(8)} (${r.hacrl_mfu.toFixed(3)})` +
          `   ${fmt(r.torch_tokens_per_s).padStart(8)} (${r.torch_mfu.toFixed(3)})   ${r.ratio_vs_torch.toFixed(2).padStart(8)}` +
          envCol(r.torch_env_tokens_per_s, r.ratio_vs_torch_env) +
          `      ${r.hacrl_first_loss} / ${r.torch_first_loss}`,
      );
    log(
      `  decode tokens/s          hacrl (MFU)        torch (MFU)   hacrl/torch${envHead}   prefill ms hacrl / torch   same tokens` +
        '   llama.cpp  hacrl/llama  prefill ms  same tokens',
    );
    for (const r of result.decode)
      log(
        `    ${r.threads} thread(s), B=${String(r.batch).padEnd(3)} ${fmt(r.hacrl_tokens_per_s).padStart(8)} (${r.hacrl_mfu.toFixed(3)})` +
          `   ${fmt(r.torch_tokens_per_s).padStart(8)} (${r.torch_mfu.toFixed(3)})   ${r.ratio_vs_torch.toFixed(2).padStart(8)}` +
          envCol(r.torch_env_tokens_per_s, r.ratio_vs_torch_env) +
          `      ${fmt(r.hacrl_prefill_ms)} / ${fmt(r.torch_prefill_ms)}`.padEnd(34) +
          `${r.greedy_agreement}`.padEnd(6) +
          `   ${fmt(r.llama_tokens_per_s).padStart(9)}  ${r.ratio_vs_llama.toFixed(2).padStart(11)}` +
          `  ${fmt(r.llama_prefill_ms).padStart(10)}  ${r.llama_greedy_agreement}`,
      );
    log(`  peak resident memory: hacrl ${result.peak_rss_mb.hacrl} MiB, torch ${result.peak_rss_mb.torch} MiB`);
    const bg = result.background_cores;
    if (Math.max(bg.hacrl ?? 0, bg.torch ?? 0, bg.torch_env ?? 0, bg.llama ?? 0) > 0.1)
      log(
        `  WARNING: other processes kept ${bg.hacrl} (hacrl part) / ${bg.torch} (torch part) / ${bg.torch_env} ` +
          `(torch env part) / ${bg.llama} (llama.cpp part) cores busy: multi-thread numbers of this model are not ` +
          'trustworthy, rerun on an idle machine',
      );
  }

  const headlineThreads = Math.max(...threadCounts);
  const headline = results.find((r) => r.name === HEADLINE.model)!;
  const trainRatio = headline.train.find((r) => r.threads === headlineThreads)!.ratio_vs_torch;
  const headlineDecode = headline.decode.find(
    (r) => r.threads === headlineThreads && r.batch === HEADLINE.decodeBatch,
  )!;
  const decodeRatio = headlineDecode.ratio_vs_torch;
  const llamaRatio = headlineDecode.ratio_vs_llama;
  const llamaBatch1 = headline.decode.find((r) => r.threads === headlineThreads && r.batch === 1)!.ratio_vs_llama;
  const cells = results.flatMap((m) => [
    ...m.train.map((r) => ({ ratio: r.ratio_vs_torch, cell: `${m.name} train ${r.threads}t` })),
    ...m.decode.map((r) => ({ ratio: r.ratio_vs_torch, cell: `${m.name} decode B=${r.batch} ${r.threads}t` })),
  ]);
  const minCell = cells.reduce((a, b) => (b.ratio < a.ratio ? b : a));
  const check = await generateCheck(k, headlineThreads);
  const basis = `${HEADLINE.model} model, ${headlineThreads} thread(s); decode at batch ${HEADLINE.decodeBatch}`;
  log(
    `\nheadline (${basis}): training ${trainRatio}× torch, decode ${decodeRatio}× torch ` +
      `(torch on OpenBLAS ${coreName(bestCore)}); lowest cell ${minCell.ratio}× (${minCell.cell}); ` +
      `decode ${llamaRatio}× llama.cpp (batch 1: ${llamaBatch1}×)`,
  );
  log(
    `generate() check (${HEADLINE.model}, B=${HEADLINE.decodeBatch}): same tokens as the timed loop: ${check.tokens_match_timed_loop}; ` +
      `${check.generate_tokens_per_s_with_prefill} tokens/s end to end (timed loop: ${check.timed_loop_tokens_per_s_with_prefill})`,
  );
  if ((check.background_cores ?? 0) > 0.1)
    log(`  WARNING: other processes kept ${check.background_cores} cores busy during this check`);
  await closeLlamaCpp();
  const wall = (performance.now() - started) / 1e3;
  log(`wall time ${round(wall)} s`);

  if (json)
    console.log(
      JSON.stringify({
        cpu: cpus()[0]?.model ?? 'unknown',
        threads: threadCounts,
        hacrl_blas: k.blas,
        openmp_wait_policy: openmpWaitPolicy(),
        torch_version: torchInfo?.torch ?? null,
        torch_blas: torchInfo?.blas ?? null,
        openblas_coretype: process.env.OPENBLAS_CORETYPE ?? null,
        torch_openblas_coretype: bestCore || null,
        torch_core_choice:
          forcedCore === undefined ? 'fastest of the probed kernels' : 'forced by --torch-openblas-core',
        torch_core_probes: probes,
        torch_env_openblas_coretype: torchCores.env === null ? null : torchCores.env || 'unset',
        torch_threading: 'torch.set_num_threads(n), openblas_set_num_threads(n), OMP_WAIT_POLICY=PASSIVE',
        peak_gflops: peak,
        peak_below_linear: peakProbe.below_linear,
        train_setup: { ...TRAIN, warmup_steps: 1, adamw: ADAMW },
        decode_setup: { ...DECODE, greedy: true, prefill_in_tokens_per_s: false },
        models: results,
        train_ratio_vs_torch: trainRatio,
        decode_ratio_vs_torch: decodeRatio,
        llama_cpp: llamaVersion,
        decode_ratio_vs_llama: llamaRatio,
        decode_ratio_vs_llama_batch1: llamaBatch1,
        ratio_basis: basis,
        lowest_cell: minCell,
        table: cells,
        generate_check: check,
        wall_s: round(wall),
      }),
    );
}

await main();
