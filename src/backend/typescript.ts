/**
 * The pure-TypeScript backend: every kernel of `Kernels` on plain Float32Arrays, no native code. It is the fallback
 * when the addon cannot load and the second opinion the tests compare the addon against. Sums are accumulated in
 * float64 (JavaScript numbers) and rounded to float32 on store. Not reentrant (module-level scratch buffers), which is
 * fine since every kernel is synchronous.
 */
import { resolveGemm, type ResolvedGemm } from './gemm-args.js';
import { bf16ToF32, f32ToBf16 } from './bf16-bits.js';
import type { AttentionShape, F32, I32, Kernels } from './kernels.js';

// ---------------------------------------------------------------------------------------------------------------
// Scratch buffers

/** Named scratch slots, so that kernels needing several buffers at once never hand out the same one twice. */
const enum Slot {
  Scores,
  Acc,
  DKey,
  DValue,
  Rows,
}
const scratch64: Float64Array[] = [];
let packA: F32 = new Float32Array(0);
let packB: F32 = new Float32Array(0);

/** A float64 scratch buffer of at least n elements (contents unspecified). */
function scratch(slot: Slot, n: number): Float64Array {
  const have = scratch64[slot];
  if (have && have.length >= n) return have;
  const grown = new Float64Array(Math.max(n, 2 * (have?.length ?? 0)));
  scratch64[slot] = grown;
  return grown;
}

/** `buf` when it holds n elements, else a larger Float32Array (contents unspecified). */
function atLeast(buf: F32, n: number): F32 {
  return buf.length >= n ? buf : new Float32Array(Math.max(n, 2 * buf.length));
}

// ---------------------------------------------------------------------------------------------------------------
// gemm: packed panels and a 4×4 register tile for large products, a direct loop for a few rows

/** A strided matrix: element (i, j) is data[off + i·rs + j·cs]. */
interface Strided {
  data: F32;
  off: number;
  rs: number;
  cs: number;
}

/** Register tile: MR rows of A by NR columns of B. */
const MR = 4;
const NR = 4;
/** Cache blocks: KC of the shared dimension, NC columns of B (a packed KC×NC block of B stays in L2). */
const KC = 256;
const NC = 256;
const tile = new Float64Array(MR * NR);

const gemm: Kernels['gemm'] = (args) => {
  const g = resolveGemm(args);
  if (g.m <= 0 || g.n <= 0) return;
  // bf16 operands: their exact float32 values, so the fp32 product below is the bf16 product with fp32 accumulation.
  if (g.a instanceof Uint16Array) g.a = bf16ToF32(g.a);
  if (g.b instanceof Uint16Array) g.b = bf16ToF32(g.b);
  for (let t = 0; t < g.batch; t++) {
    const c: Strided = { data: g.c, off: g.cOff + t * g.strideC, rs: g.ldc, cs: 1 };
    scaleMatrix(c, g.m, g.n, g.beta);
    if (g.k <= 0 || g.alpha === 0) continue;
    const a = operand(g.a, g.aOff + t * g.strideA, g.lda, g.transA);
    const b = operand(g.b, g.bOff + t * g.strideB, g.ldb, g.transB);
    if (g.m < MR) gemmRows(a, b, c, g);
    else gemmPacked(a, b, c, g);
  }
};

/** The view of op(X) for X stored with leading dimension ld. */
function operand(data: F32, off: number, ld: number, trans: boolean): Strided {
  return trans ? { data, off, rs: 1, cs: ld } : { data, off, rs: ld, cs: 1 };
}

/** C ← beta·C; beta = 0 overwrites (NaN in C does not survive), as BLAS does. */
function scaleMatrix(c: Strided, m: number, n: number, beta: number): void {
  if (beta === 1) return;
  for (let i = 0; i < m; i++) {
    const row = c.off + i * c.rs;
    if (beta === 0) c.data.fill(0, row, row + n);
    else for (let j = 0; j < n; j++) c.data[row + j] *= beta;
  }
}

