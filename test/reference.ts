/**
 * Float64 reference implementations of the kernels, written as plainly as possible: pure functions of their inputs
 * that return new Float64Arrays (the gradient checks differentiate them numerically). Layouts follow
 * src/backend/kernels.ts.
 */
import type { AttentionShape, GemmArgs, MatrixRef } from '../src/backend/kernels.js';

/** Read-only numeric input (a Float32Array, a Float64Array or a plain array). */
export type Vec = ArrayLike<number>;

/** A matrix operand of refGemm: MatrixRef over any numeric array. */
export type RefMatrix = Omit<MatrixRef, 'data'> & { data: Vec };

/** GemmArgs over any numeric arrays. */
export type RefGemmArgs = Omit<GemmArgs, 'a' | 'b' | 'c' | 'threads'> & { a: RefMatrix; b: RefMatrix; c: RefMatrix };

/** The whole C buffer after C = alpha·op(A)·op(B) + beta·C (beta = 0 ignores C, like BLAS). */
export function refGemm(g: RefGemmArgs): Float64Array {
  const transA = g.transA ?? false;
  const transB = g.transB ?? false;
  const lda = g.a.ld ?? (transA ? g.m : g.k);
  const ldb = g.b.ld ?? (transB ? g.k : g.n);
  const ldc = g.c.ld ?? g.n;
  const alpha = g.alpha ?? 1;
  const beta = g.beta ?? 0;
  const c = Float64Array.from(g.c.data);
  for (let t = 0; t < (g.batch ?? 1); t++) {
    const aOff = (g.a.offset ?? 0) + t * (g.strideA ?? 0);
    const bOff = (g.b.offset ?? 0) + t * (g.strideB ?? 0);
    const cOff = (g.c.offset ?? 0) + t * (g.strideC ?? 0);
    for (let i = 0; i < g.m; i++) {
      for (let j = 0; j < g.n; j++) {
        let s = 0;
        for (let p = 0; p < g.k; p++) {
          const a = transA ? g.a.data[aOff + p * lda + i] : g.a.data[aOff + i * lda + p];
          const b = transB ? g.b.data[bOff + j * ldb + p] : g.b.data[bOff + p * ldb + j];
          s += a * b;
        }
        const old = beta === 0 ? 0 : beta * c[cOff + i * ldc + j];
        c[cOff + i * ldc + j] = alpha * s + old;
      }
    }
  }
  return c;
}

/** Applies f to every row of x ([rows, dim]), collecting the rows it returns. */
function mapRows(x: Vec, rows: number, dim: number, f: (row: number[], r: number) => number[]): Float64Array {
  const out: number[] = [];
  for (let r = 0; r < rows; r++)
    for (const y of f(
      Array.from({ length: dim }, (_, j) => x[r * dim + j]),
      r,
    ))
      out.push(y);
  return Float64Array.from(out);
}

/** One number per row of x. */
function perRow(x: Vec, rows: number, dim: number, f: (row: number[], r: number) => number): Float64Array {
  return mapRows(x, rows, dim, (row, r) => [f(row, r)]);
}

function sum(xs: number[]): number {
  let s = 0;
  for (const x of xs) s += x;
  return s;
}

function max(xs: number[]): number {
  let m = -Infinity;
  for (const x of xs) m = Math.max(m, x);
  return m;
}

/** 1 / sqrt(mean(x²) + eps) per row. */
export function refInvRms(x: Vec, rows: number, dim: number, eps: number): Float64Array {
  return perRow(x, rows, dim, (row) => 1 / Math.sqrt(sum(row.map((v) => v * v)) / dim + eps));
}

export function refRmsNorm(x: Vec, weight: Vec, rows: number, dim: number, eps: number): Float64Array {
  const inv = refInvRms(x, rows, dim, eps);
  return mapRows(x, rows, dim, (row, r) => row.map((v, j) => v * inv[r] * weight[j]));
}

/** Mean per row. */
export function refRowMean(x: Vec, rows: number, dim: number): Float64Array {
  return perRow(x, rows, dim, (row) => sum(row) / dim);
}

