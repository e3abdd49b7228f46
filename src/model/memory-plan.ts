/**
 * The estimated peak resident memory of an RL run, from each model's config and the run's sizes alone (no weights
 * read): what `hacrl plan` prints and what `hacrl train` checks before any work. Every part counts the buffers the
 * code allocates:
 *  - held all run, per agent: its weights, their gradients (allocated at the first backward and kept), AdamW's m and v
 *    (fp32), and a frozen copy of the weights as the KL reference;
 *  - held in one phase of a step: sampling (the [in, out] inference copies of withInferenceWeights, the KV cache of a
 *    generation batch, the prefill's activations, the logits), scoring the old log-probs (a pass without gradients
 *    keeps every layer's outputs in its arena until it ends) and training a mini-batch (the tape keeps every op's
 *    output and its saved statistics; the backward adds a gradient per output, recycled only when it ends).
 * Agents sample, score and train one after the other, so a run's peak is the process baseline, plus every agent's
 * held parts, plus the largest phase of any agent: phases are maxed over, not summed.
 */
import { capacityOf, MIN_POOL_CAP, MIN_POOLED } from '../tensor/grad-pool.js';
import { headChunkRows, KEEP_LOGITS_LIMIT } from '../tensor/ops.js';
import type { Precision } from '../tensor/bf16.js';
import type { TransformerConfig } from './hf-config.js';
import { adaptedModules, type LoraSettings } from './lora.js';
import { SCORE_BATCH_SIZE } from './response-log-probs.js';
import { embeddingTables, hfWeightNames, lookupOnlyTables, outerNames } from './weight-names.js';

/** Resident memory of the process before any model (Node, the native addon and its BLAS threads), bytes. */
export const PROCESS_BASELINE_BYTES = 160 * 2 ** 20;

const F32 = 4;
/** Bytes of a bfloat16 value. */
const BF16_BYTES = 2;

/** What one agent's estimate needs: its architecture and the sizes of its share of a step. */
export interface AgentMemoryInput {
  /** The agent's name (shown in the plan). */
  name: string;
  /** Its model's architecture (config.json). */
  cfg: TransformerConfig;
  /** Parameters that get gradients and AdamW state (LoRA: the adapters'); default every parameter of cfg. */
  trainableParameters?: number;
  /**
   * LoRA adapters (agents[].lora), default none: their parameter count and the floats their path keeps per token and
   * layer on a training tape (adapterMemory).
   */
  adapters?: { parameters: number; floatsPerToken: number };
  /** Another agent of the run whose frozen base this agent shares (its weights are counted there); default none. */
  sharesWeightsWith?: string;
  /**
   * Precision of its products (tensor/bf16.ts); default fp32. At bf16 a frozen base (LoRA) and the KL reference keep
   * their matrices as bfloat16 (2 bytes), trainable weights stay fp32 masters (rounded to bfloat16 copies for
   * sampling), and products round their operands into a kept scratch of bfloat16 bits. Gradients, optimizer and
   * activations stay fp32.
   */
  precision?: Precision;
  /**
   * Whether its checkpoint stores the embedding tables as BF16 (its safetensors headers say): a frozen bf16 copy then
   * keeps them as stored (2 bytes a value) and a head tied to them is multiplied without rounding; default false
   * (another dtype is widened to fp32 for lookups).
   */
  tablesBf16?: boolean;
  /** Whether this process samples and trains it; false: a partner, of which only the tokenizer is loaded; default true. */
  local?: boolean;
  /** Whether a frozen reference copy is kept (optim.klCoef > 0). */
  reference: boolean;
  /** Whether a step scores its responses without gradients (learner old log-probs, or a KL penalty); default true. */
  scores?: boolean;
  /** Sequences it samples per step (prompts × samples per prompt). */
  sequences: number;
  /** Sequences per generation call (the rest wait their turn). */
  generationBatch: number;
  /** Longest prompt in its tokens. */
  promptTokens: number;
  /** Longest response in tokens (maxNewTokens). */
  maxNewTokens: number;
  /** Sequences it trains on per step: its own, plus the foreign ones when rollouts are shared. */
  trainSequences: number;
  /** Optimizer updates per epoch over them (optim.miniBatches). */
  miniBatches: number;
  /** Whether training recomputes each block in the backward (optim.activationCheckpointing). */
  checkpointing: boolean;
}

