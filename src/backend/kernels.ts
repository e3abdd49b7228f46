/**
 * The compute contract every backend implements: the native addon (C over a real BLAS) and the pure-TypeScript
 * fallback. All arrays are row-major float32 (token ids and positions are Int32Array). Kernels never allocate their
 * outputs: the caller passes them, so hot loops reuse buffers. Arguments are validated once, in `engine.ts`, before
 * a backend is called; backends may assume valid shapes.
 *
 * Shapes use these letters: B batch, T sequence length, Hq query heads, Hkv key/value heads (Hq % Hkv == 0, grouped
 * query attention), D head dimension, V vocabulary size, S cache capacity in positions.
 */

/** Float32 data; all kernels read and write through plain typed arrays (zero-copy into the native addon). */
export type F32 = Float32Array;
/** Token ids, positions and per-row offsets. */
export type I32 = Int32Array;
/** bfloat16 values as raw bits (the top half of a float32): the operands of bf16 products. */
export type BF16 = Uint16Array;

/** A matrix operand of sgemm: a typed array, the element offset of its first element and its leading dimension. */
export interface MatrixRef<D extends F32 | BF16 = F32 | BF16> {
  /** Backing storage: float32, or bfloat16 bits for A and B of a bf16 product (both, never C). */
  data: D;
  /** Index of element (0,0) in `data`; default 0. */
  offset?: number;
  /** Distance in elements between consecutive rows as stored (before any transpose); default: the stored width. */
  ld?: number;
}

/**
 * Arguments of a (possibly batched, strided) matrix multiply: C = alpha·op(A)·op(B) + beta·C. With A and B both
 * bfloat16 bits it is a bf16 product accumulated in fp32 into the float32 C (oneDNN's bf16 kernel where the CPU has
 * AMX or AVX512_BF16, else the fp32 product of the widened operands, exact up to the order of the sums).
 */
export interface GemmArgs {
  /** op(A) = Aᵀ when true; A is stored [k×m] then. Default false. */
  transA?: boolean;
  /** op(B) = Bᵀ when true; B is stored [n×k] then. Default false. */
  transB?: boolean;
  /** Rows of op(A) and of C. */
  m: number;
  /** Columns of op(B) and of C. */
  n: number;
  /** Columns of op(A) = rows of op(B). */
  k: number;
  /** Scale of the product; default 1. */
  alpha?: number;
  /** Scale of the existing C (0 overwrites, 1 accumulates); default 0. */
  beta?: number;
  a: MatrixRef;
  b: MatrixRef;
  c: MatrixRef<F32>;
  /** Number of independent products; default 1. */
  batch?: number;
  /** Element distance between consecutive A / B / C matrices of a batch; default 0 (0 for A or B broadcasts it). */
  strideA?: number;
  strideB?: number;
  strideC?: number;
  /** Threads for this call; default 0 = chosen from the problem size (small decode-sized products run on one). */
  threads?: number;
}

/** Geometry of a batch of attention heads laid out as [B, T, H, D] (the natural output of x·W for a row-major x). */
export interface AttentionShape {
  batch: number;
  /** Query positions per sequence. */
  seqLen: number;
  queryHeads: number;
  kvHeads: number;
  headDim: number;
  /** Multiplier of q·k; default 1/sqrt(headDim). */
  scale?: number;
}

/** Everything a backend provides. Every method is synchronous and writes only into the arrays it is given. */
export interface Kernels {
  /** "native" or "typescript". */
  readonly name: string;
  /** Human-readable description of the matrix-multiply library and kernel in use, e.g. "oneDNN 2.6.3 avx512_core". */
  readonly blas: string;
  /** How products of bfloat16 operands run, e.g. "oneDNN bf16 kernel" or "emulated: fp32 products of widened bf16". */
  readonly bf16: string;

  /** C = alpha·op(A)·op(B) + beta·C, batched and strided (see GemmArgs). */
  gemm(args: GemmArgs): void;