/** C += alpha·A·B without packing, for products with fewer than MR rows (decode-sized matrix-vector work). */
function gemmRows(a: Strided, b: Strided, c: Strided, g: ResolvedGemm): void {
  const { m, n, k, alpha } = g;
  const cd = c.data;
  for (let i = 0; i < m; i++) {
    const cRow = c.off + i * c.rs;
    const aRow = a.off + i * a.rs;
    if (b.cs === 1) {
      // B rows are contiguous: accumulate scaled rows of B into the row of C.
      for (let p = 0; p < k; p++) {
        const s = alpha * a.data[aRow + p * a.cs];
        const bRow = b.off + p * b.rs;
        for (let j = 0; j < n; j++) cd[cRow + j] += s * b.data[bRow + j];
      }
    } else {
      // B columns are contiguous: one dot product per element of C.
      for (let j = 0; j < n; j++) {
        const bCol = b.off + j * b.cs;
        let s = 0;
        for (let p = 0; p < k; p++) s += a.data[aRow + p * a.cs] * b.data[bCol + p * b.rs];
        cd[cRow + j] += alpha * s;
      }
    }
  }
}

/** C += alpha·A·B through packed panels: blocks of KC along k and NC along n, MR×NR register tiles. */
function gemmPacked(a: Strided, b: Strided, c: Strided, g: ResolvedGemm): void {
  const { m, n, k } = g;
  for (let pc = 0; pc < k; pc += KC) {
    const kc = Math.min(KC, k - pc);
    packA = atLeast(packA, Math.ceil(m / MR) * MR * kc);
    packPanels(packA, a.data, a.off + pc * a.cs, a.rs, a.cs, m, kc, MR);
    for (let jc = 0; jc < n; jc += NC) {
      const nc = Math.min(NC, n - jc);
      packB = atLeast(packB, Math.ceil(nc / NR) * NR * kc);
      packPanels(packB, b.data, b.off + pc * b.rs + jc * b.cs, b.cs, b.rs, nc, kc, NR);
      multiplyBlock(c, m, jc, nc, kc, g.alpha);
    }
  }
}

/**
 * Copies `count` lines (line r at src[off + r·lineStride + p·stepStride], p < kc) into panels of `width` lines
 * interleaved by p: dst[(panel·kc + p)·width + r mod width]. Lines past `count` are zero, padding the last panel.
 */
function packPanels(
  dst: F32,
  src: F32,
  off: number,
  lineStride: number,
  stepStride: number,
  count: number,
  kc: number,
  width: number,
): void {
  const panels = Math.ceil(count / width);
  for (let panel = 0; panel < panels; panel++) {
    const base = panel * kc * width;
    for (let r = 0; r < width; r++) {
      const line = panel * width + r;
      if (line >= count) {
        for (let p = 0; p < kc; p++) dst[base + p * width + r] = 0;
        continue;
      }
      const s = off + line * lineStride;
      for (let p = 0; p < kc; p++) dst[base + p * width + r] = src[s + p * stepStride];
    }
  }
}

/** C[:, jc..jc+nc) += alpha·(packed A)·(packed B) for one KC block. */
function multiplyBlock(c: Strided, m: number, jc: number, nc: number, kc: number, alpha: number): void {
  for (let i0 = 0; i0 < m; i0 += MR) {
    const aBase = (i0 / MR) * kc * MR;
    const rows = Math.min(MR, m - i0);
    for (let j0 = 0; j0 < nc; j0 += NR) {
      microKernel(packA, aBase, packB, (j0 / NR) * kc * NR, kc);
      storeTile(c, i0, jc + j0, rows, Math.min(NR, nc - j0), alpha);
    }
  }
}