/** The phases of a step: nothing of one outlives it, and no two run at once. */
export type MemoryPhase = 'sampling' | 'scoring' | 'training';
/** When a part is held: the whole run, or one phase. */
export type MemoryHeld = 'run' | MemoryPhase;

/** One part of an agent's estimate. */
export interface MemoryPart {
  /** What it is, e.g. 'weights', 'KV cache'. */
  name: string;
  /** When it is held. */
  held: MemoryHeld;
  bytes: number;
}

/** One agent's estimate. */
export interface AgentMemoryPlan {
  name: string;
  parts: MemoryPart[];
  /** Bytes held the whole run. */
  resident: number;
  /** Bytes of its largest phase, and which. */
  phase: { name: MemoryPhase; bytes: number };
}

/** A run's estimate. */
export interface MemoryPlan {
  agents: AgentMemoryPlan[];
  /** PROCESS_BASELINE_BYTES, or what the caller measured. */
  baseline: number;
  /** The agent and phase whose working set tops the others (null without a local agent). */
  peakPhase: { agent: string; name: MemoryPhase; bytes: number } | null;
  /** baseline + every agent's resident bytes + the largest phase: the estimated peak resident memory, bytes. */
  total: number;
}

/**
 * Floats per token and layer that a forward pass keeping every buffer holds (a training tape, or an untracked pass's
 * arena): `outputs` of the ops (each gets a gradient in the backward) and `saved` statistics (norms' inverse RMS or
 * mean and rstd, attention's log-sum-exp). `fusedQkv`: the prefill multiplies by one fused q/k/v copy and splits it.
 */
export function blockFloats(cfg: TransformerConfig, fusedQkv = false): { outputs: number; saved: number } {
  const { hidden: d, heads, kvHeads, headDim, intermediate } = cfg;
  const q = heads * headDim;
  const kv = kvHeads * headDim;
  // norm1, o projection, residual, norm2, down projection, residual
  let outputs = 6 * d + q; // + attention output
  let saved = 2 * (cfg.norm.kind === 'layernorm' ? 2 : 1) + heads;
  if (cfg.family === 'gpt2')
    outputs += 2 * (q + 2 * kv); // c_attn, then its three column blocks
  else {
    outputs += q + 2 * kv;
    if (fusedQkv) saved += q + 2 * kv;
  }
  if (cfg.qkNorm) {
    outputs += q + kv;
    saved += heads + kvHeads;
  }
  if (cfg.position.kind === 'rope') outputs += q + kv;
  outputs += (cfg.gatedMlp ? 3 : 2) * intermediate;
  return { outputs, saved };
}

/** Floats per token outside the blocks: embeddings (and learned positions with their sum) and the final norm. */
function outerFloats(cfg: TransformerConfig): number {
  const d = cfg.hidden;
  const positions = cfg.position.kind === 'learned' ? 2 * d : 0;
  return d + positions + d + (cfg.norm.kind === 'layernorm' ? 2 : 1);
}

/**
 * Floats a forward pass over `rows` tokens holds until it ends, the head's logits left out: every block's buffers
 * (blockFloats) and the outer ones, or with `outputsOnly` (activation checkpointing, and every pass without a tape:
 * ops.checkpoint) each block's output, its other buffers living only while it runs.
 */
export function forwardFloats(
  cfg: TransformerConfig,
  rows: number,
  o: { outputsOnly?: boolean; fusedQkv?: boolean } = {},
): number {
  const b = blockFloats(cfg, o.fusedQkv);
  return rows * (cfg.layers * (o.outputsOnly ? cfg.hidden : b.outputs + b.saved) + outerFloats(cfg));
}

/** Floats of one block's buffers over `rows` tokens: what a pass holding only block outputs adds while a block runs. */
function oneBlock(cfg: TransformerConfig, rows: number, fusedQkv = false): number {
  const b = blockFloats(cfg, fusedQkv);
  return rows * (b.outputs + b.saved);
}

