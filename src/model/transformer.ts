/**
 * One decoder-only transformer for the Llama, Qwen2, Qwen3 and GPT-2 families, configured by a TransformerConfig.
 * Parameters live under their Hugging Face names; every linear weight is held as [out, in] (GPT-2's Conv1D weights
 * are transposed when read and written, see weights.ts). The same block code serves training (full sequences, on the
 * tape), prefill and one-token decoding against a KV cache: only the attention step differs. Inference passes may
 * multiply by fused [in, out] weight copies (inference-weights.ts); decode.ts holds the allocation-free decoding step.
 */
import type { Kernels } from '../backend/kernels.js';
import {
  add,
  attention,
  checkpoint,
  embedding,
  gelu,
  layerNorm,
  linear,
  lmHeadLogProbs,
  maskUndecodable,
  rmsNorm,
  rope,
  swiglu,
  splitColumns,
} from '../tensor/ops.js';
import { productOperand, type Precision } from '../tensor/bf16.js';
import { f32ToBf16 } from '../tensor/half.js';
import { Arena, type Ctx } from '../tensor/tape.js';
import { Tensor } from '../tensor/tensor.js';
import type { TransformerConfig } from './hf-config.js';
import { fusedDecodeApplies, fusedDecodeStep } from './decode.js';
import {
  buildInferenceWeights,
  copyLocation,
  gateUpProduct,
  qkvProduct,
  type FusedGateUp,
  type FusedQkv,
  type InferenceWeights,
} from './inference-weights.js';
import { ropeTables } from './rope.js';
import type { KVCache } from './kv-cache.js';
import type { LoraAdapters } from './lora.js';
import { blockNames, hfWeightNames, lookupOnlyTables, outerNames } from './weight-names.js';

/** Every parameter's name and shape in our layout: Hugging Face's, with GPT-2's Conv1D weights as [out, in]. */
export function parameterShapes(cfg: TransformerConfig): Map<string, number[]> {
  return new Map(hfWeightNames(cfg).map((w) => [w.name, w.transposed ? [w.shape[1]!, w.shape[0]!] : w.shape]));
}

/**
 * How one forward pass attends, in the context it is given (a checkpointed block runs twice, in two contexts): the
 * training/prefill path over whole sequences, or a decoding step over a cache.
 */
type Attend = (ctx: Ctx, layer: number, q: Tensor, k: Tensor, v: Tensor) => Tensor;

/** The rows of a forward pass: B sequences of T tokens, right- or left-padded. */
export interface Batch {
  /** Token ids, [batch·seqLen] row-major. */
  ids: Int32Array;
  batch: number;
  seqLen: number;
  /**
   * Per sequence, the index of its first real token (left padding before it is masked out of attention and its
   * positions start there); default all 0. Right padding needs nothing: causal attention never looks ahead.
   */
  keyStart?: Int32Array;
}

/** A transformer with its parameters. */
export class Transformer {
  readonly cfg: TransformerConfig;
  /** Parameters by Hugging Face name, linear weights as [out, in]. */
  readonly params: Map<string, Tensor>;
  private rotary: { cos: Float32Array; sin: Float32Array; maxPos: number } | null = null;
  /** [in, out] copies of the weights (q/k/v and gate/up fused) while withInferenceWeights runs; null otherwise. */
  private inference: InferenceWeights | null = null;
  /**
   * At bf16, the matrices inference passes multiply by, rounded to bfloat16 once while withInferenceWeights runs (a
   * trainable fp32 master would otherwise be rounded at every decode step); null otherwise.
   */
  private rounded: Map<string, Tensor> | null = null;

  /** LoRA adapters on some projections (the params then stay frozen), or null for a plain model. */
  readonly adapters: LoraAdapters | null;
  /** Precision of the projections' and the head's products (tensor/bf16.ts); default fp32. */
  readonly precision: Precision;

  constructor(
    cfg: TransformerConfig,
    params: Map<string, Tensor>,
    adapters: LoraAdapters | null = null,
    precision: Precision = 'fp32',
  ) {
    this.cfg = cfg;
    this.adapters = adapters;
    this.precision = precision;
    const want = parameterShapes(cfg);
    for (const [name, shape] of want) {
      const t = params.get(name);
      if (!t)
        throw new Error(`missing tensor "${name}" (expected shape [${shape.join(', ')}]) for a ${cfg.family} model`);
      if (t.shape.length !== shape.length || t.shape.some((s, i) => s !== shape[i]))
        throw new Error(`tensor "${name}" has shape [${t.shape.join(', ')}], the config needs [${shape.join(', ')}]`);
    }
    for (const [name, t] of params) {
      if (!want.has(name)) throw new Error(`unexpected tensor "${name}" for a ${cfg.family} model with this config`);
      if (t.bf16 && precision !== 'bf16')
        throw new Error(`tensor "${name}" is stored as bfloat16: the model needs precision bf16, got ${precision}`);
    }
    if (cfg.activation !== 'silu' && cfg.gatedMlp)
      throw new Error(`gated MLPs are supported with silu only (got ${cfg.activation})`);
    if (!cfg.gatedMlp && cfg.activation !== 'gelu_new' && cfg.activation !== 'gelu_pytorch_tanh')
      throw new Error(`non-gated MLPs are supported with the tanh GELU only (gelu_new), got ${cfg.activation}`);
    this.params = params;
  }

