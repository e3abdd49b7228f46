/**
 * Differentiable ops over Tensor: each runs one fused kernel forward and records a hand-written backward on the tape.
 * Backward passes accumulate into input gradients (so a tensor used twice receives both contributions).
 */
import type { AttentionShape, F32, I32 } from '../backend/kernels.js';
import { Arena, Tape, type Ctx } from './tape.js';
import { giveBack, takeZeroed } from './grad-pool.js';
import { productOperand, type Precision, type ProductData } from './bf16.js';
import { bf16ToF32 } from './half.js';
import { Tensor } from './tensor.js';

function tracking(ctx: Ctx, ...inputs: (Tensor | undefined)[]): boolean {
  return ctx.tape !== null && inputs.some((t) => t?.requiresGrad === true);
}

/**
 * n zeroed floats for an op's output or saved state: the tape's (recycled after its backward) when the op records,
 * else the context's arena's, else a fresh array.
 */
function outBuffer(ctx: Ctx, track: boolean, n: number): Float32Array {
  if (track) return ctx.tape!.buffer(n);
  return ctx.arena ? ctx.arena.buffer(n) : new Float32Array(n);
}

function shapeError(op: string, message: string): never {
  throw new Error(`${op}: ${message}`);
}

/**
 * Runs a kernel that OVERWRITES a gradient-shaped output and adds the result into t's gradient: directly when t has
 * no gradient yet (the common case, no copy), through a scratch buffer otherwise.
 */
function accumulate(ctx: Ctx, t: Tensor, write: (dst: F32) => void): void {
  if (!t.requiresGrad) return;
  if (t.grad === null) {
    write(t.ensureGrad());
    return;
  }
  const scratch = takeZeroed(t.size);
  write(scratch);
  ctx.k.axpy(1, scratch, t.grad, t.size);
  giveBack(scratch);
}

/** Gradient buffer of t when it needs one, else a throw-away buffer of the same size (kernels always write one). */
function gradOrScratch(t: Tensor): F32 {
  return t.requiresGrad ? t.ensureGrad() : new Float32Array(t.size);
}

/**
 * y = x·Wᵀ + b, the Hugging Face Linear layout: x [..., in], W [out, in], b [out]; y [..., out]. `wT`, a copy of W as
 * [in, out], is used when given and nothing is recorded: BLAS kernels run the transposed-B product several times
 * slower than the plain one when x has few rows (decoding), see Transformer.withInferenceWeights. `precision`: of the
 * products (bf16.ts), default fp32.
 */
export function linear(
  ctx: Ctx,
  x: Tensor,
  w: Tensor,
  bias?: Tensor,
  wT?: Float32Array,
  precision: Precision = 'fp32',
): Tensor {
  const [outF, inF] = w.shape as [number, number];
  if (w.shape.length !== 2) shapeError('linear', `weight must be 2-D [out, in], got [${w.shape.join(',')}]`);
  if (x.lastDim !== inF)
    shapeError('linear', `input [${x.shape.join(',')}] does not end in ${inF} = weight [${outF},${inF}]`);
  if (bias && bias.size !== outF) shapeError('linear', `bias has ${bias.size} elements, weight has ${outF} outputs`);
  const rows = x.rows;
  const track = tracking(ctx, x, w, bias);
  const y = outBuffer(ctx, track, rows * outF);
  if (wT && precision !== 'fp32') shapeError('linear', 'an [in, out] weight copy is for fp32 products only');
  const xs = productOperand(ctx.k, x, precision, 'input');
  if (wT && !track) ctx.k.gemm({ m: rows, n: outF, k: inF, a: { data: xs }, b: { data: wT }, c: { data: y } });
  else
    ctx.k.gemm({
      transB: true,
      m: rows,
      n: outF,
      k: inF,
      a: { data: xs },
      b: { data: productOperand(ctx.k, w, precision, 'weight') },
      c: { data: y },
    });
  if (bias) ctx.k.addBias(y, bias.data, y, rows, outF);
  const out = new Tensor(y, [...x.shape.slice(0, -1), outF], track);
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (!dy) return;
      const g = productOperand(ctx.k, dy, precision, 'grad');
      if (x.requiresGrad)
        ctx.k.gemm({
          m: rows,
          n: inF,
          k: outF,
          a: { data: g },
          b: { data: productOperand(ctx.k, w, precision, 'weight') },
          c: { data: x.ensureGrad() },
          beta: 1,
        });
      if (w.requiresGrad)
        ctx.k.gemm({
          transA: true,
          m: outF,
          n: inF,
          k: rows,
          a: { data: g },
          b: { data: productOperand(ctx.k, x, precision, 'input') },
          c: { data: w.ensureGrad() },
          beta: 1,
        });
      if (bias?.requiresGrad) ctx.k.sumRows(dy, bias.ensureGrad(), rows, outF);
    }, out);
  return out;
}