  /** out[r,:] = x[r,:] / sqrt(mean(x[r,:]²) + eps) · weight; also stores invRms[r] for the backward. x,out: [rows,dim]. */
  rmsNorm(x: F32, weight: F32, out: F32, invRms: F32, rows: number, dim: number, eps: number): void;
  /** dx = ∂L/∂x (overwritten), dWeight += ∂L/∂weight (accumulated), from dy and the saved invRms. */
  rmsNormBackward(dy: F32, x: F32, weight: F32, invRms: F32, dx: F32, dWeight: F32, rows: number, dim: number): void;

  /** out = (x − mean)/sqrt(var + eps) · weight + bias per row (biased variance); stores mean[r] and rstd[r]. */
  layerNorm(
    x: F32,
    weight: F32,
    bias: F32,
    out: F32,
    mean: F32,
    rstd: F32,
    rows: number,
    dim: number,
    eps: number,
  ): void;
  /** dx overwritten; dWeight and dBias accumulated. */
  layerNormBackward(
    dy: F32,
    x: F32,
    weight: F32,
    mean: F32,
    rstd: F32,
    dx: F32,
    dWeight: F32,
    dBias: F32,
    rows: number,
    dim: number,
  ): void;

  /** Row-wise softmax of x into out ([rows,dim]); out may be x. */
  softmax(x: F32, out: F32, rows: number, dim: number): void;
  /**
   * out[r] = the first index of row r's largest value of x ([rows,dim]): what a scan keeping the first strictly
   * larger element finds, so NaN never wins (a row starting with NaN gives 0). Greedy decoding's pick.
   */
  argmaxRows(x: F32, out: I32, rows: number, dim: number): void;
  /** Row-wise log-softmax of x into out; out may be x. */
  logSoftmax(x: F32, out: F32, rows: number, dim: number): void;
  /**
   * Log-probability of one target per row without materialising the log-softmax: logProb[r] = x[r,t_r] − lse[r],
   * where lse[r] = log Σ exp(x[r,:]) is stored for the backward. With `entropy` given, also entropy[r] = −Σ p·log p.
   * Rows whose target is negative are ignored (logProb 0, lse still computed).
   */
  gatherLogProbs(logits: F32, targets: I32, logProb: F32, lse: F32, rows: number, vocab: number, entropy?: F32): void;
  /**
   * dLogits[r,:] = dLogProb[r]·(onehot(t_r) − softmax(x[r,:])), overwriting dLogits (may alias logits: the
   * memory-light path for large vocabularies). Rows with a negative target get zero gradient.
   */
  gatherLogProbsBackward(
    logits: F32,
    targets: I32,
    lse: F32,
    dLogProb: F32,
    dLogits: F32,
    rows: number,
    vocab: number,
  ): void;
  /**
   * Adds the entropy's backward to dLogits: dLogits[r,v] += dEntropy[r]·∂H_r/∂x[r,v] = −dEntropy[r]·p_v·(log p_v + H_r),
   * p = softmax(x[r,:]) from lse (gatherLogProbs' lse and entropy of the same logits). dLogits must not alias logits.
   */
  entropyBackward(logits: F32, lse: F32, entropy: F32, dEntropy: F32, dLogits: F32, rows: number, vocab: number): void;

  /**
   * Rotary position embedding in place on x laid out [rows, heads, headDim] (Hugging Face "rotate_half" pairing:
   * element i pairs with i + headDim/2). position[r] indexes the tables cos/sin, each [maxPos, headDim/2].
   * inverse = true rotates by −angle (that is the backward).
   */
  rope(
    x: F32,
    positions: I32,
    cos: F32,
    sin: F32,
    rows: number,
    heads: number,
    headDim: number,
    inverse: boolean,
  ): void;