  /** Ids the tokenizer can decode: the rows below it; the rest get zero probability (TransformerConfig.decodableIds). */
  get decodableIds(): number {
    return this.cfg.decodableIds ?? this.cfg.vocabSize;
  }

  /** Parameter by name. */
  p(name: string): Tensor {
    const t = this.params.get(name);
    if (!t) throw new Error(`no parameter "${name}"`);
    return t;
  }

  /** Total number of parameters (a tied head counted once). */
  get numParameters(): number {
    let n = 0;
    for (const t of this.params.values()) n += t.size;
    return n;
  }

  /** The parameters training updates: the adapters' of a LoRA model, all of them otherwise. */
  get trainable(): Map<string, Tensor> {
    return this.adapters?.params ?? this.params;
  }

  private optional(name: string): Tensor | undefined {
    return this.params.get(name);
  }

  /** cos/sin tables covering positions [0, needed), grown on demand. */
  rotaryTables(needed: number): { cos: Float32Array; sin: Float32Array } {
    if (!this.rotary || this.rotary.maxPos < needed) {
      const maxPos = Math.max(needed, this.rotary ? 2 * this.rotary.maxPos : 256);
      this.rotary = { ...ropeTables(this.cfg, maxPos), maxPos };
    }
    return this.rotary;
  }

  private norm(ctx: Ctx, x: Tensor, name: string): Tensor {
    const w = this.p(`${name}.weight`);
    if (this.cfg.norm.kind === 'rmsnorm') return rmsNorm(ctx, x, w, this.cfg.norm.eps);
    return layerNorm(ctx, x, w, this.p(`${name}.bias`), this.cfg.norm.eps);
  }

  private lin(ctx: Ctx, x: Tensor, name: string): Tensor {
    const wT = ctx.tape === null ? this.inference?.transposed.get(`${name}.weight`) : undefined;
    const w = this.weight(ctx.tape === null, `${name}.weight`);
    const y = linear(ctx, x, w, this.optional(`${name}.bias`), wT, this.precision);
    // Inference copies hold the adapters merged in (buildInference).
    return this.adapters && !wT ? this.adapters.apply(ctx, x, name, y) : y;
  }

  /**
   * The inference copies, holding W + (alpha/rank)·B·A where adapters exist: sampling then multiplies by the merged
   * weights while training log-probs take the two products apart, so the two differ by float rounding — the mismatch
   * optim.rolloutCorrection exists to correct.
   */
  private buildInference(): InferenceWeights {
    const iw = buildInferenceWeights(this.cfg, this.params);
    this.adapters?.addToCopies((name, outF) => copyLocation(this.cfg, iw, name, outF));
    return iw;
  }

  /** The fused inference copies of block i, when this is an inference pass inside withInferenceWeights. */
  private fused(ctx: Ctx, i: number): { qkv?: FusedQkv; gateUp?: FusedGateUp } {
    if (ctx.tape !== null || !this.inference) return {};
    return { qkv: this.inference.qkv.get(i), gateUp: this.inference.gateUp.get(i) };
  }

  /** Weight `name` as a product reads it: in an inference pass at bf16 its rounded copy, else the parameter. */
  private weight(inference: boolean, name: string): Tensor {
    return (inference && this.rounded?.get(name)) || this.p(name);
  }

  /** bfloat16 copies of the matrices products read that are held as fp32 (a frozen bf16 base needs none). */
  private buildRounded(): Map<string, Tensor> {
    const lookupOnly = lookupOnlyTables(this.cfg);
    const out = new Map<string, Tensor>();
    for (const [name, t] of this.params)
      if (t.shape.length === 2 && !t.bf16 && !lookupOnly.has(name))
        out.set(name, new Tensor(f32ToBf16(t.data), t.shape));
    return out;
  }