/** Elementwise a + b (same shapes): the residual connection. */
export function add(ctx: Ctx, a: Tensor, b: Tensor): Tensor {
  if (a.size !== b.size) shapeError('add', `shapes [${a.shape.join(',')}] and [${b.shape.join(',')}] differ`);
  const track = tracking(ctx, a, b);
  const y = outBuffer(ctx, track, a.size);
  y.set(a.data);
  ctx.k.axpy(1, b.data, y, y.length);
  const out = new Tensor(y, a.shape, track);
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (!dy) return;
      for (const t of [a, b]) if (t.requiresGrad) ctx.k.axpy(1, dy, t.ensureGrad(), dy.length);
    }, out);
  return out;
}

/** Elementwise a·b (same shapes). */
export function mul(ctx: Ctx, a: Tensor, b: Tensor): Tensor {
  if (a.size !== b.size) shapeError('mul', `shapes [${a.shape.join(',')}] and [${b.shape.join(',')}] differ`);
  const track = tracking(ctx, a, b);
  const y = outBuffer(ctx, track, a.size);
  ctx.k.mul(a.data, b.data, y, y.length);
  const out = new Tensor(y, a.shape, track);
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (!dy) return;
      accumulate(ctx, a, (d) => ctx.k.mul(dy, b.data, d, dy.length));
      accumulate(ctx, b, (d) => ctx.k.mul(dy, a.data, d, dy.length));
    }, out);
  return out;
}

/** RMSNorm over the last dimension with a learned scale (Llama, Qwen; Qwen3's per-head q/k norm on [..., D]). */
export function rmsNorm(ctx: Ctx, x: Tensor, weight: Tensor, eps: number): Tensor {
  const dim = x.lastDim;
  const rows = x.rows;
  if (weight.size !== dim) shapeError('rmsNorm', `weight has ${weight.size} elements, input ends in ${dim}`);
  const track = tracking(ctx, x, weight);
  const y = outBuffer(ctx, track, x.size);
  const invRms = outBuffer(ctx, track, rows);
  ctx.k.rmsNorm(x.data, weight.data, y, invRms, rows, dim, eps);
  const out = new Tensor(y, x.shape, track);
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (!dy) return;
      const dWeight = gradOrScratch(weight);
      if (x.requiresGrad)
        accumulate(ctx, x, (dx) => ctx.k.rmsNormBackward(dy, x.data, weight.data, invRms, dx, dWeight, rows, dim));
      else ctx.k.rmsNormBackward(dy, x.data, weight.data, invRms, new Float32Array(x.size), dWeight, rows, dim);
    }, out);
  return out;
}

