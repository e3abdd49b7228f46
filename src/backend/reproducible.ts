/**
 * The TypeScript backend in the reproducible mode (HACRL_REPRODUCIBLE=1, docs/reproducible.md): the kernels whose
 * result depends on an order of summation or on a transcendental function, written as native/repro_body.h writes
 * them, expression for expression. JavaScript numbers are IEEE doubles like C's doubles and a Float32Array store
 * rounds like C's (float) cast, so both compute the same bits: every sum runs in index order in one double, exp and
 * log are the polynomials below (not Math.exp, whose last bit V8 and glibc do not always agree on), and scalars the
 * native glue rounds to float (gemm's alpha and beta, axpy's and scale's alpha, attention's scale) are rounded here.
 * The other kernels of the TypeScript backend already compute exactly this.
 */
import { resolveGemm } from './gemm-args.js';
import { bf16ToF32 } from './bf16-bits.js';
import type { AttentionShape, F32, I32, Kernels } from './kernels.js';
import { typescriptKernels } from './typescript.js';

// ---------------------------------------------------------------------------------------------------------------
// exp and log from + − × / and floor only (native/repro_body.h has the derivation)

const LOG2E = 1.4426950408889634;
const LN2_HI = 6.9314718036912381649e-1;
const LN2_LO = 1.90821492927058770002e-10;
const SQRT2 = 1.4142135623730951;
const INV_INT = Array.from({ length: 14 }, (_, i) => (i === 0 ? 0 : 1 / i));
const INV_ODD = Array.from({ length: 13 }, (_, i) => 1 / (2 * i + 1));
const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);

/** 2^e for e in [-1022, 1023], exactly. */
function pow2(e: number): number {
  u32[0] = 0;
  u32[1] = (e + 1023) << 20;
  return f64[0]!;
}

/** e^x as native/repro_body.h's r_exp computes it, bit for bit. */
export function reproExp(x: number): number {
  if (x !== x) return x;
  if (x > 709.8) return Infinity;
  if (x < -745.2) return 0;
  const k = Math.floor(x * LOG2E + 0.5);
  const r = x - k * LN2_HI - k * LN2_LO;
  let p = 1;
  for (let i = 13; i >= 1; i--) p = 1 + r * p * INV_INT[i]!;
  const k1 = k >> 1;
  return p * pow2(k1) * pow2(k - k1);
}

/** log x as native/repro_body.h's r_log computes it, bit for bit. */
export function reproLog(x: number): number {
  if (x !== x || x < 0) return NaN;
  if (x === 0) return -Infinity;
  if (x === Infinity) return x;
  let e = 0;
  if (x < 2.2250738585072014e-308) {
    x *= 18014398509481984; // 2^54: a subnormal into the normal range
    e = -54;
  }
  f64[0] = x;
  const hi = u32[1]!;
  e += (hi >>> 20) - 1023;
  u32[1] = (hi & 0xfffff) | 0x3ff00000;
  let m = f64[0]!;
  if (m > SQRT2) {
    m *= 0.5;
    e += 1;
  }
  const s = (m - 1) / (m + 1);
  const z = s * s;
  let t = 0;
  for (let i = 12; i >= 1; i--) t = z * (t + INV_ODD[i]!);
  return e * LN2_HI + (e * LN2_LO + (2 * s + 2 * s * t));
}

const sigmoid = (z: number): number => 1 / (1 + reproExp(-z));

// ---------------------------------------------------------------------------------------------------------------
// gemm