  /** out = silu(gate)·up elementwise (length n). */
  swiglu(gate: F32, up: F32, out: F32, n: number): void;
  /** dGate, dUp overwritten from dy. */
  swigluBackward(dy: F32, gate: F32, up: F32, dGate: F32, dUp: F32, n: number): void;
  /** out = gelu(x), tanh approximation (GPT-2's "gelu_new"). */
  gelu(x: F32, out: F32, n: number): void;
  /** dx overwritten from dy. */
  geluBackward(dy: F32, x: F32, dx: F32, n: number): void;

  /**
   * Causal self-attention for training. q: [B,T,Hq,D]; k, v: [B,T,Hkv,D]; out: [B,T,Hq,D]; lse: [B,Hq,T] saved for
   * the backward. keyStart (optional, [B]): keys at positions < keyStart[b] are masked (left padding); a query whose
   * every key is masked gets out = 0.
   */
  attention(q: F32, k: F32, v: F32, out: F32, lse: F32, shape: AttentionShape, keyStart?: I32): void;
  /** Gradients of attention: dq, dk, dv overwritten (same layouts as q, k, v). Recomputes probabilities from lse. */
  attentionBackward(
    dOut: F32,
    q: F32,
    k: F32,
    v: F32,
    out: F32,
    lse: F32,
    dq: F32,
    dk: F32,
    dv: F32,
    shape: AttentionShape,
    keyStart?: I32,
  ): void;
  /**
   * One decoding step against a KV cache. q: [B,Hq,D] (one new token per sequence, already rotated); kCache, vCache:
   * [B,Hkv,S,D] holding positions 0..length-1 (the new token's key and value already written); out: [B,Hq,D].
   * keyStart (optional, [B]) masks cache positions < keyStart[b].
   */
  attentionDecode(
    q: F32,
    kCache: F32,
    vCache: F32,
    out: F32,
    batch: number,
    queryHeads: number,
    kvHeads: number,
    headDim: number,
    capacity: number,
    length: number,
    scale: number,
    keyStart?: I32,
  ): void;

  /**
   * One AdamW step in place (PyTorch's formulation): p ← p·(1 − lr·wd); m ← β1·m + (1−β1)·g; v ← β2·v + (1−β2)·g²;
   * p ← p − (lr/(1−β1^t))·m / (sqrt(v)/sqrt(1−β2^t) + eps). step t starts at 1.
   */
  adamw(
    param: F32,
    grad: F32,
    m: F32,
    v: F32,
    n: number,
    lr: number,
    beta1: number,
    beta2: number,
    eps: number,
    weightDecay: number,
    step: number,
  ): void;

  /** out[r,:] = x[r,:] + bias (bias has length dim); out may be x. */
  addBias(x: F32, bias: F32, out: F32, rows: number, dim: number): void;
  /** dBias[j] += Σ_r dy[r,j]. */
  sumRows(dy: F32, dBias: F32, rows: number, dim: number): void;
  /** y[i] += alpha·x[i] for i < n. */
  axpy(alpha: number, x: F32, y: F32, n: number): void;
  /** out[i] = a[i]·b[i] for i < n; out may alias a or b. */
  mul(a: F32, b: F32, out: F32, n: number): void;
  /** x[i] *= alpha for i < n. */
  scale(x: F32, alpha: number, n: number): void;
  /**
   * out[i] = x[i] rounded to bfloat16 bits for i < n, to nearest with ties to even (backend/bf16-bits.ts f32ToBf16,
   * bit for bit: subnormals kept, NaN a quiet NaN): the operands of every bf16 product pass through it.
   */
  roundBf16(x: F32, out: BF16, n: number): void;
  /** Σ x[i]² over i < n, accumulated in float64. */
  sumSquares(x: F32, n: number): number;
  /** True when no element of x[0..n) is NaN or ±Infinity. */
  allFinite(x: F32, n: number): boolean;
  /**
   * dst[dstOffset + r·dstLd + c] = src[srcOffset + r·srcLd + c] for r < rows, c < cols: a strided block copy (the
   * decode step's q/k/v split and its key/value cache writes, one call each instead of one per row). src and dst
   * must not overlap.
   */
  copyRows(
    src: F32,
    srcOffset: number,
    srcLd: number,
    dst: F32,
    dstOffset: number,
    dstLd: number,
    rows: number,
    cols: number,
  ): void;
  /** out[r,:] = table[ids[r],:] for r < rows (an embedding lookup); ids must be in [0, tableRows). */
  embedding(table: F32, ids: I32, out: F32, rows: number, dim: number): void;
  /** dTable[ids[r],:] += dOut[r,:] (accumulated; ids may repeat). */
  embeddingBackward(dOut: F32, ids: I32, dTable: F32, rows: number, dim: number): void;
}