/** LayerNorm over the last dimension with scale and bias (GPT-2). */
export function layerNorm(ctx: Ctx, x: Tensor, weight: Tensor, bias: Tensor, eps: number): Tensor {
  const dim = x.lastDim;
  const rows = x.rows;
  if (weight.size !== dim || bias.size !== dim)
    shapeError('layerNorm', `weight/bias have ${weight.size}/${bias.size} elements, input ends in ${dim}`);
  const track = tracking(ctx, x, weight, bias);
  const y = outBuffer(ctx, track, x.size);
  const mean = outBuffer(ctx, track, rows);
  const rstd = outBuffer(ctx, track, rows);
  ctx.k.layerNorm(x.data, weight.data, bias.data, y, mean, rstd, rows, dim, eps);
  const out = new Tensor(y, x.shape, track);
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (!dy) return;
      const dW = gradOrScratch(weight);
      const dB = gradOrScratch(bias);
      const run = (dx: F32): void =>
        ctx.k.layerNormBackward(dy, x.data, weight.data, mean, rstd, dx, dW, dB, rows, dim);
      if (x.requiresGrad) accumulate(ctx, x, run);
      else run(new Float32Array(x.size));
    }, out);
  return out;
}

/**
 * Rotary position embedding of x viewed as [rows, heads, headDim]; positions[r] picks the row of the cos/sin tables
 * ([maxPos, headDim/2] each). Returns a rotated copy.
 */
export function rope(ctx: Ctx, x: Tensor, positions: I32, cos: F32, sin: F32, heads: number, headDim: number): Tensor {
  const rows = x.size / (heads * headDim);
  if (!Number.isInteger(rows))
    shapeError('rope', `input of ${x.size} elements is not a whole number of [${heads}×${headDim}] rows`);
  const track = tracking(ctx, x);
  const y = outBuffer(ctx, track, x.size);
  y.set(x.data);
  ctx.k.rope(y, positions, cos, sin, rows, heads, headDim, false);
  const out = new Tensor(y, x.shape, track);
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (!dy) return;
      accumulate(ctx, x, (dx) => {
        dx.set(dy);
        ctx.k.rope(dx, positions, cos, sin, rows, heads, headDim, true);
      });
    }, out);
  return out;
}

/** silu(gate)·up, the SwiGLU activation of Llama/Qwen MLPs. */
export function swiglu(ctx: Ctx, gate: Tensor, up: Tensor): Tensor {
  if (gate.size !== up.size)
    shapeError('swiglu', `gate [${gate.shape.join(',')}] and up [${up.shape.join(',')}] differ`);
  const track = tracking(ctx, gate, up);
  const y = outBuffer(ctx, track, gate.size);
  ctx.k.swiglu(gate.data, up.data, y, y.length);
  const out = new Tensor(y, gate.shape, track);
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (!dy) return;
      const n = dy.length;
      if (gate.grad === null && up.grad === null) {
        ctx.k.swigluBackward(dy, gate.data, up.data, gradOrScratch(gate), gradOrScratch(up), n);
        return;
      }
      const dGate = new Float32Array(n);
      const dUp = new Float32Array(n);
      ctx.k.swigluBackward(dy, gate.data, up.data, dGate, dUp, n);
      if (gate.requiresGrad) ctx.k.axpy(1, dGate, gate.ensureGrad(), n);
      if (up.requiresGrad) ctx.k.axpy(1, dUp, up.ensureGrad(), n);
    }, out);
  return out;
}

/** GELU, tanh approximation (GPT-2's MLP). */
export function gelu(ctx: Ctx, x: Tensor): Tensor {
  const track = tracking(ctx, x);
  const y = outBuffer(ctx, track, x.size);
  ctx.k.gelu(x.data, y, y.length);
  const out = new Tensor(y, x.shape, track);
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (dy) accumulate(ctx, x, (dx) => ctx.k.geluBackward(dy, x.data, dx, dy.length));
    }, out);
  return out;
}

/**
 * Causal grouped-query self-attention. q: [B·T, Hq·D], k and v: [B·T, Hkv·D] (row-major [B,T,H,D]); returns
 * [B·T, Hq·D]. keyStart[b] masks the first keys of sequence b (left padding).
 */