/** 1 / sqrt(biased variance + eps) per row. */
export function refRowRstd(x: Vec, rows: number, dim: number, eps: number): Float64Array {
  const mean = refRowMean(x, rows, dim);
  return perRow(x, rows, dim, (row, r) => 1 / Math.sqrt(sum(row.map((v) => (v - mean[r]) ** 2)) / dim + eps));
}

export function refLayerNorm(x: Vec, weight: Vec, bias: Vec, rows: number, dim: number, eps: number): Float64Array {
  const mean = refRowMean(x, rows, dim);
  const rstd = refRowRstd(x, rows, dim, eps);
  return mapRows(x, rows, dim, (row, r) => row.map((v, j) => (v - mean[r]) * rstd[r] * weight[j] + bias[j]));
}

/** log Σ exp(x[r,:]) per row. */
export function refLogSumExp(x: Vec, rows: number, dim: number): Float64Array {
  return perRow(x, rows, dim, (row) => {
    const mx = max(row);
    return mx + Math.log(sum(row.map((v) => Math.exp(v - mx))));
  });
}

export function refLogSoftmax(x: Vec, rows: number, dim: number): Float64Array {
  const lse = refLogSumExp(x, rows, dim);
  return mapRows(x, rows, dim, (row, r) => row.map((v) => v - lse[r]));
}

export function refSoftmax(x: Vec, rows: number, dim: number): Float64Array {
  return refLogSoftmax(x, rows, dim).map(Math.exp);
}

/** x[r, t_r] − lse[r], 0 for a negative target. */
export function refGatherLogProbs(logits: Vec, targets: Vec, rows: number, vocab: number): Float64Array {
  const logp = refLogSoftmax(logits, rows, vocab);
  return perRow(logp, rows, vocab, (row, r) => (targets[r] < 0 ? 0 : row[targets[r]]));
}

/** −Σ p·log p per row. */
export function refEntropy(logits: Vec, rows: number, vocab: number): Float64Array {
  const logp = refLogSoftmax(logits, rows, vocab);
  return perRow(logp, rows, vocab, (row) => -sum(row.map((l) => Math.exp(l) * l)));
}

/** −dH[r]·p·(log p + H_r) per row: the analytic backward of refEntropy (for vocabularies too large for refVjp). */
export function refEntropyBackward(logits: Vec, dH: Vec, rows: number, vocab: number): Float64Array {
  const logp = refLogSoftmax(logits, rows, vocab);
  const h = refEntropy(logits, rows, vocab);
  return logp.map((l, i) => {
    const r = Math.floor(i / vocab);
    return -dH[r]! * Math.exp(l) * (l + h[r]!);
  });
}

/** dLogProb[r]·(onehot(t_r) − softmax(x[r,:])), zero rows for negative targets (the analytic backward). */
export function refGatherLogProbsBackward(
  logits: Vec,
  targets: Vec,
  dLogProb: Vec,
  rows: number,
  vocab: number,
): Float64Array {
  const p = refSoftmax(logits, rows, vocab);
  return mapRows(p, rows, vocab, (row, r) =>
    row.map((pj, j) => (targets[r] < 0 ? 0 : dLogProb[r] * ((j === targets[r] ? 1 : 0) - pj))),
  );
}

/** Rotate-half rotary embedding of x [rows, heads, headDim] by the angles of the cos/sin tables. */
export function refRope(
  x: Vec,
  positions: Vec,
  cos: Vec,
  sin: Vec,
  rows: number,
  heads: number,
  headDim: number,
  inverse: boolean,
): Float64Array {
  const half = headDim / 2;
  const out = Float64Array.from(x);
  for (let r = 0; r < rows; r++)
    for (let h = 0; h < heads; h++)
      for (let i = 0; i < half; i++) {
        const c = cos[positions[r] * half + i];
        const s = (inverse ? -1 : 1) * sin[positions[r] * half + i];
        const o = (r * heads + h) * headDim;
        out[o + i] = x[o + i] * c - x[o + i + half] * s;
        out[o + i + half] = x[o + i + half] * c + x[o + i] * s;
      }
  return out;
}