  /**
   * Runs `fn` with [in, out] copies of every matrix the forward pass multiplies by (the head included), which
   * inference passes use instead of the [out, in] originals: for decode-sized inputs the plain product is 2–4× faster
   * than the transposed one (bench:model), and q/k/v and gate/up become one product each. The copies are made once
   * per call (weights must not change inside `fn`) and dropped afterwards; meanwhile they cost one more copy of those
   * weights in memory. A bf16 model makes no layout copies but rounds its fp32 matrices to bfloat16 copies once
   * (half the bytes of one more copy); its adapters stay apart (merged ones rounded to bf16 would lose small updates).
   */
  withInferenceWeights<T>(fn: () => T): T {
    const release = this.holdInferenceWeights();
    try {
      return fn();
    } finally {
      release();
    }
  }

  /**
   * Makes the inference copies of withInferenceWeights and keeps them until the returned function is called (once:
   * later calls do nothing), for a decode loop that yields to the event loop between steps (a server). The weights
   * must not change meanwhile.
   */
  holdInferenceWeights(): () => void {
    if (this.inference || this.rounded) return () => {};
    if (this.precision === 'bf16') this.rounded = this.buildRounded();
    else this.inference = this.buildInference();
    let held = true;
    return () => {
      if (held) [this.inference, this.rounded] = [null, null];
      held = false;
    };
  }

  /** One block: pre-norm attention and MLP, each with a residual connection. positions: [rows]. */
  private block(ctx: Ctx, i: number, x: Tensor, positions: Int32Array, attend: Attend): Tensor {
    const { heads, kvHeads, headDim } = this.cfg;
    const n = blockNames(this.cfg, i);
    const fused = this.fused(ctx, i);
    const h = this.norm(ctx, x, n.norm1);
    let q: Tensor;
    let k: Tensor;
    let v: Tensor;
    if (n.qkv)
      [q, k, v] = splitColumns(ctx, this.lin(ctx, h, n.qkv), [heads * headDim, kvHeads * headDim, kvHeads * headDim]);
    else if (fused.qkv) [q, k, v] = qkvProduct(ctx, h, fused.qkv);
    else [q, k, v] = [this.lin(ctx, h, n.q!), this.lin(ctx, h, n.k!), this.lin(ctx, h, n.v!)];
    if (n.qNorm) {
      q = rmsNorm(ctx, q.reshape([q.size / headDim, headDim]), this.p(`${n.qNorm}.weight`), this.cfg.norm.eps);
      k = rmsNorm(ctx, k.reshape([k.size / headDim, headDim]), this.p(`${n.kNorm}.weight`), this.cfg.norm.eps);
    }
    if (this.cfg.position.kind === 'rope') {
      const last = positions.reduce((m, p) => Math.max(m, p), 0); // no spread: 100k+ arguments overflow the stack
      if (last >= this.cfg.maxPositions)
        throw new Error(
          `position ${last} is past the model's ${this.cfg.maxPositions} positions (max_position_embeddings)`,
        );
      const { cos, sin } = this.rotaryTables(last + 1);
      q = rope(ctx, q, positions, cos, sin, heads, headDim);
      k = rope(ctx, k, positions, cos, sin, kvHeads, headDim);
    }
    const a = attend(
      ctx,
      i,
      q.reshape([positions.length, heads * headDim]),
      k.reshape([positions.length, kvHeads * headDim]),
      v,
    );
    const x2 = add(ctx, x, this.lin(ctx, a, n.o));
    const h2 = this.norm(ctx, x2, n.norm2);
    const act = fused.gateUp
      ? gateUpProduct(ctx, h2, fused.gateUp)
      : this.cfg.gatedMlp
        ? swiglu(ctx, this.lin(ctx, h2, n.gate!), this.lin(ctx, h2, n.up))
        : gelu(ctx, this.lin(ctx, h2, n.up));
    return add(ctx, x2, this.lin(ctx, act, n.down));
  }

  /** Token (+ learned position) embeddings of the rows. */
  private embed(ctx: Ctx, ids: Int32Array, positions: Int32Array): Tensor {
    const outer = outerNames(this.cfg);
    const x = embedding(ctx, this.p(outer.embed), ids);
    if (!outer.positions) return x;
    const maxPos = this.cfg.maxPositions;
    for (const pos of positions)
      if (pos >= maxPos) throw new Error(`position ${pos} exceeds the learned position table (${maxPos} positions)`);
    return add(ctx, x, embedding(ctx, this.p(outer.positions), positions));
  }

  private hiddenStates(ctx: Ctx, ids: Int32Array, positions: Int32Array, attend: Attend): Tensor {
    let x = this.embed(ctx, ids, positions);
    // A pass without a tape keeps only each block's output; a tape, only under checkpointing (ops.checkpoint).
    for (let i = 0; i < this.cfg.layers; i++)
      x =
        ctx.checkpointing || ctx.tape === null
          ? checkpoint(ctx, x, (c, input) => this.block(c, i, input, positions, attend))
          : this.block(ctx, i, x, positions, attend);
    return this.norm(ctx, x, outerNames(this.cfg).finalNorm);
  }