export function attention(ctx: Ctx, q: Tensor, k: Tensor, v: Tensor, shape: AttentionShape, keyStart?: I32): Tensor {
  const { batch, seqLen, queryHeads, kvHeads, headDim } = shape;
  if (
    q.size !== batch * seqLen * queryHeads * headDim ||
    k.size !== batch * seqLen * kvHeads * headDim ||
    v.size !== k.size
  )
    shapeError(
      'attention',
      `q [${q.shape.join(',')}], k [${k.shape.join(',')}], v [${v.shape.join(',')}] do not match ` +
        `[B=${batch},T=${seqLen}] with ${queryHeads} query and ${kvHeads} key/value heads of ${headDim}`,
    );
  const track = tracking(ctx, q, k, v);
  const y = outBuffer(ctx, track, q.size);
  const lse = outBuffer(ctx, track, batch * queryHeads * seqLen);
  ctx.k.attention(q.data, k.data, v.data, y, lse, shape, keyStart);
  const out = new Tensor(y, q.shape, track);
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (!dy) return;
      const fresh = [q, k, v].every((t) => t.grad === null);
      const dq = fresh ? gradOrScratch(q) : new Float32Array(q.size);
      const dk = fresh ? gradOrScratch(k) : new Float32Array(k.size);
      const dv = fresh ? gradOrScratch(v) : new Float32Array(v.size);
      ctx.k.attentionBackward(dy, q.data, k.data, v.data, y, lse, dq, dk, dv, shape, keyStart);
      if (fresh) return;
      for (const [t, d] of [
        [q, dq],
        [k, dk],
        [v, dv],
      ] as const)
        if (t.requiresGrad) ctx.k.axpy(1, d, t.ensureGrad(), d.length);
    }, out);
  return out;
}

/** Rows of an embedding table [V, d] picked by ids: [ids.length, d]. */
export function embedding(ctx: Ctx, table: Tensor, ids: I32): Tensor {
  const dim = table.lastDim;
  const track = tracking(ctx, table);
  const y = outBuffer(ctx, track, ids.length * dim);
  if (table.bf16) bf16Rows(table.bf16, ids, y, dim);
  else ctx.k.embedding(table.data, ids, y, ids.length, dim);
  const out = new Tensor(y, [ids.length, dim], track);
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (dy) ctx.k.embeddingBackward(dy, ids, table.ensureGrad(), ids.length, dim);
    }, out);
  return out;
}

/** The rows `ids` of a table of bfloat16 bits [V, dim], widened into y [ids, dim] (a frozen bf16 embedding). */
function bf16Rows(table: Uint16Array, ids: I32, y: F32, dim: number): void {
  const vocab = table.length / dim;
  ids.forEach((id, r) => {
    if (!(id >= 0 && id < vocab)) throw new Error(`embedding: id ${id} is outside the table's ${vocab} rows`);
    bf16ToF32(table.subarray(id * dim, (id + 1) * dim), y.subarray(r * dim, (r + 1) * dim));
  });
}

/** Per-token results of the language-model head. */
export interface TokenLogProbs {
  /** log π(target) per row, differentiable: [rows]. */
  logProb: Tensor;
  /** Entropy of the predicted distribution per row (nats); present when asked for. */
  entropy: Float32Array | null;
  /**
   * ∂loss/∂entropy per row (zeros; present with entropy when tracking gradients): write it before tape.backward and
   * the backward adds its term (an entropy bonus) to the logits' gradient.
   */
  entropySeed: Float32Array | null;
}

/**
 * The logit of an id the tokenizer cannot decode: its probability is exactly 0 (exp underflows) while every product
 * with it stays finite, as -Infinity would not (0 · -Infinity is NaN in the entropy and its gradient).
 */
export const UNDECODABLE_LOGIT = -1e30;

/**
 * Gives ids ≥ `decodable` zero probability in `rows` rows of logits [rows, vocab]: the one rule by which every sampler
 * and the training head skip a padded embedding's rows. Nothing is written when every id is decodable.
 */
export function maskUndecodable(logits: F32, rows: number, vocab: number, decodable: number): void {
  if (decodable >= vocab) return;
  for (let r = 0; r < rows; r++) logits.fill(UNDECODABLE_LOGIT, r * vocab + decodable, (r + 1) * vocab);
}

/** Most logits (floats) the head keeps from forward to backward; above it each chunk is recomputed (256 MiB). */
export const KEEP_LOGITS_LIMIT = 1 << 26;