/** tile = (MR×kc panel of A)·(kc×NR panel of B), sixteen accumulators in registers. */
// prettier-ignore
function microKernel(pa: F32, ia: number, pb: F32, ib: number, kc: number): void {
  let c00 = 0, c01 = 0, c02 = 0, c03 = 0, c10 = 0, c11 = 0, c12 = 0, c13 = 0;
  let c20 = 0, c21 = 0, c22 = 0, c23 = 0, c30 = 0, c31 = 0, c32 = 0, c33 = 0;
  for (let p = 0; p < kc; p++, ia += MR, ib += NR) {
    const a0 = pa[ia], a1 = pa[ia + 1], a2 = pa[ia + 2], a3 = pa[ia + 3];
    const b0 = pb[ib], b1 = pb[ib + 1], b2 = pb[ib + 2], b3 = pb[ib + 3];
    c00 += a0 * b0; c01 += a0 * b1; c02 += a0 * b2; c03 += a0 * b3;
    c10 += a1 * b0; c11 += a1 * b1; c12 += a1 * b2; c13 += a1 * b3;
    c20 += a2 * b0; c21 += a2 * b1; c22 += a2 * b2; c23 += a2 * b3;
    c30 += a3 * b0; c31 += a3 * b1; c32 += a3 * b2; c33 += a3 * b3;
  }
  tile[0] = c00; tile[1] = c01; tile[2] = c02; tile[3] = c03;
  tile[4] = c10; tile[5] = c11; tile[6] = c12; tile[7] = c13;
  tile[8] = c20; tile[9] = c21; tile[10] = c22; tile[11] = c23;
  tile[12] = c30; tile[13] = c31; tile[14] = c32; tile[15] = c33;
}

