/**
 * One decoder-only transformer for the Llama, Qwen2, Qwen3 and GPT-2 families, configured by a TransformerConfig.
 * Parameters live under their Hugging Face names; every linear weight is held as [out, in] (GPT-2's Conv1D weights
 * are transposed when read and written, see weights.ts). The same block code serves training (full sequences, on the
 * tape), prefill and one-token decoding against a KV cache: only the attention step differs.
 */
import type { Kernels } from '../backend/kernels.js';
import {
  add,
  attention,
  embedding,
  gelu,
  layerNorm,
  linear,
  lmHeadLogProbs,
  rmsNorm,
  rope,
  swiglu,
  splitColumns,
} from '../tensor/ops.js';
import type { Ctx } from '../tensor/tape.js';
import { Tensor } from '../tensor/tensor.js';
import type { TransformerConfig } from './hf-config.js';
import {
  concatBiases,
  fuseColumns,
  transposed,
  transposeInto,
  type FusedGateUp,
  type FusedQkv,
  type InferenceWeights,
} from './inference-weights.js';
import { ropeTables } from './rope.js';
import type { KVCache } from './kv-cache.js';
import { hfWeightNames } from './weight-names.js';

/** Names of one block's parameters (Hugging Face naming, per family). */
interface BlockNames {
  norm1: string;
  norm2: string;
  q?: string;
  k?: string;
  v?: string;
  qkv?: string;
  o: string;
  qNorm?: string;
  kNorm?: string;
  gate?: string;
  up: string;
  down: string;
}

function blockNames(cfg: TransformerConfig, i: number): BlockNames {
  if (cfg.family === 'gpt2') {
    const p = `transformer.h.${i}.`;
    return {
      norm1: `${p}ln_1`,
      norm2: `${p}ln_2`,
      qkv: `${p}attn.c_attn`,
      o: `${p}attn.c_proj`,
      up: `${p}mlp.c_fc`,
      down: `${p}mlp.c_proj`,
    };
  }
  const p = `model.layers.${i}.`;
  return {
    norm1: `${p}input_layernorm`,
    norm2: `${p}post_attention_layernorm`,
    q: `${p}self_attn.q_proj`,
    k: `${p}self_attn.k_proj`,
    v: `${p}self_attn.v_proj`,
    o: `${p}self_attn.o_proj`,
    ...(cfg.qkNorm ? { qNorm: `${p}self_attn.q_norm`, kNorm: `${p}self_attn.k_norm` } : {}),
    gate: `${p}mlp.gate_proj`,
    up: `${p}mlp.up_proj`,
    down: `${p}mlp.down_proj`,
  };
}

/** Names of the parameters outside the blocks. */
function outerNames(cfg: TransformerConfig): { embed: string; positions?: string; finalNorm: string; head: string } {
  if (cfg.family === 'gpt2')
    return {
      embed: 'transformer.wte.weight',
      positions: 'transformer.wpe.weight',
      finalNorm: 'transformer.ln_f',
      head: cfg.tiedEmbeddings ? 'transformer.wte.weight' : 'lm_head.weight',
    };
  return {
    embed: 'model.embed_tokens.weight',
    finalNorm: 'model.norm',
    head: cfg.tiedEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight',
  };
}

/** Every parameter's name and shape in our layout: Hugging Face's, with GPT-2's Conv1D weights as [out, in]. */
export function parameterShapes(cfg: TransformerConfig): Map<string, number[]> {
  return new Map(hfWeightNames(cfg).map((w) => [w.name, w.transposed ? [w.shape[1]!, w.shape[0]!] : w.shape]));
}