/**
 * Rows per head matmul by default for a vocabulary of `vocab`: ⌊2^22 / V⌋ (16 MiB of logits), but at least
 * HEAD_CHUNK_MIN_ROWS: each chunk's product reads the whole head, and with few rows it runs far below the product's
 * speed (2048 rows by a 151,936 × 896 head on 2 AVX-512 cores: 27-row chunks 7.4 s fp32 / 2.5 s bf16, 128-row
 * chunks 4.0 / 1.5 s).
 */
export function headChunkRows(vocab: number): number {
  return Math.max(HEAD_CHUNK_MIN_ROWS, Math.floor((1 << 22) / Math.max(1, vocab)));
}

/** The fewest rows a head chunk has (see headChunkRows); 128 rows of a 151,936-token vocabulary are 74 MiB. */
export const HEAD_CHUNK_MIN_ROWS = 128;

/**
 * The language-model head fused with the log-probability of each row's target: logits = h·Wᵀ [rows, V] are computed
 * `chunkRows` rows at a time. Without gradients only one chunk is ever held, so memory stays O(chunkRows·V) for any
 * vocabulary. With gradients the logits are kept for the backward (which turns them into their gradient in place)
 * while rows·V ≤ `keepLogitsLimit` floats: recomputing them costs a third of the head's matmul work, more than the
 * memory saves at these sizes; above the limit each chunk is recomputed instead. Targets < 0 are ignored rows.
 */
export function lmHeadLogProbs(
  ctx: Ctx,
  hidden: Tensor,
  weight: Tensor,
  targets: I32,
  options: {
    /** Also return each row's entropy (nats); default false. */
    entropy?: boolean;
    /** Rows per head matmul; default headChunkRows(V): ⌊2^22 / V⌋ (16 MiB of logits), at least 128. */
    chunkRows?: number;
    /** Most logits (floats) kept for the backward instead of recomputed; default 2^26. */
    keepLogitsLimit?: number;
    /** Precision of the head's products (bf16.ts); default fp32. */
    precision?: Precision;
    /** Ids below this are normalised over; the rest get zero probability (maskUndecodable); default V. */
    decodableIds?: number;
  } = {},
): TokenLogProbs {
  const [vocab, dim] = weight.shape as [number, number];
  const rows = hidden.rows;
  if (hidden.lastDim !== dim) shapeError('lmHeadLogProbs', `hidden ends in ${hidden.lastDim}, the head expects ${dim}`);
  if (targets.length !== rows) shapeError('lmHeadLogProbs', `${targets.length} targets for ${rows} rows`);
  const chunk = Math.max(1, options.chunkRows ?? headChunkRows(vocab));
  const logProb = new Float32Array(rows);
  const lse = new Float32Array(rows);
  const entropy = options.entropy ? new Float32Array(rows) : null;
  const track = tracking(ctx, hidden, weight);
  const keep = track && rows * vocab <= (options.keepLogitsLimit ?? KEEP_LOGITS_LIMIT);
  const logits = outBuffer(ctx, track, (keep ? rows : Math.min(chunk, rows)) * vocab);
  const precision = options.precision ?? 'fp32';
  // The operands of one pass over the chunks (at bf16 the slots' scratch: nothing else is widened during the pass).
  const operands = (): { h: ProductData; w: ProductData } => ({
    h: productOperand(ctx.k, hidden, precision, 'input'),
    w: productOperand(ctx.k, weight, precision, 'weight'),
  });
  const chunkLogits = (r0: number, n: number, op: { h: ProductData; w: ProductData }): F32 => {
    const view = logits.subarray(keep ? r0 * vocab : 0, (keep ? r0 + n : n) * vocab);
    ctx.k.gemm({
      transB: true,
      m: n,
      n: vocab,
      k: dim,
      a: { data: op.h, offset: r0 * dim },
      b: { data: op.w },
      c: { data: view },
    });
    maskUndecodable(view, n, vocab, options.decodableIds ?? vocab);
    return view;
  };
  const forward = operands();
  for (let r0 = 0; r0 < rows; r0 += chunk) {
    const n = Math.min(chunk, rows - r0);
    ctx.k.gatherLogProbs(
      chunkLogits(r0, n, forward),
      targets.subarray(r0, r0 + n),
      logProb.subarray(r0, r0 + n),
      lse.subarray(r0, r0 + n),
      n,
      vocab,
      entropy?.subarray(r0, r0 + n),
    );
  }
  const out = new Tensor(logProb, [rows], track);
  const entropySeed = entropy && out.requiresGrad ? new Float32Array(rows) : null;
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (!dy) return;
      const withEntropy = entropySeed !== null && entropySeed.some((v) => v !== 0);
      const dHidden = hidden.requiresGrad ? hidden.ensureGrad() : null;
      const dWeight = weight.requiresGrad ? weight.ensureGrad() : null;
      const op = operands();
      for (let r0 = 0; r0 < rows; r0 += chunk) {
        const n = Math.min(chunk, rows - r0);
        const z = keep ? logits.subarray(r0 * vocab, (r0 + n) * vocab) : chunkLogits(r0, n, op);
        const rowsOf = (a: F32): F32 => a.subarray(r0, r0 + n);
        headChunkBackward(ctx, z, op, precision, {
          r0,
          n,
          vocab,
          dim,
          targets: targets.subarray(r0, r0 + n),
          lse: rowsOf(lse),
          dy: rowsOf(dy),
          entropy: withEntropy ? { values: rowsOf(entropy!), seed: rowsOf(entropySeed!) } : null,
          dHidden,
          dWeight,
        });
      }
    }, out);
  return { logProb: out, entropy, entropySeed };
}