export function refSwiglu(gate: Vec, up: Vec, n: number): Float64Array {
  return Float64Array.from({ length: n }, (_, i) => (gate[i] / (1 + Math.exp(-gate[i]))) * up[i]);
}

export function refGelu(x: Vec, n: number): Float64Array {
  const c = Math.sqrt(2 / Math.PI);
  return Float64Array.from({ length: n }, (_, i) => 0.5 * x[i] * (1 + Math.tanh(c * (x[i] + 0.044715 * x[i] ** 3))));
}

/** Output [B,T,Hq,D] and log-sum-exp [B,Hq,T] of causal attention (−∞ lse and zero output when all keys are masked). */
export function refAttention(
  q: Vec,
  k: Vec,
  v: Vec,
  s: AttentionShape,
  keyStart?: Vec,
): { out: Float64Array; lse: Float64Array } {
  const { batch: B, seqLen: T, queryHeads: Hq, kvHeads: Hkv, headDim: D } = s;
  const out = new Float64Array(B * T * Hq * D);
  const lse = new Float64Array(B * Hq * T);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < Hq; h++)
      for (let i = 0; i < T; i++) {
        const g = Math.floor(h / (Hq / Hkv));
        const kvAt = (j: number) => ((b * T + j) * Hkv + g) * D;
        const qAt = ((b * T + i) * Hq + h) * D;
        const keys = range(i + 1).filter((j) => j >= (keyStart?.[b] ?? 0));
        const row = attendRef(q, qAt, k, v, keys.map(kvAt), D, s.scale ?? 1 / Math.sqrt(D));
        for (let d = 0; d < D; d++) out[qAt + d] = row.out[d];
        lse[(b * Hq + h) * T + i] = row.lse;
      }
  return { out, lse };
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/**
 * One query (q[qAt..qAt+dim)) against the keys and values starting at the offsets `rows` of k and v: the
 * softmax-weighted average of the values (zeros for no rows) and the log-sum-exp of the scores (−∞ for no rows).
 */
function attendRef(
  q: Vec,
  qAt: number,
  k: Vec,
  v: Vec,
  rows: number[],
  dim: number,
  scale: number,
): { out: number[]; lse: number } {
  const scores = rows.map((o) => scale * sum(range(dim).map((d) => q[qAt + d] * k[o + d])));
  if (scores.length === 0) return { out: new Array<number>(dim).fill(0), lse: -Infinity };
  const mx = max(scores);
  const lse = mx + Math.log(sum(scores.map((x) => Math.exp(x - mx))));
  const out = range(dim).map((d) => sum(scores.map((x, j) => Math.exp(x - lse) * v[rows[j] + d])));
  return { out, lse };
}

/** Geometry of one decoding step (the scalar arguments of attentionDecode). */
export interface DecodeShape {
  batch: number;
  queryHeads: number;
  kvHeads: number;
  headDim: number;
  /** Cache capacity S in positions. */
  capacity: number;
  /** Cached positions 0..length-1. */
  length: number;
  scale: number;
}

/** One decoding step: q [B,Hq,D] against caches [B,Hkv,S,D] holding positions keyStart[b]..length-1. */
export function refAttentionDecode(q: Vec, kCache: Vec, vCache: Vec, s: DecodeShape, keyStart?: Vec): Float64Array {
  const { batch, queryHeads, kvHeads, headDim } = s;
  const out = new Float64Array(batch * queryHeads * headDim);
  for (let b = 0; b < batch; b++)
    for (let h = 0; h < queryHeads; h++) {
      const g = Math.floor(h / (queryHeads / kvHeads));
      const kvAt = (j: number) => ((b * kvHeads + g) * s.capacity + j) * headDim;
      const qAt = (b * queryHeads + h) * headDim;
      const keys = range(s.length).filter((j) => j >= (keyStart?.[b] ?? 0));
      const row = attendRef(q, qAt, kCache, vCache, keys.map(kvAt), headDim, s.scale);
      for (let d = 0; d < headDim; d++) out[qAt + d] = row.out[d];
    }
  return out;
}

