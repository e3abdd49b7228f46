/**
 * The TypeScript backend in the reproducible mode (HACRL_REPRODUCIBLE=1, docs/reproducible.md): the kernels whose
 * result depends on an order of summation or on a transcendental function, written as native/repro_body.h writes
 * them, expression for expression. JavaScript numbers are IEEE doubles like C's doubles and a Float32Array store
 * rounds like C's (float) cast, so both compute the same bits: every sum runs in index order in one double, exp and
 * log are the polynomials below (not Math.exp, whose last bit V8 and glibc do not always agree on), and scalars the
 * native glue rounds to float (gemm's alpha and beta, axpy's and scale's alpha, attention's scale) are rounded here.
 * The softmax family, SwiGLU and attention are the TypeScript backend's own, given these exp and log; its other
 * kernels already compute exactly this.
 */
import { resolveGemm } from './gemm-args.js';
import { bf16ToF32 } from './bf16-bits.js';
import type { F32, Kernels } from './kernels.js';
import { transcendentalKernels, typescriptKernels } from './typescript.js';

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
// GELU: its tanh form as x·σ(2u), which keeps its precision for x ≲ −3

const GELU_K = Math.sqrt(2 / Math.PI);
const GELU_A = 0.044715;
const geluU = (v: number): number => GELU_K * (v + GELU_A * v * v * v);

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
  ...transcendentalKernels({ exp: reproExp, log: reproLog, scalar: Math.fround }),
  gelu,
  geluBackward,
  adamw,
  axpy,
  scale,
};