/** Floats of the head's logits a pass over `rows` rows holds: all of them while training under the limit, else a chunk. */
function headFloats(cfg: TransformerConfig, rows: number, training: boolean): number {
  const vocab = cfg.vocabSize;
  const keep = training && rows * vocab <= KEEP_LOGITS_LIMIT;
  // log-prob, log-sum-exp and entropy per row besides the logits
  return (keep ? rows : Math.min(headChunkRows(vocab), rows)) * vocab + 3 * rows;
}

/**
 * Bytes of a frozen copy of the weights: at bf16 its matrices are bfloat16 (weights.ts loadModel), vectors fp32, and
 * embedding tables bfloat16 when the checkpoint stores them so (`tablesBf16`), else fp32.
 */
function frozenWeightBytes(cfg: TransformerConfig, precision: Precision, tablesBf16: boolean): number {
  const lookups = embeddingTables(cfg);
  let n = 0;
  for (const w of hfWeightNames(cfg)) {
    const size = w.shape.reduce((a, b) => a * b, 1);
    const bits = w.shape.length === 2 && precision === 'bf16' && (tablesBf16 || !lookups.has(w.name));
    n += size * (bits ? BF16_BYTES : F32);
  }
  return n;
}

/**
 * Bytes of the scratch bf16 products round their operands into, kept once grown (tensor/bf16.ts productOperand), as
 * bfloat16 bits: the widest input and output gradient over `rows` rows (the head's gradient a chunk of logits), and
 * the largest weight when the weights are trainable fp32 masters (a frozen base is stored as bfloat16 and read as is,
 * but for a head tied to an fp32 embedding table: `tablesBf16` false).
 */
function bf16OperandBytes(cfg: TransformerConfig, rows: number, frozenBase: boolean, tablesBf16: boolean): number {
  // A frozen base rounds only an fp32 table that is also its head (tied embeddings of a non-BF16 checkpoint).
  const tiedHead = !tablesBf16 && embeddingTables(cfg).has(outerNames(cfg).head);
  let largest = 0;
  for (const w of hfWeightNames(cfg))
    if (w.shape.length === 2 && (!frozenBase || (tiedHead && w.name === outerNames(cfg).head)))
      largest = Math.max(largest, w.shape[0]! * w.shape[1]!);
  const widest = rows * Math.max(cfg.hidden, cfg.intermediate, cfg.heads * cfg.headDim);
  const headGradient = Math.min(headChunkRows(cfg.vocabSize), rows) * cfg.vocabSize;
  return (largest + widest + Math.max(widest, headGradient)) * BF16_BYTES;
}

/** Bytes of the [in, out] copies withInferenceWeights makes: every matrix but the lookup-only embedding tables. */
function inferenceCopyBytes(cfg: TransformerConfig): number {
  const lookupOnly = lookupOnlyTables(cfg);
  let n = 0;
  for (const w of hfWeightNames(cfg))
    if (w.shape.length === 2 && !lookupOnly.has(w.name)) n += w.shape[0]! * w.shape[1]!;
  return n * F32;
}

/** Bytes of fp32 gradients of every parameter as the gradient pool allocates them (rounded up to its size classes). */
function fullGradientBytes(cfg: TransformerConfig): number {
  let n = 0;
  for (const w of hfWeightNames(cfg)) {
    const size = w.shape.reduce((a, b) => a * b, 1);
    n += size < MIN_POOLED ? size : capacityOf(size);
  }
  return n * F32;
}

/**
 * The plan's view of LoRA adapters on `cfg`: their parameters and the floats their path keeps per token and layer on a
 * training tape (lora.ts apply: per adapted projection the [rows, rank] down product, and with dropout a one-byte mask
 * per input).
 */
export function adapterMemory(cfg: TransformerConfig, s: LoraSettings): NonNullable<AgentMemoryInput['adapters']> {
  const modules = adaptedModules(cfg, s);
  let floats = 0;
  for (const m of modules) floats += s.rank + (s.dropout > 0 ? m.inF / F32 : 0);
  return {
    parameters: modules.reduce((n, m) => n + s.rank * (m.inF + m.outF), 0),
    floatsPerToken: floats / cfg.layers,
  };
}