/** A kernel's name: every method of Kernels. */
export type KernelName = Exclude<keyof Kernels, 'name' | 'blas' | 'bf16'>;

/**
 * Every kernel's arguments in call order (long ones in lines), with the sizes the checked engine requires (engine.ts)
 * and the structured ones the native adapter flattens (native.ts). `x[rows*dim]`: a Float32Array of at least rows·dim
 * elements (`[]`: sized by the engine's own rules); `:i32[…]` an Int32Array, `:u16[…]` a Uint16Array (bfloat16 bits);
 * a `?` after the name: may be undefined; a bare name: a dimension (non-negative integer); `:real` a finite number;
 * `:flag` a boolean; `:gemm` GemmArgs; `:attention` an AttentionShape, whose fields (batch, seqLen, queryHeads,
 * kvHeads, headDim) sizes may use.
 */
const KERNEL_SIGNATURES = {
  gemm: 'args:gemm',
  rmsNorm: 'x[rows*dim] weight[dim] out[rows*dim] invRms[rows] rows dim eps:real',
  rmsNormBackward: 'dy[rows*dim] x[rows*dim] weight[dim] invRms[rows] dx[rows*dim] dWeight[dim] rows dim',
  layerNorm: 'x[rows*dim] weight[dim] bias[dim] out[rows*dim] mean[rows] rstd[rows] rows dim eps:real',
  layerNormBackward:
    'dy[rows*dim] x[rows*dim] weight[dim] mean[rows] rstd[rows] dx[rows*dim] dWeight[dim] dBias[dim] rows dim',
  softmax: 'x[rows*dim] out[rows*dim] rows dim',
  argmaxRows: 'x[rows*dim] out:i32[rows] rows dim',
  logSoftmax: 'x[rows*dim] out[rows*dim] rows dim',
  gatherLogProbs: 'logits[rows*vocab] targets:i32[rows] logProb[rows] lse[rows] rows vocab entropy?[rows]',
  gatherLogProbsBackward:
    'logits[rows*vocab] targets:i32[rows] lse[rows] dLogProb[rows] dLogits[rows*vocab] rows vocab',
  entropyBackward: 'logits[rows*vocab] lse[rows] entropy[rows] dEntropy[rows] dLogits[rows*vocab] rows vocab',
  rope: 'x[rows*heads*headDim] positions:i32[rows] cos[headDim/2] sin[headDim/2] rows heads headDim inverse:flag',
  swiglu: 'gate[n] up[n] out[n] n',
  swigluBackward: 'dy[n] gate[n] up[n] dGate[n] dUp[n] n',
  gelu: 'x[n] out[n] n',
  geluBackward: 'dy[n] x[n] dx[n] n',
  attention: [
    'q[batch*seqLen*queryHeads*headDim] k[batch*seqLen*kvHeads*headDim] v[batch*seqLen*kvHeads*headDim]',
    'out[batch*seqLen*queryHeads*headDim] lse[batch*queryHeads*seqLen] shape:attention keyStart?:i32[]',
  ],
  attentionBackward: [
    'dOut[batch*seqLen*queryHeads*headDim] q[batch*seqLen*queryHeads*headDim] k[batch*seqLen*kvHeads*headDim]',
    'v[batch*seqLen*kvHeads*headDim] out[batch*seqLen*queryHeads*headDim] lse[batch*queryHeads*seqLen]',
    'dq[batch*seqLen*queryHeads*headDim] dk[batch*seqLen*kvHeads*headDim] dv[batch*seqLen*kvHeads*headDim]',
    'shape:attention keyStart?:i32[]',
  ],
  attentionDecode: [
    'q[batch*queryHeads*headDim] kCache[batch*kvHeads*capacity*headDim] vCache[batch*kvHeads*capacity*headDim]',
    'out[batch*queryHeads*headDim] batch queryHeads kvHeads headDim capacity length scale:real keyStart?:i32[]',
  ],
  adamw: 'param[n] grad[n] m[n] v[n] n lr:real beta1:real beta2:real eps:real weightDecay:real step',
  addBias: 'x[rows*dim] bias[dim] out[rows*dim] rows dim',
  sumRows: 'dy[rows*dim] dBias[dim] rows dim',
  axpy: 'alpha:real x[n] y[n] n',
  mul: 'a[n] b[n] out[n] n',
  scale: 'x[n] alpha:real n',
  roundBf16: 'x[n] out:u16[n] n',
  sumSquares: 'x[n] n',
  allFinite: 'x[n] n',
  copyRows: 'src[] srcOffset srcLd dst[] dstOffset dstLd rows cols',
  embedding: 'table[] ids:i32[rows] out[rows*dim] rows dim',
  embeddingBackward: 'dOut[rows*dim] ids:i32[rows] dTable[] rows dim',
} as const;