/** One chunk of rows of the head's backward (lmHeadLogProbs): what it reads besides the chunk's logits. */
interface HeadChunk {
  /** First row and rows of the chunk; the vocabulary and hidden width. */
  r0: number;
  n: number;
  vocab: number;
  dim: number;
  /** The chunk's targets, log-sum-exps and log-prob gradients. */
  targets: I32;
  lse: F32;
  dy: F32;
  /** Its entropies and their gradients, when an entropy term has a gradient; null otherwise. */
  entropy: { values: F32; seed: F32 } | null;
  /** Where the hidden states' and the head's gradients are added (null: not wanted). */
  dHidden: F32 | null;
  dWeight: F32 | null;
}

/**
 * The backward of one chunk of the head: the logits `z` become their gradient in place (log-prob and, when asked,
 * entropy terms), which then adds its products with the head (`op.w`) into dHidden and with the hidden rows into
 * dWeight.
 */
function headChunkBackward(
  ctx: Ctx,
  z: F32,
  op: { h: ProductData; w: ProductData },
  precision: Precision,
  c: HeadChunk,
): void {
  // The log-prob backward overwrites the logits in place; the entropy term needs them, so it reads a copy.
  const zCopy = c.entropy ? z.slice() : null;
  ctx.k.gatherLogProbsBackward(z, c.targets, c.lse, c.dy, z, c.n, c.vocab);
  if (zCopy) ctx.k.entropyBackward(zCopy, c.lse, c.entropy!.values, c.entropy!.seed, z, c.n, c.vocab);
  const g = productOperand(ctx.k, z, precision, 'grad');
  if (c.dHidden)
    ctx.k.gemm({
      m: c.n,
      n: c.dim,
      k: c.vocab,
      a: { data: g },
      b: { data: op.w },
      c: { data: c.dHidden, offset: c.r0 * c.dim },
      beta: 1,
    });
  if (c.dWeight)
    ctx.k.gemm({
      transA: true,
      m: c.vocab,
      n: c.dim,
      k: c.n,
      a: { data: g },
      b: { data: op.h, offset: c.r0 * c.dim },
      c: { data: c.dWeight },
      beta: 1,
    });
}