/**
 * What sampling one generation batch of `batch` sequences holds besides the weights (bytes): the inference copies of the
 * matrices (at bf16 bfloat16 roundings of them, none for a frozen base held as bfloat16), the KV cache of prompt + new
 * tokens, and a prefill's block outputs and one block (ops.checkpoint) or, decoding, the batch's logits and
 * probabilities.
 */
export function samplingParts(
  cfg: TransformerConfig,
  precision: Precision,
  frozenBase: boolean,
  batch: number,
  promptTokens: number,
  maxNewTokens: number,
): MemoryPart[] {
  const { layers, kvHeads, headDim, vocabSize } = cfg;
  const length = promptTokens + maxNewTokens;
  const prefillRows = batch * promptTokens;
  const prefill =
    forwardFloats(cfg, prefillRows, { outputsOnly: true, fusedQkv: true }) + oneBlock(cfg, prefillRows, true);
  const copies =
    precision === 'bf16' ? (frozenBase ? 0 : (inferenceCopyBytes(cfg) / F32) * BF16_BYTES) : inferenceCopyBytes(cfg);
  return [
    ...(copies > 0 ? [{ name: 'inference weight copies', held: 'sampling' as const, bytes: copies }] : []),
    { name: 'KV cache', held: 'sampling', bytes: 2 * layers * batch * kvHeads * length * headDim * F32 },
    { name: 'prefill activations and logits', held: 'sampling', bytes: (prefill + 2 * batch * vocabSize) * F32 },
  ];
}

/** The bytes of `parts` together. */
export const sumBytes = (parts: readonly MemoryPart[]): number => parts.reduce((n, p) => n + p.bytes, 0);

/** One agent's parts and its largest phase. */
export function agentMemory(a: AgentMemoryInput): AgentMemoryPlan {
  // A partner's weights stay with the process that trains it (src/train/learners.ts Partner).
  if (a.local === false) return { name: a.name, parts: [], resident: 0, phase: { name: 'sampling', bytes: 0 } };
  const { cfg } = a;
  const total = hfWeightNames(cfg).reduce((n, w) => n + w.shape.reduce((x, y) => x * y, 1), 0);
  const trainable = a.adapters?.parameters ?? a.trainableParameters ?? total;
  const precision = a.precision ?? 'fp32';
  const tablesBf16 = a.tablesBf16 ?? false;
  // Trainable weights are fp32 masters; a LoRA agent's base is frozen.
  const weightBytes = trainable < total ? frozenWeightBytes(cfg, precision, tablesBf16) : total * F32;
  const bf16 = precision === 'bf16';
  const parts: MemoryPart[] = [
    a.sharesWeightsWith === undefined
      ? { name: 'weights', held: 'run', bytes: weightBytes }
      : { name: `weights (shared with ${a.sharesWeightsWith})`, held: 'run', bytes: 0 },
  ];
  // The adapter path's buffers per token: each layer's on a tape; one layer's in a pass that keeps block outputs only.
  const adapterFloats = a.adapters?.floatsPerToken ?? 0;
  if (a.adapters) {
    parts.push({ name: 'LoRA adapters', held: 'run', bytes: a.adapters.parameters * F32 });
  }
  parts.push(
    {
      name: 'gradients',
      held: 'run',
      bytes: trainable === total ? fullGradientBytes(cfg) : trainable * F32,
    },
    { name: 'AdamW m and v', held: 'run', bytes: 2 * trainable * F32 },
  );
  if (a.reference)
    parts.push({ name: 'KL reference', held: 'run', bytes: frozenWeightBytes(cfg, precision, tablesBf16) });
  const { layers } = cfg;
  const length = a.promptTokens + a.maxNewTokens;
  const batch = Math.min(a.generationBatch, a.sequences);
  const prefillRows = batch * a.promptTokens;
  const sampling = samplingParts(cfg, precision, trainable < total, batch, a.promptTokens, a.maxNewTokens);
  parts.push(...sampling);
  // Scoring (old log-probs, the KL reference's): SCORE_BATCH_SIZE sequences per pass, block outputs and one block.
  const scoreRows = a.scores === false ? 0 : Math.min(SCORE_BATCH_SIZE, a.sequences) * length;
  if (scoreRows > 0)
    parts.push({
      name: 'scoring activations',
      held: 'scoring',
      bytes:
        (forwardFloats(cfg, scoreRows, { outputsOnly: true }) +
          oneBlock(cfg, scoreRows) +
          scoreRows * adapterFloats +
          headFloats(cfg, scoreRows, false)) *
        F32,
    });
  // Training: one mini-batch's forward passes, and in the backward a gradient for every op's output; under
  // checkpointing those of each block's output, plus one block recomputed with its gradients and its input's.
  const rows = Math.ceil(a.trainSequences / a.miniBatches) * length;
  const plain = blockFloats(cfg);
  const gradients = a.checkpointing
    ? rows * (layers * cfg.hidden + outerFloats(cfg) + plain.outputs + plain.saved + plain.outputs + cfg.hidden)
    : rows * (layers * plain.outputs + outerFloats(cfg));
  // What the adapter path keeps, for every layer or for the one recomputed.
  const adapterTraining = rows * adapterFloats * (a.checkpointing ? 1 : layers);
  const training =
    (forwardFloats(cfg, rows, { outputsOnly: a.checkpointing }) +
      gradients +
      adapterTraining +
      headFloats(cfg, rows, true)) *
    F32;
  parts.push(
    { name: 'training activations', held: 'training', bytes: training },
    // Sampling starts by trimming the pool to what fits beside its own parts under the training pass's peak, at
    // least MIN_POOL_CAP (grad-pool.ts trimPool).
    {
      name: 'pooled training buffers',
      held: 'sampling',
      bytes: Math.min(training, Math.max(MIN_POOL_CAP * F32, training - sumBytes(sampling))),
    },
  );
  // Grown by the largest pass of any phase and kept; one per process (planMemory counts the largest agent's).
  if (bf16)
    parts.push({
      name: SCRATCH,
      held: 'run',
      bytes: bf16OperandBytes(cfg, Math.max(prefillRows, scoreRows, rows), trainable < total, tablesBf16),
    });
  const resident = sumBytes(parts.filter((p) => p.held === 'run'));
  let phase: AgentMemoryPlan['phase'] = { name: 'sampling', bytes: 0 };
  for (const name of ['sampling', 'scoring', 'training'] as const) {
    const bytes = sumBytes(parts.filter((p) => p.held === name));
    if (bytes > phase.bytes) phase = { name, bytes };
  }
  return { name: a.name, parts, resident, phase };
}