const gemm: Kernels['gemm'] = (args) => {
  const g = resolveGemm(args);
  const { m, n, k, transA, transB, lda, ldb, ldc } = g;
  if (m <= 0 || n <= 0) return;
  const [alpha, beta] = [Math.fround(g.alpha), Math.fround(g.beta)];
  const a = g.a instanceof Uint16Array ? bf16ToF32(g.a) : g.a;
  const b = g.b instanceof Uint16Array ? bf16ToF32(g.b) : g.b;
  const c = g.c;
  const acc = new Float64Array(n);
  const [ars, acs] = transA ? [1, lda] : [lda, 1];
  const [brs, bcs] = transB ? [1, ldb] : [ldb, 1];
  for (let t = 0; t < g.batch; t++) {
    const [aOff, bOff, cOff] = [g.aOff + t * g.strideA, g.bOff + t * g.strideB, g.cOff + t * g.strideC];
    for (let i = 0; i < m; i++) {
      const row = cOff + i * ldc;
      if (k <= 0 || alpha === 0) {
        for (let j = 0; j < n; j++) c[row + j] = beta === 0 ? 0 : beta * c[row + j]!;
        continue;
      }
      acc.fill(0);
      for (let p = 0; p < k; p++) {
        const aip = a[aOff + i * ars + p * acs]!;
        const bp = bOff + p * brs;
        for (let j = 0; j < n; j++) acc[j] += aip * b[bp + j * bcs]!;
      }
      for (let j = 0; j < n; j++) {
        const x = alpha * acc[j]!;
        c[row + j] = beta === 0 ? x : x + beta * c[row + j]!;
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Sums over rows into a column vector (weight and bias gradients): dst[j] += Σ_r term(r, j), summed in one double.

function columnSums(rows: number, dim: number, dst: F32, term: (r: number, j: number) => number): void {
  const acc = new Float64Array(dim);
  for (let r = 0; r < rows; r++) for (let j = 0; j < dim; j++) acc[j] += term(r, j);
  for (let j = 0; j < dim; j++) dst[j] += acc[j]!;
}

const rmsNormBackward: Kernels['rmsNormBackward'] = (dy, x, weight, invRms, dx, dWeight, rows, dim) => {
  for (let r = 0, o = 0; r < rows; r++, o += dim) {
    const inv = invRms[r]!;
    let dot = 0;
    for (let j = 0; j < dim; j++) dot += dy[o + j]! * weight[j]! * x[o + j]!;
    const c = (inv * inv * inv * dot) / dim;
    for (let j = 0; j < dim; j++) dx[o + j] = inv * dy[o + j]! * weight[j]! - c * x[o + j]!;
  }
  columnSums(rows, dim, dWeight, (r, j) => dy[r * dim + j]! * x[r * dim + j]! * invRms[r]!);
};

const layerNormBackward: Kernels['layerNormBackward'] = (dy, x, weight, mean, rstd, dx, dWeight, dBias, rows, dim) => {
  for (let r = 0, o = 0; r < rows; r++, o += dim) {
    const [mu, rs] = [mean[r]!, rstd[r]!];
    let sumG = 0;
    let sumGX = 0;
    for (let j = 0; j < dim; j++) {
      const g = dy[o + j]! * weight[j]!;
      sumG += g;
      sumGX += g * (x[o + j]! - mu) * rs;
    }
    const [meanG, meanGX] = [sumG / dim, sumGX / dim];
    for (let j = 0; j < dim; j++) dx[o + j] = rs * (dy[o + j]! * weight[j]! - meanG - (x[o + j]! - mu) * rs * meanGX);
  }
  columnSums(rows, dim, dWeight, (r, j) => dy[r * dim + j]! * ((x[r * dim + j]! - mean[r]!) * rstd[r]!));
  columnSums(rows, dim, dBias, (r, j) => dy[r * dim + j]!);
};

const sumRows: Kernels['sumRows'] = (dy, dBias, rows, dim) => columnSums(rows, dim, dBias, (r, j) => dy[r * dim + j]!);

// ---------------------------------------------------------------------------------------------------------------
// Softmax family

function rowMax(x: F32, off: number, n: number): number {
  let m = -Infinity;
  for (let j = 0; j < n; j++) if (x[off + j]! > m) m = x[off + j]!;
  return m;
}

function rowLse(x: F32, off: number, n: number): number {
  const m = rowMax(x, off, n);
  let sum = 0;
  for (let j = 0; j < n; j++) sum += reproExp(x[off + j]! - m);
  return m + reproLog(sum);
}

const softmax: Kernels['softmax'] = (x, out, rows, dim) => {
  for (let r = 0, o = 0; r < rows; r++, o += dim) {
    const l = rowLse(x, o, dim);
    for (let j = 0; j < dim; j++) out[o + j] = reproExp(x[o + j]! - l);
  }
};

const logSoftmax: Kernels['logSoftmax'] = (x, out, rows, dim) => {
  for (let r = 0, o = 0; r < rows; r++, o += dim) {
    const l = rowLse(x, o, dim);
    for (let j = 0; j < dim; j++) out[o + j] = x[o + j]! - l;
  }
};

const gatherLogProbs: Kernels['gatherLogProbs'] = (logits, targets, logProb, lse, rows, vocab, entropy) => {
  for (let r = 0, o = 0; r < rows; r++, o += vocab) {
    const mx = rowMax(logits, o, vocab);
    let sum = 0;
    let weighted = 0;
    for (let j = 0; j < vocab; j++) {
      const z = logits[o + j]! - mx;
      const e = reproExp(z);
      sum += e;
      weighted += e > 0 ? e * z : 0;
    }
    const ls = reproLog(sum);
    const l = mx + ls;
    lse[r] = l;
    const t = targets[r]!;
    logProb[r] = t < 0 ? 0 : logits[o + t]! - l;
    if (entropy) entropy[r] = ls - weighted / sum;
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
    const [t, g, l] = [targets[r]!, dLogProb[r]!, lse[r]!];
    for (let j = 0; j < vocab; j++) dLogits[o + j] = t < 0 ? 0 : (j === t ? g : 0) - g * reproExp(logits[o + j]! - l);
  }
};

const entropyBackward: Kernels['entropyBackward'] = (logits, lse, entropy, dEntropy, dLogits, rows, vocab) => {
  for (let r = 0, o = 0; r < rows; r++, o += vocab) {
    const [g, l, h] = [dEntropy[r]!, lse[r]!, entropy[r]!];
    if (g === 0) continue;
    for (let j = 0; j < vocab; j++) {
      const logP = logits[o + j]! - l;
      dLogits[o + j] = dLogits[o + j]! - g * reproExp(logP) * (logP + h);
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Activations: GELU's tanh form as x·σ(2u), which keeps its precision for x ≲ −3

const GELU_K = Math.sqrt(2 / Math.PI);
const GELU_A = 0.044715;
const geluU = (v: number): number => GELU_K * (v + GELU_A * v * v * v);

const swiglu: Kernels['swiglu'] = (gate, up, out, n) => {
  for (let i = 0; i < n; i++) out[i] = gate[i]! * sigmoid(gate[i]!) * up[i]!;
};

const swigluBackward: Kernels['swigluBackward'] = (dy, gate, up, dGate, dUp, n) => {
  for (let i = 0; i < n; i++) {
    const [g, u, d] = [gate[i]!, up[i]!, dy[i]!];
    const s = sigmoid(g);
    dUp[i] = d * g * s;
    dGate[i] = d * u * s * (1 + g * (1 - s));
  }
};

const gelu: Kernels['gelu'] = (x, out, n) => {
  for (let i = 0; i < n; i++) out[i] = x[i]! * sigmoid(2 * geluU(x[i]!));
};

const geluBackward: Kernels['geluBackward'] = (dy, x, dx, n) => {
  for (let i = 0; i < n; i++) {
    const v = x[i]!;
    const s = sigmoid(2 * geluU(v));
    const du = GELU_K * (1 + 3 * GELU_A * v * v);
    dx[i] = dy[i]! * (s + v * 2 * s * (1 - s) * du);
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Attention: one query row at a time against the keys it sees

/** The keys and values one query sees: rows j < count at off + j·stride of k and v, each dim long. */
interface KeySpan {
  k: F32;
  v: F32;
  off: number;
  stride: number;
  count: number;
  dim: number;
}

/** scores[j] = (q·k_j)·scale over the span; returns their maximum. */
function scoreKeys(q: F32, qOff: number, sp: KeySpan, scale: number, scores: Float64Array): number {
  let mx = -Infinity;
  for (let j = 0; j < sp.count; j++) {
    const ko = sp.off + j * sp.stride;
    let s = 0;
    for (let d = 0; d < sp.dim; d++) s += q[qOff + d]! * sp.k[ko + d]!;
    s *= scale;
    scores[j] = s;
    if (s > mx) mx = s;
  }
  return mx;
}

/** out = softmax(scores)·V over the span; returns the log-sum-exp (−∞, out = 0, for an empty span). */
function attendOne(q: F32, qOff: number, sp: KeySpan, scale: number, out: F32): number {
  const scores = new Float64Array(sp.count);
  const acc = new Float64Array(sp.dim);
  const mx = scoreKeys(q, qOff, sp, scale, scores);
  let sum = 0;
  for (let j = 0; j < sp.count; j++) {
    const p = reproExp(scores[j]! - mx);
    sum += p;
    const vo = sp.off + j * sp.stride;
    for (let d = 0; d < sp.dim; d++) acc[d] += p * sp.v[vo + d]!;
  }
  const inv = sum > 0 ? 1 / sum : 0;
  for (let d = 0; d < sp.dim; d++) out[qOff + d] = acc[d]! * inv;
  return sum > 0 ? mx + reproLog(sum) : -Infinity;
}

/** The causal span of query t of sequence b, kv head g, in a [B, T, Hkv, D] tensor. */
function causalSpan(k: F32, v: F32, s: AttentionShape, keyStart: I32 | undefined, b: number, g: number, t: number) {
  const stride = s.kvHeads * s.headDim;
  const first = keyStart ? keyStart[b]! : 0;
  const off = b * s.seqLen * stride + g * s.headDim + first * stride;
  return { k, v, off, stride, count: Math.max(0, t + 1 - first), dim: s.headDim };
}

/** Query offset of (b, t, h) in a [B, T, Hq, D] tensor. */
const queryOffset = (s: AttentionShape, b: number, t: number, h: number): number =>
  ((b * s.seqLen + t) * s.queryHeads + h) * s.headDim;

const attention: Kernels['attention'] = (q, k, v, out, lse, shape, keyStart) => {
  const scale = Math.fround(shape.scale ?? 1 / Math.sqrt(shape.headDim));
  const group = shape.queryHeads / shape.kvHeads;
  for (let b = 0; b < shape.batch; b++)
    for (let h = 0; h < shape.queryHeads; h++)
      for (let t = 0; t < shape.seqLen; t++) {
        const span = causalSpan(k, v, shape, keyStart, b, Math.floor(h / group), t);
        const qo = queryOffset(shape, b, t, h);
        lse[(b * shape.queryHeads + h) * shape.seqLen + t] = attendOne(q, qo, span, scale, out);
      }
};

const attentionBackward: Kernels['attentionBackward'] = (dOut, q, k, v, out, lse, dq, dk, dv, shape, keyStart) => {
  const scale = Math.fround(shape.scale ?? 1 / Math.sqrt(shape.headDim));
  const group = shape.queryHeads / shape.kvHeads;
  const dim = shape.headDim;
  const n = shape.batch * shape.seqLen * shape.kvHeads * dim;
  // dk and dv are sums over the query heads of a group and their query rows, in that order, in doubles.
  const [dk64, dv64] = [new Float64Array(n), new Float64Array(n)];
  const dqAcc = new Float64Array(dim);
  for (let b = 0; b < shape.batch; b++)
    for (let h = 0; h < shape.queryHeads; h++)
      for (let t = 0; t < shape.seqLen; t++) {
        const sp = causalSpan(k, v, shape, keyStart, b, Math.floor(h / group), t);
        const qo = queryOffset(shape, b, t, h);
        const l = lse[(b * shape.queryHeads + h) * shape.seqLen + t]!;
        let rowDot = 0;
        for (let d = 0; d < dim; d++) rowDot += dOut[qo + d]! * out[qo + d]!;
        dqAcc.fill(0);
        const scores = new Float64Array(sp.count);
        scoreKeys(q, qo, sp, scale, scores);
        for (let j = 0; j < sp.count; j++) {
          const o = sp.off + j * sp.stride;
          const p = reproExp(scores[j]! - l);
          let dp = 0;
          for (let d = 0; d < dim; d++) dp += dOut[qo + d]! * v[o + d]!;
          const ds = scale * p * (dp - rowDot);
          for (let d = 0; d < dim; d++) {
            dv64[o + d] += p * dOut[qo + d]!;
            dk64[o + d] += ds * q[qo + d]!;
            dqAcc[d] += ds * k[o + d]!;
          }
        }
        for (let d = 0; d < dim; d++) dq[qo + d] = dqAcc[d]!;
      }
  dk.set(dk64);
  dv.set(dv64);
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
    const first = keyStart ? keyStart[b]! : 0;
    for (let h = 0; h < queryHeads; h++) {
      const off = ((b * kvHeads + Math.floor(h / group)) * capacity + first) * headDim;
      const span = { k: kCache, v: vCache, off, stride: headDim, count: length - first, dim: headDim };
      attendOne(q, (b * queryHeads + h) * headDim, span, Math.fround(scale), out);
    }
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Optimiser and vector helpers

/** x^n by binary powering: a fixed sequence of products (Math.pow's last bit may differ from C's pow). */
function powi(x: number, n: number): number {
  let r = 1;
  for (; n > 0; n = Math.floor(n / 2)) {
    if (n % 2 === 1) r *= x;
    x *= x;
  }
  return r;
}

const adamw: Kernels['adamw'] = (param, grad, m, v, n, lr, beta1, beta2, eps, weightDecay, step) => {
  const decay = 1 - lr * weightDecay;
  const stepSize = lr / (1 - powi(beta1, step));
  const bc2Sqrt = Math.sqrt(1 - powi(beta2, step));
  for (let i = 0; i < n; i++) {
    const g = grad[i]!;
    param[i] = param[i]! * decay;
    m[i] = beta1 * m[i]! + (1 - beta1) * g;
    v[i] = beta2 * v[i]! + (1 - beta2) * g * g;
    param[i] = param[i]! - (stepSize * m[i]!) / (Math.sqrt(v[i]!) / bc2Sqrt + eps);
  }
};

const axpy: Kernels['axpy'] = (alpha, x, y, n) => typescriptKernels.axpy(Math.fround(alpha), x, y, n);

const scale: Kernels['scale'] = (x, alpha, n) => typescriptKernels.scale(x, Math.fround(alpha), n);

/** The TypeScript backend with every order- or libm-dependent kernel replaced by its reproducible version. */
export const reproducibleTypescriptKernels: Kernels = {
  ...typescriptKernels,
  blas: 'reproducible: fixed-order float64 sums (pure TypeScript)',
  gemm,
  rmsNormBackward,
  layerNormBackward,
  sumRows,
  softmax,
  logSoftmax,
  gatherLogProbs,
  gatherLogProbsBackward,
  entropyBackward,
  swiglu,
  swigluBackward,
  gelu,
  geluBackward,
  attention,
  attentionBackward,
  attentionDecode,
  adamw,
  axpy,
  scale,
};