/** How one forward pass attends: the training/prefill path over whole sequences, or a decoding step over a cache. */
type Attend = (layer: number, q: Tensor, k: Tensor, v: Tensor) => Tensor;

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

  constructor(cfg: TransformerConfig, params: Map<string, Tensor>) {
    this.cfg = cfg;
    const want = parameterShapes(cfg);
    for (const [name, shape] of want) {
      const t = params.get(name);
      if (!t)
        throw new Error(`missing tensor "${name}" (expected shape [${shape.join(', ')}]) for a ${cfg.family} model`);
      if (t.shape.length !== shape.length || t.shape.some((s, i) => s !== shape[i]))
        throw new Error(`tensor "${name}" has shape [${t.shape.join(', ')}], the config needs [${shape.join(', ')}]`);
    }
    for (const name of params.keys())
      if (!want.has(name)) throw new Error(`unexpected tensor "${name}" for a ${cfg.family} model with this config`);
    if (cfg.activation !== 'silu' && cfg.gatedMlp)
      throw new Error(`gated MLPs are supported with silu only (got ${cfg.activation})`);
    if (!cfg.gatedMlp && cfg.activation !== 'gelu_new' && cfg.activation !== 'gelu_pytorch_tanh')
      throw new Error(`non-gated MLPs are supported with the tanh GELU only (gelu_new), got ${cfg.activation}`);
    this.params = params;
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

  private optional(name: string): Tensor | undefined {
    return this.params.get(name);
  }

  /** cos/sin tables covering positions [0, needed), grown on demand. */
  private rotaryTables(needed: number): { cos: Float32Array; sin: Float32Array } {
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
    return linear(ctx, x, this.p(`${name}.weight`), this.optional(`${name}.bias`), wT);
  }

  /** The fused inference copies of block i, when this is an inference pass inside withInferenceWeights. */
  private fused(ctx: Ctx, i: number): { qkv?: FusedQkv; gateUp?: FusedGateUp } {
    if (ctx.tape !== null || !this.inference) return {};
    return { qkv: this.inference.qkv.get(i), gateUp: this.inference.gateUp.get(i) };
  }

  /** q, k and v from one product with the fused [in, q+k+v] copy (no gradients). */
  private qkvFused(ctx: Ctx, h: Tensor, f: FusedQkv): [Tensor, Tensor, Tensor] {
    const width = f.widths[0] + f.widths[1] + f.widths[2];
    const rows = h.rows;
    const y = ctx.arena?.buffer(rows * width) ?? new Float32Array(rows * width);
    ctx.k.gemm({ m: rows, n: width, k: h.lastDim, a: { data: h.data }, b: { data: f.weight }, c: { data: y } });
    if (f.bias) ctx.k.addBias(y, f.bias, y, rows, width);
    return splitColumns(ctx, new Tensor(y, [rows, width]), f.widths) as [Tensor, Tensor, Tensor];
  }

  /** silu(gate)·up from one batched product with the stacked [2, in, I] copy (no gradients). */
  private gateUpFused(ctx: Ctx, h: Tensor, f: FusedGateUp): Tensor {
    const rows = h.rows;
    const n = rows * f.width;
    const y = ctx.arena?.buffer(2 * n) ?? new Float32Array(2 * n);
    ctx.k.gemm({
      m: rows,
      n: f.width,
      k: h.lastDim,
      a: { data: h.data },
      b: { data: f.weight },
      c: { data: y },
      batch: 2,
      strideB: h.lastDim * f.width,
      strideC: n,
    });
    const gate = y.subarray(0, n);
    const up = y.subarray(n);
    if (f.bias) {
      ctx.k.addBias(gate, f.bias.subarray(0, f.width), gate, rows, f.width);
      ctx.k.addBias(up, f.bias.subarray(f.width), up, rows, f.width);
    }
    return swiglu(ctx, new Tensor(gate, [rows, f.width]), new Tensor(up, [rows, f.width]));
  }

  /**
   * Runs `fn` with [in, out] copies of every matrix the forward pass multiplies by (the head included), which
   * inference passes use instead of the [out, in] originals: for decode-sized inputs the plain product is 2–4× faster
   * than the transposed one (bench:model), and q/k/v and gate/up become one product each. The copies are made once
   * per call (weights must not change inside `fn`) and dropped afterwards; meanwhile they cost one more copy of those
   * weights in memory.
   */
  withInferenceWeights<T>(fn: () => T): T {
    if (this.inference) return fn();
    this.inference = this.inferenceWeights();
    try {
      return fn();
    } finally {
      this.inference = null;
    }
  }

  /**
   * Makes the inference copies of withInferenceWeights and keeps them until the returned function is called (once:
   * later calls do nothing), for a decode loop that yields to the event loop between steps (a server). The weights
   * must not change meanwhile.
   */
  holdInferenceWeights(): () => void {
    if (this.inference) return () => {};
    this.inference = this.inferenceWeights();
    let held = true;
    return () => {
      if (held) this.inference = null;
      held = false;
    };
  }

  /** Builds the [in, out] copies, fusing each block's q/k/v and gate/up (see inference-weights.ts). */
  private inferenceWeights(): InferenceWeights {
    const outer = outerNames(this.cfg);
    const fusedNames = new Set<string>();
    const qkv = new Map<number, FusedQkv>();
    const gateUp = new Map<number, FusedGateUp>();
    for (let i = 0; i < this.cfg.layers; i++) {
      const n = blockNames(this.cfg, i);
      if (n.q && n.k && n.v) {
        const names = [n.q, n.k, n.v];
        const ws = names.map((m) => this.p(`${m}.weight`));
        qkv.set(i, {
          weight: fuseColumns(ws),
          bias: concatBiases(names.map((m) => this.optional(`${m}.bias`))),
          widths: ws.map((w) => w.shape[0]!) as [number, number, number],
        });
        for (const m of names) fusedNames.add(`${m}.weight`);
      }
      if (n.gate && this.cfg.gatedMlp) {
        const [g, u] = [this.p(`${n.gate}.weight`), this.p(`${n.up}.weight`)];
        const [width, inF] = g.shape as [number, number];
        const weight = new Float32Array(2 * g.size);
        transposeInto(g.data, width, inF, weight);
        transposeInto(u.data, width, inF, weight.subarray(g.size));
        const bias = concatBiases([this.optional(`${n.gate}.bias`), this.optional(`${n.up}.bias`)]);
        gateUp.set(i, { weight, bias, width });
        fusedNames.add(`${n.gate}.weight`).add(`${n.up}.weight`);
      }
    }
    const copies = new Map<string, Float32Array>();
    for (const [name, t] of this.params) {
      const lookupOnly = name === outer.positions || (name === outer.embed && name !== outer.head);
      if (t.shape.length !== 2 || lookupOnly || fusedNames.has(name)) continue;
      copies.set(name, transposed(t));
    }
    return { transposed: copies, qkv, gateUp };
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
    else if (fused.qkv) [q, k, v] = this.qkvFused(ctx, h, fused.qkv);
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
      i,
      q.reshape([positions.length, heads * headDim]),
      k.reshape([positions.length, kvHeads * headDim]),
      v,
    );
    const x2 = add(ctx, x, this.lin(ctx, a, n.o));
    const h2 = this.norm(ctx, x2, n.norm2);
    const act = fused.gateUp
      ? this.gateUpFused(ctx, h2, fused.gateUp)
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
    for (let i = 0; i < this.cfg.layers; i++) x = this.block(ctx, i, x, positions, attend);
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
    const hidden = this.hiddenStates(ctx, b.ids, positions, (layer, q, k, v) => {
      cache?.writeSequence(ctx.k, layer, k.data, v.data, seqLen);
      return attention(ctx, q, k, v, shape, b.keyStart);
    });
    cache?.setLength(seqLen);
    return hidden;
  }

  /**
   * log π(next token) for every position: targets[r] is the token after row r (negative: ignored row). Returns the
   * per-row log-probs (differentiable) and, when asked, the entropy of each row's distribution.
   */
  tokenLogProbs(ctx: Ctx, b: Batch, targets: Int32Array, options: { entropy?: boolean } = {}) {
    return lmHeadLogProbs(ctx, this.forward(ctx, b), this.head, targets, options);
  }

  /**
   * Logits [rows, V] of the given hidden rows (no gradient; sampling), written into `out` (default: a new array; a
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
        a: { data: hidden },
        b: { data: this.head.data },
        c: { data: out },
      });
    return out;
  }

  /**
   * One decoding step: each sequence's next token `ids[b]` at the cache's current length; appends its keys and
   * values to the cache and returns the final hidden states [B, hidden] (on the fused path one of the cache's work
   * buffers, overwritten by the next step). No gradients.
   */
  decodeStep(k: Kernels, ids: Int32Array, cache: KVCache): Float32Array {
    const fast = this.decodeStepFused(k, ids, cache);
    if (fast) return fast;
    const ctx: Ctx = { k, tape: null };
    const t = cache.length;
    const positions = Int32Array.from(ids, (_, b) => t - (cache.keyStart?.[b] ?? 0));
    const { heads, kvHeads, headDim } = this.cfg;
    const x = this.hiddenStates(ctx, ids, positions, (layer, q, kk, v) => {
      cache.writeStep(k, layer, kk.data, v.data);
      const out = new Float32Array(q.size);
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
    return x.data;
  }

  /**
   * decodeStep of a rotary, RMSNorm, gated-MLP model (Llama, Qwen2, Qwen3) inside withInferenceWeights: the same
   * kernels in the same order as the general path, so the same numbers, but over the fused weights and in the cache's
   * work buffers — a step allocates nothing. Returns null for other models or outside withInferenceWeights.
   */
  private decodeStepFused(k: Kernels, ids: Int32Array, cache: KVCache): Float32Array | null {
    const cfg = this.cfg;
    const inf = this.inference;
    if (!inf || cfg.position.kind !== 'rope' || cfg.norm.kind !== 'rmsnorm' || !cfg.gatedMlp) return null;
    if (inf.qkv.size !== cfg.layers || inf.gateUp.size !== cfg.layers) return null;
    const { heads, kvHeads, headDim: d, hidden: dim, norm } = cfg;
    const batch = ids.length;
    const t = cache.length;
    const positions = Int32Array.from(ids, (_, b) => t - (cache.keyStart?.[b] ?? 0));
    let maxPos = 0;
    for (const p of positions) maxPos = Math.max(maxPos, p);
    const { cos, sin } = this.rotaryTables(maxPos + 1);
    const buf = (name: string, n: number): Float32Array => cache.buffer(name, n);
    const x = buf('x', batch * dim);
    const h = buf('h', batch * dim);
    const inv = buf('inv', batch * Math.max(heads, 1));
    const q = buf('q', batch * heads * d);
    const kk = buf('k', batch * kvHeads * d);
    const v = buf('v', batch * kvHeads * d);
    const att = buf('att', batch * heads * d);
    const proj = buf('proj', batch * dim);
    k.embedding(this.p(outerNames(cfg).embed).data, ids, x, batch, dim);
    for (let i = 0; i < cfg.layers; i++) {
      const n = blockNames(cfg, i);
      const qkv = inf.qkv.get(i)!;
      const gateUp = inf.gateUp.get(i)!;
      const oT = inf.transposed.get(`${n.o}.weight`)!;
      const downT = inf.transposed.get(`${n.down}.weight`)!;
      k.rmsNorm(x, this.p(`${n.norm1}.weight`).data, h, inv, batch, dim, norm.eps);
      const width = qkv.widths[0] + qkv.widths[1] + qkv.widths[2];
      const fusedQkv = buf('qkv', batch * width);
      k.gemm({ m: batch, n: width, k: dim, a: { data: h }, b: { data: qkv.weight }, c: { data: fusedQkv } });
      if (qkv.bias) k.addBias(fusedQkv, qkv.bias, fusedQkv, batch, width);
      const [wq, wk] = qkv.widths;
      k.copyRows(fusedQkv, 0, width, q, 0, wq, batch, wq);
      k.copyRows(fusedQkv, wq, width, kk, 0, wk, batch, wk);
      k.copyRows(fusedQkv, wq + wk, width, v, 0, wk, batch, wk);
      let qr = q;
      let kr = kk;
      if (n.qNorm) {
        qr = buf('qn', q.length);
        kr = buf('kn', kk.length);
        k.rmsNorm(q, this.p(`${n.qNorm}.weight`).data, qr, inv, batch * heads, d, norm.eps);
        k.rmsNorm(kk, this.p(`${n.kNorm}.weight`).data, kr, inv, batch * kvHeads, d, norm.eps);
      }
      k.rope(qr, positions, cos, sin, batch, heads, d, false);
      k.rope(kr, positions, cos, sin, batch, kvHeads, d, false);
      cache.writeStep(k, i, kr, v);
      k.attentionDecode(
        qr,
        cache.k[i]!,
        cache.v[i]!,
        att,
        batch,
        heads,
        kvHeads,
        d,
        cache.capacity,
        t + 1,
        1 / Math.sqrt(d),
        cache.keyStart ?? undefined,
      );
      this.projectAdd(k, att, oT, this.optional(`${n.o}.bias`), proj, x, batch, heads * d, dim);
      k.rmsNorm(x, this.p(`${n.norm2}.weight`).data, h, inv, batch, dim, norm.eps);
      const width2 = batch * gateUp.width;
      const gu = buf('gateUp', 2 * width2);
      k.gemm({
        m: batch,
        n: gateUp.width,
        k: dim,
        a: { data: h },
        b: { data: gateUp.weight },
        c: { data: gu },
        batch: 2,
        strideB: dim * gateUp.width,
        strideC: width2,
      });
      const gate = gu.subarray(0, width2);
      const up = gu.subarray(width2);
      if (gateUp.bias) {
        k.addBias(gate, gateUp.bias.subarray(0, gateUp.width), gate, batch, gateUp.width);
        k.addBias(up, gateUp.bias.subarray(gateUp.width), up, batch, gateUp.width);
      }
      const act = buf('act', width2);
      k.swiglu(gate, up, act, width2);
      this.projectAdd(k, act, downT, this.optional(`${n.down}.bias`), proj, x, batch, gateUp.width, dim);
    }
    const out = buf('out', batch * dim);
    k.rmsNorm(x, this.p(`${outerNames(cfg).finalNorm}.weight`).data, out, inv, batch, dim, norm.eps);
    cache.advance();
    return out;
  }

  /** x += a·wT (+ bias): a residual branch's output projection, through `tmp` [rows, out]. */
  private projectAdd(
    k: Kernels,
    a: Float32Array,
    wT: Float32Array,
    bias: Tensor | undefined,
    tmp: Float32Array,
    x: Float32Array,
    rows: number,
    inF: number,
    outF: number,
  ): void {
    k.gemm({ m: rows, n: outF, k: inF, a: { data: a }, b: { data: wT }, c: { data: tmp } });
    if (bias) k.addBias(tmp, bias.data, tmp, rows, outF);
    k.axpy(1, tmp, x, rows * outF);
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