/** The name of the bf16 operand scratch part. */
const SCRATCH = 'bf16 operand scratch';

/**
 * `plans` with the bf16 operand scratch counted once: the process keeps one scratch per operand, grown by the largest
 * pass of any agent, so every agent but the one with the largest scratch shows it as shared (0 bytes).
 */
function oneScratch(plans: AgentMemoryPlan[]): AgentMemoryPlan[] {
  const bytes = (p: AgentMemoryPlan): number => p.parts.find((x) => x.name === SCRATCH)?.bytes ?? 0;
  const owner = plans.reduce<AgentMemoryPlan | null>(
    (best, p) => (bytes(p) > (best ? bytes(best) : 0) ? p : best),
    null,
  );
  if (!owner) return plans;
  return plans.map((p) => {
    const b = bytes(p);
    if (p === owner || b === 0) return p;
    const parts = p.parts.map((x) =>
      x.name === SCRATCH ? { ...x, name: `${SCRATCH} (shared with ${owner.name})`, bytes: 0 } : x,
    );
    return { ...p, parts, resident: p.resident - b };
  });
}

/**
 * The run's estimate: baseline + every agent's resident parts (the bf16 operand scratch once per process) + the
 * largest phase of any agent.
 */
export function planMemory(agents: readonly AgentMemoryInput[], baseline = PROCESS_BASELINE_BYTES): MemoryPlan {
  const plans = oneScratch(agents.map(agentMemory));
  let peakPhase: MemoryPlan['peakPhase'] = null;
  for (const p of plans)
    if (p.phase.bytes > 0 && (!peakPhase || p.phase.bytes > peakPhase.bytes)) peakPhase = { agent: p.name, ...p.phase };
  const resident = plans.reduce((n, p) => n + p.resident, 0);
  return { agents: plans, baseline, peakPhase, total: baseline + resident + (peakPhase?.bytes ?? 0) };
}