/** C[i0.., j0..] += alpha·tile over the rows×cols part of the tile that lies inside C. */
function storeTile(c: Strided, i0: number, j0: number, rows: number, cols: number, alpha: number): void {
  for (let r = 0; r < rows; r++) {
    const row = c.off + (i0 + r) * c.rs + j0;
    for (let s = 0; s < cols; s++) c.data[row + s] += alpha * tile[r * NR + s];
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Normalisation

const rmsNorm: Kernels['rmsNorm'] = (x, weight, out, invRms, rows, dim, eps) => {
  for (let r = 0, o = 0; r < rows; r++, o += dim) {
    let ss = 0;
    for (let j = 0; j < dim; j++) ss += x[o + j] * x[o + j];
    const inv = 1 / Math.sqrt(ss / dim + eps);
    invRms[r] = inv;
    for (let j = 0; j < dim; j++) out[o + j] = x[o + j] * inv * weight[j];
  }
};

const rmsNormBackward: Kernels['rmsNormBackward'] = (dy, x, weight, invRms, dx, dWeight, rows, dim) => {
  for (let r = 0, o = 0; r < rows; r++, o += dim) {
    const inv = invRms[r];
    let dot = 0;
    for (let j = 0; j < dim; j++) dot += dy[o + j] * weight[j] * x[o + j];
    const c = (inv * inv * inv * dot) / dim;
    for (let j = 0; j < dim; j++) {
      const g = dy[o + j];
      dWeight[j] += g * x[o + j] * inv;
      dx[o + j] = inv * g * weight[j] - c * x[o + j];
    }
  }
};

const layerNorm: Kernels['layerNorm'] = (x, weight, bias, out, mean, rstd, rows, dim, eps) => {
  for (let r = 0, o = 0; r < rows; r++, o += dim) {
    let sum = 0;
    for (let j = 0; j < dim; j++) sum += x[o + j];
    const mu = sum / dim;
    let sq = 0;
    for (let j = 0; j < dim; j++) sq += (x[o + j] - mu) * (x[o + j] - mu);
    const rs = 1 / Math.sqrt(sq / dim + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (let j = 0; j < dim; j++) out[o + j] = (x[o + j] - mu) * rs * weight[j] + bias[j];
  }
};

const layerNormBackward: Kernels['layerNormBackward'] = (dy, x, weight, mean, rstd, dx, dWeight, dBias, rows, dim) => {
  for (let r = 0, o = 0; r < rows; r++, o += dim) {
    const mu = mean[r];
    const rs = rstd[r];
    let sumG = 0;
    let sumGX = 0;
    for (let j = 0; j < dim; j++) {
      const g = dy[o + j] * weight[j];
      sumG += g;
      sumGX += g * (x[o + j] - mu) * rs;
    }
    const meanG = sumG / dim;
    const meanGX = sumGX / dim;
    for (let j = 0; j < dim; j++) {
      const d = dy[o + j];
      const xhat = (x[o + j] - mu) * rs;
      dWeight[j] += d * xhat;
      dBias[j] += d;
      dx[o + j] = rs * (d * weight[j] - meanG - xhat * meanGX);
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Softmax family

/** max of x[off..off+dim). */
function rowMax(x: F32, off: number, dim: number): number {
  let mx = -Infinity;
  for (let j = 0; j < dim; j++) if (x[off + j] > mx) mx = x[off + j];
  return mx;
}

/** log Σ exp(x[off..off+dim)), stable. */
function rowLogSumExp(t: Transcendentals, x: F32, off: number, dim: number): number {
  const mx = rowMax(x, off, dim);
  let sum = 0;
  for (let j = 0; j < dim; j++) sum += t.exp(x[off + j] - mx);
  return mx + t.log(sum);
}

const argmaxRows: Kernels['argmaxRows'] = (x, out, rows, dim) => {
  for (let r = 0, o = 0; r < rows; r++, o += dim) {
    let best = 0;
    for (let j = 1; j < dim; j++) if (x[o + j] > x[o + best]) best = j;
    out[r] = best;
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Position embedding and activations

const rope: Kernels['rope'] = (x, positions, cos, sin, rows, heads, headDim, inverse) => {
  const half = headDim >> 1;
  const sign = inverse ? -1 : 1;
  for (let r = 0; r < rows; r++) {
    const table = positions[r] * half;
    for (let h = 0; h < heads; h++) {
      const o = (r * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const c = cos[table + i];
        const s = sign * sin[table + i];
        const x1 = x[o + i];
        const x2 = x[o + i + half];
        x[o + i] = x1 * c - x2 * s;
        x[o + i + half] = x2 * c + x1 * s;
      }
    }
  }
};

const GELU_C = Math.sqrt(2 / Math.PI);
const GELU_A = 0.044715;

const gelu: Kernels['gelu'] = (x, out, n) => {
  for (let i = 0; i < n; i++) {
    const v = x[i];
    out[i] = 0.5 * v * (1 + Math.tanh(GELU_C * (v + GELU_A * v * v * v)));
  }
};

const geluBackward: Kernels['geluBackward'] = (dy, x, dx, n) => {
  for (let i = 0; i < n; i++) {
    const v = x[i];
    const t = Math.tanh(GELU_C * (v + GELU_A * v * v * v));
    const du = GELU_C * (1 + 3 * GELU_A * v * v);
    dx[i] = dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * du);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Attention

/**
 * Keys and values of one kv head visible to one query: rows j < count at data[off + j·stride], each `dim` long, in
 * both k and v (same layout).
 */
interface KeySpan {
  k: F32;
  v: F32;
  off: number;
  stride: number;
  count: number;
  dim: number;
}

/** The first unmasked key position of sequence b (0 without keyStart). */
function firstKey(keyStart: I32 | undefined, b: number): number {
  return keyStart ? Math.max(0, keyStart[b]) : 0;
}

/** scores[j] = scale·q·k_j for the span; returns their maximum. */
function scoreKeys(q: F32, qOff: number, span: KeySpan, scale: number, scores: Float64Array): number {
  let mx = -Infinity;
  for (let j = 0; j < span.count; j++) {
    const ko = span.off + j * span.stride;
    let s = 0;
    for (let d = 0; d < span.dim; d++) s += q[qOff + d] * span.k[ko + d];
    s *= scale;
    scores[j] = s;
    if (s > mx) mx = s;
  }
  return mx;
}

/**
 * out[outOff..+dim) = softmax(scale·q·K)·V over the span; returns the log-sum-exp of the scores (−∞ and out = 0 when
 * the span is empty, i.e. every key is masked).
 */
function attendOne(
  t: Transcendentals,
  q: F32,
  qOff: number,
  span: KeySpan,
  scale: number,
  out: F32,
  outOff: number,
): number {
  const { dim } = span;
  const scores = scratch(Slot.Scores, span.count);
  const acc = scratch(Slot.Acc, dim).fill(0, 0, dim);
  const mx = scoreKeys(q, qOff, span, scale, scores);
  let sum = 0;
  for (let j = 0; j < span.count; j++) {
    const p = t.exp(scores[j] - mx);
    sum += p;
    const vo = span.off + j * span.stride;
    for (let d = 0; d < dim; d++) acc[d] += p * span.v[vo + d];
  }
  const inv = sum > 0 ? 1 / sum : 0;
  for (let d = 0; d < dim; d++) out[outOff + d] = acc[d] * inv;
  return sum > 0 ? mx + t.log(sum) : -Infinity;
}

/** Calls fn for every (batch, query head, query position) with the offsets of [B,T,H,D] tensors. */
function forEachQuery(
  s: AttentionShape,
  fn: (b: number, h: number, i: number, qOff: number, kvOff: number, lseIdx: number) => void,
): void {
  const { batch, seqLen: T, queryHeads: Hq, kvHeads: Hkv, headDim: D } = s;
  const group = Hq / Hkv;
  for (let b = 0; b < batch; b++)
    for (let h = 0; h < Hq; h++) {
      const g = Math.floor(h / group);
      for (let i = 0; i < T; i++)
        fn(b, h, i, ((b * T + i) * Hq + h) * D, b * T * Hkv * D + g * D, (b * Hq + h) * T + i);
    }
}

/** The keys query i of sequence b sees in a [B,T,Hkv,D] tensor: positions keyStart..i of its kv head. */
function causalSpan(k: F32, v: F32, s: AttentionShape, kvOff: number, first: number, i: number): KeySpan {
  const stride = s.kvHeads * s.headDim;
  return { k, v, off: kvOff + first * stride, stride, count: Math.max(0, i + 1 - first), dim: s.headDim };
}

/** Where attentionBackward reads the output gradient and writes the input gradients. */
interface AttentionGrads {
  dOut: F32;
  out: F32;
  dq: F32;
  dk64: Float64Array;
  dv64: Float64Array;
}

/** Backward of one query row (offset qOff in q, dOut, out and dq): writes dq, accumulates dk64, dv64 over the span. */
function backwardOne(
  t: Transcendentals,
  q: F32,
  qOff: number,
  span: KeySpan,
  scale: number,
  lse: number,
  g: AttentionGrads,
): void {
  const { dim } = span;
  const dqAcc = scratch(Slot.Acc, dim).fill(0, 0, dim);
  let rowDot = 0; // Σ dO·O
  for (let d = 0; d < dim; d++) rowDot += g.dOut[qOff + d] * g.out[qOff + d];
  const scores = scratch(Slot.Scores, span.count);
  scoreKeys(q, qOff, span, scale, scores);
  for (let j = 0; j < span.count; j++) {
    const o = span.off + j * span.stride;
    const p = t.exp(scores[j] - lse);
    let dp = 0;
    for (let d = 0; d < dim; d++) dp += g.dOut[qOff + d] * span.v[o + d];
    const ds = scale * p * (dp - rowDot);
    for (let d = 0; d < dim; d++) {
      g.dv64[o + d] += p * g.dOut[qOff + d];
      g.dk64[o + d] += ds * q[qOff + d];
      dqAcc[d] += ds * span.k[o + d];
    }
  }
  for (let d = 0; d < dim; d++) g.dq[qOff + d] = dqAcc[d];
}

/**
 * exp and log, and the rounding of the scalars the native glue passes as float: Math's and none for this backend, the
 * reproducible mode's polynomials and Math.fround for its twin (reproducible.ts).
 */
export interface Transcendentals {
  exp(x: number): number;
  log(x: number): number;
  scalar(x: number): number;
}

/** The softmax family on exp and log computed with `t`: softmax, log-softmax, gathered log-probs and entropy. */
function softmaxKernels(
  t: Transcendentals,
): Pick<Kernels, 'softmax' | 'logSoftmax' | 'gatherLogProbs' | 'gatherLogProbsBackward' | 'entropyBackward'> {
  const softmax: Kernels['softmax'] = (x, out, rows, dim) => {
    for (let r = 0, o = 0; r < rows; r++, o += dim) {
      const lse = rowLogSumExp(t, x, o, dim);
      for (let j = 0; j < dim; j++) out[o + j] = t.exp(x[o + j] - lse);
    }
  };

  const logSoftmax: Kernels['logSoftmax'] = (x, out, rows, dim) => {
    for (let r = 0, o = 0; r < rows; r++, o += dim) {
      const lse = rowLogSumExp(t, x, o, dim);
      for (let j = 0; j < dim; j++) out[o + j] = x[o + j] - lse;
    }
  };

  const gatherLogProbs: Kernels['gatherLogProbs'] = (logits, targets, logProb, lse, rows, vocab, entropy) => {
    for (let r = 0, o = 0; r < rows; r++, o += vocab) {
      const mx = rowMax(logits, o, vocab);
      let sum = 0;
      let weighted = 0; // Σ e^(x−max)·(x−max), for the entropy
      for (let j = 0; j < vocab; j++) {
        const z = logits[o + j] - mx;
        const e = t.exp(z);
        sum += e;
        weighted += e > 0 ? e * z : 0; // p·log p → 0 as p → 0, where e·z would be 0·−∞
      }
      const l = mx + t.log(sum);
      lse[r] = l;
      const target = targets[r];
      logProb[r] = target < 0 ? 0 : logits[o + target] - l;
      if (entropy) entropy[r] = t.log(sum) - weighted / sum;
    }
  };

  const gatherLogProbsBackward: Kernels['gatherLogProbsBackward'] = (
    logits,
    targets,
    lse,
    dLogProb,
    dLogits,
    rows,
    vocab,
  ) => {
    for (let r = 0, o = 0; r < rows; r++, o += vocab) {
      const target = targets[r];
      if (target < 0) {
        dLogits.fill(0, o, o + vocab);
        continue;
      }
      const g = dLogProb[r];
      const l = lse[r];
      for (let j = 0; j < vocab; j++) dLogits[o + j] = (j === target ? g : 0) - g * t.exp(logits[o + j] - l);
    }
  };

  const entropyBackward: Kernels['entropyBackward'] = (logits, lse, entropy, dEntropy, dLogits, rows, vocab) => {
    for (let r = 0, o = 0; r < rows; r++, o += vocab) {
      const g = dEntropy[r];
      if (g === 0) continue;
      const l = lse[r];
      const h = entropy[r];
      for (let j = 0; j < vocab; j++) {
        const logP = logits[o + j] - l;
        dLogits[o + j] -= g * t.exp(logP) * (logP + h);
      }
    }
  };

  return { softmax, logSoftmax, gatherLogProbs, gatherLogProbsBackward, entropyBackward };
}

/** SwiGLU and its backward, its sigmoid on `t`'s exp. */
function swigluKernels(t: Transcendentals): Pick<Kernels, 'swiglu' | 'swigluBackward'> {
  const sigmoid = (z: number): number => 1 / (1 + t.exp(-z));
  const swiglu: Kernels['swiglu'] = (gate, up, out, n) => {
    for (let i = 0; i < n; i++) out[i] = gate[i] * sigmoid(gate[i]) * up[i];
  };

  const swigluBackward: Kernels['swigluBackward'] = (dy, gate, up, dGate, dUp, n) => {
    for (let i = 0; i < n; i++) {
      const g = gate[i];
      const u = up[i];
      const d = dy[i];
      const s = sigmoid(g);
      dUp[i] = d * g * s;
      dGate[i] = d * u * s * (1 + g * (1 - s));
    }
  };

  return { swiglu, swigluBackward };
}

/** Causal attention (forward, backward, decode) with its softmax on `t`. */
function attentionKernels(t: Transcendentals): Pick<Kernels, 'attention' | 'attentionBackward' | 'attentionDecode'> {
  const attention: Kernels['attention'] = (q, k, v, out, lse, shape, keyStart) => {
    const scale = t.scalar(shape.scale ?? 1 / Math.sqrt(shape.headDim));
    forEachQuery(shape, (b, _h, i, qOff, kvOff, lseIdx) => {
      const span = causalSpan(k, v, shape, kvOff, firstKey(keyStart, b), i);
      lse[lseIdx] = attendOne(t, q, qOff, span, scale, out, qOff);
    });
  };

  const attentionBackward: Kernels['attentionBackward'] = (dOut, q, k, v, out, lse, dq, dk, dv, shape, keyStart) => {
    const scale = t.scalar(shape.scale ?? 1 / Math.sqrt(shape.headDim));
    const kvLen = shape.batch * shape.seqLen * shape.kvHeads * shape.headDim;
    // dk and dv are sums over queries and query heads: accumulate them in float64, indexed like k and v.
    const dk64 = scratch(Slot.DKey, kvLen).fill(0, 0, kvLen);
    const dv64 = scratch(Slot.DValue, kvLen).fill(0, 0, kvLen);
    const grads: AttentionGrads = { dOut, out, dq, dk64, dv64 };
    forEachQuery(shape, (b, _h, i, qOff, kvOff, lseIdx) => {
      const span = causalSpan(k, v, shape, kvOff, firstKey(keyStart, b), i);
      backwardOne(t, q, qOff, span, scale, lse[lseIdx], grads);
    });
    for (let x = 0; x < kvLen; x++) {
      dk[x] = dk64[x];
      dv[x] = dv64[x];
    }
  };

  const attentionDecode: Kernels['attentionDecode'] = (
    q,
    kCache,
    vCache,
    out,
    batch,
    queryHeads,
    kvHeads,
    headDim,
    capacity,
    length,
    scale,
    keyStart,
  ) => {
    const group = queryHeads / kvHeads;
    for (let b = 0; b < batch; b++) {
      const first = Math.min(firstKey(keyStart, b), length);
      for (let h = 0; h < queryHeads; h++) {
        const g = Math.floor(h / group);
        const off = ((b * kvHeads + g) * capacity + first) * headDim;
        const span: KeySpan = { k: kCache, v: vCache, off, stride: headDim, count: length - first, dim: headDim };
        const qOff = (b * queryHeads + h) * headDim;
        attendOne(t, q, qOff, span, t.scalar(scale), out, qOff);
      }
    }
  };

  return { attention, attentionBackward, attentionDecode };
}

/** The kernels built on exp and log (softmax family, SwiGLU, attention), computing with `t`. */
export function transcendentalKernels(
  t: Transcendentals,
): Pick<
  Kernels,
  | 'softmax'
  | 'logSoftmax'
  | 'gatherLogProbs'
  | 'gatherLogProbsBackward'
  | 'entropyBackward'
  | 'swiglu'
  | 'swigluBackward'
  | 'attention'
  | 'attentionBackward'
  | 'attentionDecode'
> {
  return { ...softmaxKernels(t), ...swigluKernels(t), ...attentionKernels(t) };
}

// ---------------------------------------------------------------------------------------------------------------
// Optimiser and elementwise helpers

const adamw: Kernels['adamw'] = (param, grad, m, v, n, lr, beta1, beta2, eps, weightDecay, step) => {
  const decay = 1 - lr * weightDecay;
  const stepSize = lr / (1 - Math.pow(beta1, step));
  const bc2Sqrt = Math.sqrt(1 - Math.pow(beta2, step));
  for (let i = 0; i < n; i++) {
    const g = grad[i];
    param[i] *= decay;
    m[i] = beta1 * m[i] + (1 - beta1) * g;
    v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    param[i] -= (stepSize * m[i]) / (Math.sqrt(v[i]) / bc2Sqrt + eps);
  }
};

const addBias: Kernels['addBias'] = (x, bias, out, rows, dim) => {
  for (let r = 0, o = 0; r < rows; r++, o += dim) for (let j = 0; j < dim; j++) out[o + j] = x[o + j] + bias[j];
};

const sumRows: Kernels['sumRows'] = (dy, dBias, rows, dim) => {
  const acc = scratch(Slot.Rows, dim).fill(0, 0, dim);
  for (let r = 0, o = 0; r < rows; r++, o += dim) for (let j = 0; j < dim; j++) acc[j] += dy[o + j];
  for (let j = 0; j < dim; j++) dBias[j] += acc[j];
};

const axpy: Kernels['axpy'] = (alpha, x, y, n) => {
  for (let i = 0; i < n; i++) y[i] += alpha * x[i];
};

const mul: Kernels['mul'] = (a, b, out, n) => {
  for (let i = 0; i < n; i++) out[i] = a[i] * b[i];
};

const scale: Kernels['scale'] = (x, alpha, n) => {
  for (let i = 0; i < n; i++) x[i] *= alpha;
};

const roundBf16: Kernels['roundBf16'] = (x, out, n) => {
  f32ToBf16(x.subarray(0, n), out.subarray(0, n));
};

const sumSquares: Kernels['sumSquares'] = (x, n) => {
  let s = 0;
  for (let i = 0; i < n; i++) s += x[i] * x[i];
  return s;
};

const allFinite: Kernels['allFinite'] = (x, n) => {
  let s = 0; // stays 0 unless some x[i] is NaN or ±Infinity (then x·0 is NaN)
  for (let i = 0; i < n; i++) s += x[i] * 0;
  return s === 0;
};

const copyRows: Kernels['copyRows'] = (src, srcOffset, srcLd, dst, dstOffset, dstLd, rows, cols) => {
  for (let r = 0; r < rows; r++)
    dst.set(src.subarray(srcOffset + r * srcLd, srcOffset + r * srcLd + cols), dstOffset + r * dstLd);
};

const embedding: Kernels['embedding'] = (table, ids, out, rows, dim) => {
  for (let r = 0; r < rows; r++) out.set(table.subarray(ids[r] * dim, ids[r] * dim + dim), r * dim);
};

const embeddingBackward: Kernels['embeddingBackward'] = (dOut, ids, dTable, rows, dim) => {
  for (let r = 0; r < rows; r++) {
    const t = ids[r] * dim;
    const o = r * dim;
    for (let j = 0; j < dim; j++) dTable[t + j] += dOut[o + j];
  }
};

/** The pure-TypeScript backend. */
export const typescriptKernels: Kernels = {
  name: 'typescript',
  blas: 'pure TypeScript (no BLAS)',
  bf16: 'pure TypeScript: fp32 products of the widened bf16 operands',
  gemm,
  ...transcendentalKernels({ exp: Math.exp, log: Math.log, scalar: (x) => x }),
  rmsNorm,
  rmsNormBackward,
  layerNorm,
  layerNormBackward,
  argmaxRows,
  rope,
  gelu,
  geluBackward,
  adamw,
  addBias,
  sumRows,
  axpy,
  mul,
  scale,
  roundBf16,
  sumSquares,
  allFinite,
  copyRows,
  embedding,
  embeddingBackward,
};