/** Σ_i w_i·x_i as a one-element tensor: how a loss written over per-token values (RL objectives, SFT) enters autograd. */
export function weightedSum(ctx: Ctx, x: Tensor, weights: F32): Tensor {
  if (weights.length !== x.size) shapeError('weightedSum', `${weights.length} weights for ${x.size} values`);
  let s = 0;
  for (let i = 0; i < x.size; i++) s += weights[i]! * x.data[i]!;
  const out = new Tensor(Float32Array.of(s), [1], tracking(ctx, x));
  if (out.requiresGrad)
    ctx.tape!.record(() => {
      const dy = out.grad;
      if (dy) ctx.k.axpy(dy[0]!, weights, x.ensureGrad(), x.size);
    }, out);
  return out;
}

/** Splits x [..., Σwidths] into consecutive column blocks (GPT-2's fused q/k/v projection). */
export function splitColumns(ctx: Ctx, x: Tensor, widths: number[]): Tensor[] {
  const total = x.lastDim;
  if (widths.reduce((a, b) => a + b, 0) !== total)
    shapeError('splitColumns', `widths ${widths.join('+')} do not add up to the last dimension ${total}`);
  const rows = x.rows;
  let start = 0;
  return widths.map((w) => {
    const from = start;
    start += w;
    const track = tracking(ctx, x);
    const y = outBuffer(ctx, track, rows * w);
    for (let r = 0; r < rows; r++) y.set(x.data.subarray(r * total + from, r * total + from + w), r * w);
    const out = new Tensor(y, [...x.shape.slice(0, -1), w], track);
    if (out.requiresGrad)
      ctx.tape!.record(() => {
        const dy = out.grad;
        if (!dy) return;
        const dx = x.ensureGrad();
        for (let r = 0; r < rows; r++) ctx.k.axpy(1, dy.subarray(r * w, (r + 1) * w), dx.subarray(r * total + from), w);
      }, out);
    return out;
  });
}

/**
 * fn(x) run in a scratch arena that is released once its result is copied out (into the tape's or the context's
 * buffers): of fn's buffers only the result outlives the call.
 */
function inScratch(ctx: Ctx, x: Tensor, fn: (ctx: Ctx, x: Tensor) => Tensor, track: boolean): Tensor {
  const scratch = new Arena();
  const first = fn({ k: ctx.k, tape: null, arena: scratch }, x);
  const y = outBuffer(ctx, track, first.size);
  y.set(first.data);
  scratch.release();
  return new Tensor(y, first.shape, track);
}

/**
 * y = fn(x) holding only x and y. Without a tape but with an arena (a scoring pass, a prefill), fn's buffers go back
 * to the pool as soon as y is copied out, instead of living to the end of the pass. On a tape it is activation
 * checkpointing: one op that keeps x and y, whose backward runs fn again on a tape of its own and back-propagates
 * through it, adding into x's gradient and into the gradients of the parameters fn reads. fn must be deterministic
 * and read no state that changes between the two runs; the recomputation runs the same kernels on the same inputs,
 * so the gradients are bit-identical to recording fn's ops directly when x gets its gradient from fn alone (a
 * transformer block's input); when x already holds another contribution, the sum is rounded once more (the ops'
 * kernels would have added into it directly). Parameters inside fn are assumed trainable: on a tape y tracks
 * gradients.
 */
export function checkpoint(ctx: Ctx, x: Tensor, fn: (ctx: Ctx, x: Tensor) => Tensor): Tensor {
  if (ctx.tape === null) return ctx.arena ? inScratch(ctx, x, fn, false) : fn(ctx, x);
  const out = inScratch(ctx, x, fn, true);
  ctx.tape.record(() => {
    const dy = out.grad;
    if (!dy) return;
    const tape = new Tape();
    const input = new Tensor(x.data, x.shape, x.requiresGrad);
    tape.backward(fn({ k: ctx.k, tape }, input), dy);
    const dx = input.grad;
    if (!x.requiresGrad || dx === null) return;
    accumulate(ctx, x, (d) => d.set(dx));
    giveBack(input.detachGrad()!); // dx: input is no view, so its gradient is its own
  }, out);
  return out;
}