/** The words of a signature (a string, or lines of one). */
type Words<S> = S extends `${infer H} ${infer T}`
  ? [H, ...Words<T>]
  : S extends string
    ? [S]
    : S extends readonly [infer H, ...infer T]
      ? [...Words<H>, ...Words<T>]
      : [];
/** Compile-time check: each signature names as many arguments as its Kernels method takes. */
type CheckedSignatures = {
  [K in KernelName]: Words<(typeof KERNEL_SIGNATURES)[K]>['length'] extends Parameters<Kernels[K]>['length']
    ? unknown
    : `the signature of ${K} has a different number of arguments than Kernels.${K}`;
};

/** Values of a call's numeric arguments by name (an AttentionShape's fields included), from which sizes follow. */
export type Dims = Record<string, number>;

/** One argument of a kernel, parsed from its signature. */
export type ArgSpec =
  | { name: string; kind: 'f32' | 'i32' | 'u16'; optional: boolean; size: (d: Dims) => number }
  | { name: string; kind: 'dim' | 'real' | 'flag' | 'gemm' | 'attention' };

/** `a*b*c` or `a/2`: a product of dimensions and whole numbers, divided by a whole number. */
function sizeOf(expr: string): (d: Dims) => number {
  if (expr === '') return () => 0;
  const [product, divisor = '1'] = expr.split('/');
  const factors = product!.split('*');
  return (d) => factors.reduce((n, f) => n * (/^\d+$/.test(f) ? Number(f) : d[f]!), 1) / Number(divisor);
}

/** One word of a signature as an ArgSpec. */
function parseArg(word: string): ArgSpec {
  const m = /^(\w+)(\?)?(?::(\w+))?(?:\[([\w*/]*)\])?$/.exec(word);
  if (!m) throw new Error(`kernel signature: cannot read "${word}"`);
  const [, name, optional, type, size] = m as unknown as [string, string, string?, string?, string?];
  if (size !== undefined)
    return {
      name,
      kind: type === 'i32' || type === 'u16' ? type : 'f32',
      optional: optional === '?',
      size: sizeOf(size),
    };
  return { name, kind: (type ?? 'dim') as 'dim' | 'real' | 'flag' | 'gemm' | 'attention' };
}

/** Every kernel's arguments, in call order, parsed from KERNEL_SIGNATURES. */
export const KERNEL_ARGS = Object.fromEntries(
  Object.entries(KERNEL_SIGNATURES satisfies CheckedSignatures).map(([name, sig]) => [
    name,
    [sig].flat().join(' ').split(' ').map(parseArg),
  ]),
) as Record<KernelName, ArgSpec[]>;