/** Hyper-parameters of one AdamW step. */
export interface AdamwConfig {
  lr: number;
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
  step: number;
}

/** One AdamW step (PyTorch's formulation); returns the new param, m and v. */
export function refAdamw(
  param: Vec,
  grad: Vec,
  m: Vec,
  v: Vec,
  cfg: AdamwConfig,
): { param: Float64Array; m: Float64Array; v: Float64Array } {
  const { lr, beta1, beta2, eps, weightDecay, step } = cfg;
  const n = param.length;
  const m2 = Float64Array.from({ length: n }, (_, i) => beta1 * m[i] + (1 - beta1) * grad[i]);
  const v2 = Float64Array.from({ length: n }, (_, i) => beta2 * v[i] + (1 - beta2) * grad[i] ** 2);
  const bc1 = 1 - beta1 ** step;
  const bc2 = 1 - beta2 ** step;
  const p2 = Float64Array.from(
    { length: n },
    (_, i) => param[i] * (1 - lr * weightDecay) - (lr / bc1) * (m2[i] / (Math.sqrt(v2[i]) / Math.sqrt(bc2) + eps)),
  );
  return { param: p2, m: m2, v: v2 };
}

export function refAddBias(x: Vec, bias: Vec, rows: number, dim: number): Float64Array {
  return mapRows(x, rows, dim, (row) => row.map((v, j) => v + bias[j]));
}

/** Σ_r dy[r, j] per column j. */
export function refSumRows(dy: Vec, rows: number, dim: number): Float64Array {
  return Float64Array.from({ length: dim }, (_, j) => sum(range(rows).map((r) => dy[r * dim + j])));
}

/** y with y[i] + alpha·x[i] for i < n. */
export function refAxpy(alpha: number, x: Vec, y: Vec, n: number): Float64Array {
  return Float64Array.from(y, (yi, i) => (i < n ? yi + alpha * x[i] : yi));
}

/** a[i]·b[i] for i < n. */
export function refMul(a: Vec, b: Vec, n: number): Float64Array {
  return Float64Array.from({ length: n }, (_, i) => a[i] * b[i]);
}

/** x with x[i]·alpha for i < n. */
export function refScale(x: Vec, alpha: number, n: number): Float64Array {
  return Float64Array.from(x, (xi, i) => (i < n ? xi * alpha : xi));
}

export function refSumSquares(x: Vec, n: number): number {
  return sum(range(n).map((i) => x[i] * x[i]));
}

export function refAllFinite(x: Vec, n: number): boolean {
  return range(n).every((i) => Number.isFinite(x[i]));
}

export function refEmbedding(table: Vec, ids: Vec, rows: number, dim: number): Float64Array {
  return Float64Array.from({ length: rows * dim }, (_, e) => table[ids[Math.floor(e / dim)] * dim + (e % dim)]);
}

/** dTable after dTable[ids[r], :] += dOut[r, :] for every r. */
export function refEmbeddingBackward(dOut: Vec, ids: Vec, dTable: Vec, rows: number, dim: number): Float64Array {
  const out = Float64Array.from(dTable);
  for (let r = 0; r < rows; r++) for (let j = 0; j < dim; j++) out[ids[r] * dim + j] += dOut[r * dim + j];
  return out;
}

/**
 * The vector–Jacobian product dyᵀ·∂f/∂x by central differences in float64: the gradient a backward kernel must
 * produce for the input x of f when the output gradient is dy.
 */
export function refVjp(f: (x: Float64Array) => Float64Array, x: Vec, dy: Vec, h = 1e-5): Float64Array {
  const at = Float64Array.from(x);
  const grad = new Float64Array(at.length);
  for (let i = 0; i < at.length; i++) {
    const x0 = at[i];
    at[i] = x0 + h;
    const plus = f(at);
    at[i] = x0 - h;
    const minus = f(at);
    at[i] = x0;
    let s = 0;
    for (let o = 0; o < plus.length; o++) s += dy[o] * (plus[o] - minus[o]);
    grad[i] = s / (2 * h);
  }
  return grad;
}