  /** The language-model head weight [V, hidden]. */
  get head(): Tensor {
    return this.p(outerNames(this.cfg).head);
  }

  /**
   * Final hidden states [B·T, hidden] of whole sequences (training and scoring). With a cache, also stores every
   * layer's keys and values into it (prefill).
   */
  forward(ctx: Ctx, b: Batch, cache?: KVCache): Tensor {
    const { batch, seqLen } = b;
    if (b.ids.length !== batch * seqLen)
      throw new Error(`forward: ${b.ids.length} ids for batch ${batch} × seqLen ${seqLen}`);
    const positions = batchPositions(batch, seqLen, b.keyStart);
    const shape = { batch, seqLen, queryHeads: this.cfg.heads, kvHeads: this.cfg.kvHeads, headDim: this.cfg.headDim };
    const hidden = this.hiddenStates(ctx, b.ids, positions, (c, layer, q, k, v) => {
      cache?.writeSequence(c.k, layer, k.data, v.data, seqLen);
      return attention(c, q, k, v, shape, b.keyStart);
    });
    cache?.setLength(seqLen);
    return hidden;
  }

  /**
   * log π(next token) for every position: targets[r] is the token after row r (negative: ignored row). Returns the
   * per-row log-probs (differentiable) and, when asked, the entropy of each row's distribution.
   */
  tokenLogProbs(ctx: Ctx, b: Batch, targets: Int32Array, options: { entropy?: boolean } = {}) {
    return lmHeadLogProbs(ctx, this.forward(ctx, b), this.head, targets, {
      ...options,
      precision: this.precision,
      decodableIds: this.decodableIds,
    });
  }

  /**
   * Logits [rows, V] of the given hidden rows (no gradient; sampling), ids the tokenizer cannot decode masked, written into `out` (default: a new array; a
   * decode loop passes the same buffer every step).
   */
  logits(
    k: Kernels,
    hidden: Float32Array,
    rows: number,
    out: Float32Array = new Float32Array(rows * this.cfg.vocabSize),
  ): Float32Array {
    const { vocabSize: vocab, hidden: dim } = this.cfg;
    const headT = this.inference?.transposed.get(outerNames(this.cfg).head);
    if (headT) k.gemm({ m: rows, n: vocab, k: dim, a: { data: hidden }, b: { data: headT }, c: { data: out } });
    else
      k.gemm({
        transB: true,
        m: rows,
        n: vocab,
        k: dim,
        a: { data: productOperand(k, hidden, this.precision, 'input') },
        b: { data: productOperand(k, this.weight(true, outerNames(this.cfg).head), this.precision, 'weight') },
        c: { data: out },
      });
    maskUndecodable(out, rows, vocab, this.decodableIds);
    return out;
  }

  /**
   * One decoding step: each sequence's next token `ids[b]` at the cache's current length; appends its keys and
   * values to the cache and returns the final hidden states [B, hidden] in one of the cache's work buffers,
   * overwritten by the next step. No gradients.
   */
  decodeStep(k: Kernels, ids: Int32Array, cache: KVCache): Float32Array {
    if (this.inference && fusedDecodeApplies(this.cfg, this.inference))
      return fusedDecodeStep(this, this.inference, k, ids, cache);
    // Pooled buffers, as the fused step's work buffers: a step of a 0.5B model otherwise allocates some 170 arrays.
    const arena = new Arena();
    const ctx: Ctx = { k, tape: null, arena };
    const t = cache.length;
    const positions = Int32Array.from(ids, (_, b) => t - (cache.keyStart?.[b] ?? 0));
    const { heads, kvHeads, headDim } = this.cfg;
    const x = this.hiddenStates(ctx, ids, positions, (_, layer, q, kk, v) => {
      cache.writeStep(k, layer, kk.data, v.data);
      const out = cache.buffer('att', q.size);
      k.attentionDecode(
        q.data,
        cache.k[layer]!,
        cache.v[layer]!,
        out,
        ids.length,
        heads,
        kvHeads,
        headDim,
        cache.capacity,
        t + 1,
        1 / Math.sqrt(headDim),
        cache.keyStart ?? undefined,
      );
      return new Tensor(out, q.shape);
    });
    cache.advance();
    const out = cache.buffer('out', x.size);
    out.set(x.data);
    arena.release();
    return out;
  }
}

/** Position of every row: t − keyStart[b] (0 on left padding). */
export function batchPositions(batch: number, seqLen: number, keyStart?: Int32Array): Int32Array {
  const positions = new Int32Array(batch * seqLen);
  for (let b = 0; b < batch; b++) {
    const start = keyStart?.[b] ?? 0;
    for (let t = 0; t < seqLen; t++) positions[b * seqLen + t] = Math.max(0, t - start);
  }
  return positions;
}
