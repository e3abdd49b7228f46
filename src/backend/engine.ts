import { resolveGemm } from './gemm-args.js';
import type { AttentionShape, F32, GemmArgs, I32, Kernels } from './kernels.js';
import { defaultBackend } from './select.js';

/** The error every kernel raises for bad input: the message names the op, the argument and the shapes involved. */
export class KernelInputError extends Error {
  constructor(op: string, message: string) {
    super(`${op}: ${message}`);
    this.name = 'KernelInputError';
  }
}

function fail(op: string, message: string): never {
  throw new KernelInputError(op, message);
}

function dims(op: string, named: Record<string, number>): void {
  for (const [name, v] of Object.entries(named))
    if (!Number.isInteger(v) || v < 0) fail(op, `${name} must be a non-negative integer, got ${v}`);
}

/** Requires `arr` to be a Float32Array/Int32Array holding at least `count` elements; `shape` explains the count. */
function need(op: string, name: string, arr: unknown, count: number, shape: string, int = false): void {
  const ok = int ? arr instanceof Int32Array : arr instanceof Float32Array;
  if (!ok) fail(op, `${name} must be a ${int ? 'Int32Array' : 'Float32Array'}`);
  const len = (arr as F32 | I32).length;
  if (len < count) fail(op, `${name} has ${len} elements but ${shape} needs ${count}`);
}

function finite(op: string, name: string, x: number): void {
  if (!Number.isFinite(x)) fail(op, `${name} must be finite, got ${x}`);
}

function attentionChecks(op: string, s: AttentionShape): { q: number; kv: number; lse: number; shape: string } {
  const { batch: b, seqLen: t, queryHeads: hq, kvHeads: hkv, headDim: d } = s;
  dims(op, { batch: b, seqLen: t, queryHeads: hq, kvHeads: hkv, headDim: d });
  if (hkv === 0 || hq % hkv !== 0) fail(op, `queryHeads ${hq} must be a positive multiple of kvHeads ${hkv}`);
  if (s.scale !== undefined) finite(op, 'scale', s.scale);
  return {
    q: b * t * hq * d,
    kv: b * t * hkv * d,
    lse: b * hq * t,
    shape: `[B=${b},T=${t},Hq=${hq},Hkv=${hkv},D=${d}]`,
  };
}

function keyStartCheck(op: string, keyStart: I32 | undefined, batch: number, limit: number): void {
  if (keyStart === undefined) return;
  need(op, 'keyStart', keyStart, batch, `batch ${batch}`, true);
  for (let b = 0; b < batch; b++)
    if (keyStart[b]! < 0 || keyStart[b]! > limit) fail(op, `keyStart[${b}] = ${keyStart[b]} is outside [0, ${limit}]`);
}

function idsCheck(op: string, ids: I32, rows: number, limit: number, what: string): void {
  for (let r = 0; r < rows; r++) {
    const id = ids[r]!;
    if (id >= limit || (id < 0 && what !== 'target'))
      fail(op, `${what} ${id} at row ${r} is outside [0, ${limit}) (check the tokenizer's and the model's vocabulary)`);
  }
}

/**
 * A backend behind argument validation: every call checks types, lengths against the shapes, and the values where
 * they matter (ids in range, finite hyper-parameters), and raises a KernelInputError naming the op and the shapes
 * instead of reading out of bounds or crashing the process.
 */
export class Engine implements Kernels {
  /** The unchecked backend that does the arithmetic. */
  readonly backend: Kernels;

  constructor(backend: Kernels) {
    this.backend = backend;
  }

  get name(): string {
    return this.backend.name;
  }

  get blas(): string {
    return this.backend.blas;
  }

  gemm(args: GemmArgs): void {
    const op = 'gemm';
    const g = resolveGemm(args);
    dims(op, { m: g.m, n: g.n, k: g.k, batch: g.batch, threads: g.threads });
    finite(op, 'alpha', g.alpha);
    finite(op, 'beta', g.beta);
    const aRows = g.transA ? g.k : g.m;
    const aCols = g.transA ? g.m : g.k;
    const bRows = g.transB ? g.n : g.k;
    const bCols = g.transB ? g.k : g.n;
    const shape = `op(A)[${g.m}×${g.k}]·op(B)[${g.k}×${g.n}]`;
    if (g.lda < Math.max(1, aCols)) fail(op, `lda ${g.lda} < stored width ${aCols} of A for ${shape}`);
    if (g.ldb < Math.max(1, bCols)) fail(op, `ldb ${g.ldb} < stored width ${bCols} of B for ${shape}`);
    if (g.ldc < Math.max(1, g.n)) fail(op, `ldc ${g.ldc} < width ${g.n} of C for ${shape}`);
    if (g.batch === 0) return;
    const extent = (r: number, c: number, ld: number): number => (r === 0 || c === 0 ? 0 : (r - 1) * ld + c);
    if (g.batch > 1 && g.strideC < extent(g.m, g.n, g.ldc))
      fail(op, `strideC ${g.strideC} makes the ${g.batch} products of the batch overlap in C (${shape})`);
    const last = g.batch - 1;
    need(op, 'a', g.a, g.aOff + last * g.strideA + extent(aRows, aCols, g.lda), shape);
    need(op, 'b', g.b, g.bOff + last * g.strideB + extent(bRows, bCols, g.ldb), shape);
    need(op, 'c', g.c, g.cOff + last * g.strideC + extent(g.m, g.n, g.ldc), shape);
    this.backend.gemm(args);
  }

  rmsNorm(x: F32, weight: F32, out: F32, invRms: F32, rows: number, dim: number, eps: number): void {
    const op = 'rmsNorm';
    dims(op, { rows, dim });
    const s = `[rows=${rows},dim=${dim}]`;
    need(op, 'x', x, rows * dim, s);
    need(op, 'weight', weight, dim, s);
    need(op, 'out', out, rows * dim, s);
    need(op, 'invRms', invRms, rows, s);
    finite(op, 'eps', eps);
    this.backend.rmsNorm(x, weight, out, invRms, rows, dim, eps);
  }

  rmsNormBackward(dy: F32, x: F32, weight: F32, invRms: F32, dx: F32, dWeight: F32, rows: number, dim: number): void {
    const op = 'rmsNormBackward';
    dims(op, { rows, dim });
    const s = `[rows=${rows},dim=${dim}]`;
    for (const [n, a] of [
      ['dy', dy],
      ['x', x],
      ['dx', dx],
    ] as const)
      need(op, n, a, rows * dim, s);
    need(op, 'weight', weight, dim, s);
    need(op, 'dWeight', dWeight, dim, s);
    need(op, 'invRms', invRms, rows, s);
    this.backend.rmsNormBackward(dy, x, weight, invRms, dx, dWeight, rows, dim);
  }

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
  ): void {
    const op = 'layerNorm';
    dims(op, { rows, dim });
    const s = `[rows=${rows},dim=${dim}]`;
    need(op, 'x', x, rows * dim, s);
    need(op, 'out', out, rows * dim, s);
    need(op, 'weight', weight, dim, s);
    need(op, 'bias', bias, dim, s);
    need(op, 'mean', mean, rows, s);
    need(op, 'rstd', rstd, rows, s);
    finite(op, 'eps', eps);
    this.backend.layerNorm(x, weight, bias, out, mean, rstd, rows, dim, eps);
  }

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
  ): void {
    const op = 'layerNormBackward';
    dims(op, { rows, dim });
    const s = `[rows=${rows},dim=${dim}]`;
    for (const [n, a] of [
      ['dy', dy],
      ['x', x],
      ['dx', dx],
    ] as const)
      need(op, n, a, rows * dim, s);
    for (const [n, a] of [
      ['weight', weight],
      ['dWeight', dWeight],
      ['dBias', dBias],
    ] as const)
      need(op, n, a, dim, s);
    need(op, 'mean', mean, rows, s);
    need(op, 'rstd', rstd, rows, s);
    this.backend.layerNormBackward(dy, x, weight, mean, rstd, dx, dWeight, dBias, rows, dim);
  }

  softmax(x: F32, out: F32, rows: number, dim: number): void {
    this.rowwise('softmax', x, out, rows, dim);
    this.backend.softmax(x, out, rows, dim);
  }

  argmaxRows(x: F32, out: I32, rows: number, dim: number): void {
    const op = 'argmaxRows';
    dims(op, { rows, dim });
    const s = `[rows=${rows},dim=${dim}]`;
    need(op, 'x', x, rows * dim, s);
    need(op, 'out', out, rows, s, true);
    this.backend.argmaxRows(x, out, rows, dim);
  }

  logSoftmax(x: F32, out: F32, rows: number, dim: number): void {
    this.rowwise('logSoftmax', x, out, rows, dim);
    this.backend.logSoftmax(x, out, rows, dim);
  }

  private rowwise(op: string, x: F32, out: F32, rows: number, dim: number): void {
    dims(op, { rows, dim });
    const s = `[rows=${rows},dim=${dim}]`;
    need(op, 'x', x, rows * dim, s);
    need(op, 'out', out, rows * dim, s);
  }

  gatherLogProbs(logits: F32, targets: I32, logProb: F32, lse: F32, rows: number, vocab: number, entropy?: F32): void {
    const op = 'gatherLogProbs';
    this.gatherChecks(op, logits, targets, rows, vocab);
    const s = `[rows=${rows},vocab=${vocab}]`;
    need(op, 'logProb', logProb, rows, s);
    need(op, 'lse', lse, rows, s);
    if (entropy !== undefined) need(op, 'entropy', entropy, rows, s);
    this.backend.gatherLogProbs(logits, targets, logProb, lse, rows, vocab, entropy);
  }

  gatherLogProbsBackward(
    logits: F32,
    targets: I32,
    lse: F32,
    dLogProb: F32,
    dLogits: F32,
    rows: number,
    vocab: number,
  ): void {
    const op = 'gatherLogProbsBackward';
    this.gatherChecks(op, logits, targets, rows, vocab);
    const s = `[rows=${rows},vocab=${vocab}]`;
    need(op, 'lse', lse, rows, s);
    need(op, 'dLogProb', dLogProb, rows, s);
    need(op, 'dLogits', dLogits, rows * vocab, s);
    this.backend.gatherLogProbsBackward(logits, targets, lse, dLogProb, dLogits, rows, vocab);
  }

  entropyBackward(logits: F32, lse: F32, entropy: F32, dEntropy: F32, dLogits: F32, rows: number, vocab: number): void {
    const op = 'entropyBackward';
    dims(op, { rows, vocab });
    const s = `[rows=${rows},vocab=${vocab}]`;
    need(op, 'logits', logits, rows * vocab, s);
    need(op, 'lse', lse, rows, s);
    need(op, 'entropy', entropy, rows, s);
    need(op, 'dEntropy', dEntropy, rows, s);
    need(op, 'dLogits', dLogits, rows * vocab, s);
    if (dLogits.buffer === logits.buffer && dLogits.byteOffset === logits.byteOffset)
      fail(op, 'dLogits must not alias logits (the logits are read after dLogits is written)');
    this.backend.entropyBackward(logits, lse, entropy, dEntropy, dLogits, rows, vocab);
  }

  private gatherChecks(op: string, logits: F32, targets: I32, rows: number, vocab: number): void {
    dims(op, { rows, vocab });
    const s = `[rows=${rows},vocab=${vocab}]`;
    need(op, 'logits', logits, rows * vocab, s);
    need(op, 'targets', targets, rows, s, true);
    idsCheck(op, targets, rows, vocab, 'target');
  }

  rope(
    x: F32,
    positions: I32,
    cos: F32,
    sin: F32,
    rows: number,
    heads: number,
    headDim: number,
    inverse: boolean,
  ): void {
    const op = 'rope';
    dims(op, { rows, heads, headDim });
    if (headDim % 2 !== 0) fail(op, `headDim ${headDim} must be even`);
    const s = `[rows=${rows},heads=${heads},headDim=${headDim}]`;
    need(op, 'x', x, rows * heads * headDim, s);
    need(op, 'positions', positions, rows, s, true);
    const half = headDim / 2;
    if (cos.length !== sin.length) fail(op, `cos (${cos.length}) and sin (${sin.length}) tables differ in length`);
    need(op, 'cos', cos, half, s);
    const maxPos = Math.floor(cos.length / Math.max(half, 1));
    for (let r = 0; r < rows; r++)
      if (positions[r]! < 0 || positions[r]! >= maxPos)
        fail(op, `position ${positions[r]} at row ${r} is outside the rotary table [0, ${maxPos})`);
    this.backend.rope(x, positions, cos, sin, rows, heads, headDim, inverse);
  }

  swiglu(gate: F32, up: F32, out: F32, n: number): void {
    this.elementwise('swiglu', { gate, up, out }, n);
    this.backend.swiglu(gate, up, out, n);
  }

  swigluBackward(dy: F32, gate: F32, up: F32, dGate: F32, dUp: F32, n: number): void {
    this.elementwise('swigluBackward', { dy, gate, up, dGate, dUp }, n);
    this.backend.swigluBackward(dy, gate, up, dGate, dUp, n);
  }

  gelu(x: F32, out: F32, n: number): void {
    this.elementwise('gelu', { x, out }, n);
    this.backend.gelu(x, out, n);
  }

  geluBackward(dy: F32, x: F32, dx: F32, n: number): void {
    this.elementwise('geluBackward', { dy, x, dx }, n);
    this.backend.geluBackward(dy, x, dx, n);
  }

  private elementwise(op: string, arrays: Record<string, F32>, n: number): void {
    dims(op, { n });
    for (const [name, a] of Object.entries(arrays)) need(op, name, a, n, `n=${n}`);
  }

  attention(q: F32, k: F32, v: F32, out: F32, lse: F32, shape: AttentionShape, keyStart?: I32): void {
    const op = 'attention';
    const c = attentionChecks(op, shape);
    need(op, 'q', q, c.q, c.shape);
    need(op, 'k', k, c.kv, c.shape);
    need(op, 'v', v, c.kv, c.shape);
    need(op, 'out', out, c.q, c.shape);
    need(op, 'lse', lse, c.lse, c.shape);
    keyStartCheck(op, keyStart, shape.batch, shape.seqLen);
    this.backend.attention(q, k, v, out, lse, shape, keyStart);
  }

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
  ): void {
    const op = 'attentionBackward';
    const c = attentionChecks(op, shape);
    for (const [n, a] of [
      ['dOut', dOut],
      ['q', q],
      ['out', out],
      ['dq', dq],
    ] as const)
      need(op, n, a, c.q, c.shape);
    for (const [n, a] of [
      ['k', k],
      ['v', v],
      ['dk', dk],
      ['dv', dv],
    ] as const)
      need(op, n, a, c.kv, c.shape);
    need(op, 'lse', lse, c.lse, c.shape);
    keyStartCheck(op, keyStart, shape.batch, shape.seqLen);
    this.backend.attentionBackward(dOut, q, k, v, out, lse, dq, dk, dv, shape, keyStart);
  }

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
  ): void {
    const op = 'attentionDecode';
    dims(op, { batch, queryHeads, kvHeads, headDim, capacity, length });
    if (kvHeads === 0 || queryHeads % kvHeads !== 0)
      fail(op, `queryHeads ${queryHeads} must be a positive multiple of kvHeads ${kvHeads}`);
    if (length > capacity) fail(op, `length ${length} exceeds the cache capacity ${capacity}`);
    finite(op, 'scale', scale);
    const s = `[B=${batch},Hq=${queryHeads},Hkv=${kvHeads},D=${headDim},S=${capacity}]`;
    need(op, 'q', q, batch * queryHeads * headDim, s);
    need(op, 'out', out, batch * queryHeads * headDim, s);
    need(op, 'kCache', kCache, batch * kvHeads * capacity * headDim, s);
    need(op, 'vCache', vCache, batch * kvHeads * capacity * headDim, s);
    keyStartCheck(op, keyStart, batch, length);
    this.backend.attentionDecode(
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
    );
  }

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
  ): void {
    const op = 'adamw';
    dims(op, { n, step });
    if (step < 1) fail(op, `step must be ≥ 1, got ${step}`);
    for (const [name, x] of Object.entries({ lr, beta1, beta2, eps, weightDecay })) finite(op, name, x);
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
      fail(op, `betas must be in [0, 1), got ${beta1}, ${beta2}`);
    this.elementwise(op, { param, grad, m, v }, n);
    if (!this.backend.allFinite(grad, n)) fail(op, `the gradient has NaN or infinite values (n=${n}); skip this step`);
    this.backend.adamw(param, grad, m, v, n, lr, beta1, beta2, eps, weightDecay, step);
  }

  addBias(x: F32, bias: F32, out: F32, rows: number, dim: number): void {
    const op = 'addBias';
    this.rowwise(op, x, out, rows, dim);
    need(op, 'bias', bias, dim, `[rows=${rows},dim=${dim}]`);
    this.backend.addBias(x, bias, out, rows, dim);
  }

  sumRows(dy: F32, dBias: F32, rows: number, dim: number): void {
    const op = 'sumRows';
    dims(op, { rows, dim });
    need(op, 'dy', dy, rows * dim, `[rows=${rows},dim=${dim}]`);
    need(op, 'dBias', dBias, dim, `[rows=${rows},dim=${dim}]`);
    this.backend.sumRows(dy, dBias, rows, dim);
  }

  axpy(alpha: number, x: F32, y: F32, n: number): void {
    finite('axpy', 'alpha', alpha);
    this.elementwise('axpy', { x, y }, n);
    this.backend.axpy(alpha, x, y, n);
  }

  mul(a: F32, b: F32, out: F32, n: number): void {
    this.elementwise('mul', { a, b, out }, n);
    this.backend.mul(a, b, out, n);
  }

  scale(x: F32, alpha: number, n: number): void {
    finite('scale', 'alpha', alpha);
    this.elementwise('scale', { x }, n);
    this.backend.scale(x, alpha, n);
  }

  sumSquares(x: F32, n: number): number {
    this.elementwise('sumSquares', { x }, n);
    return this.backend.sumSquares(x, n);
  }

  allFinite(x: F32, n: number): boolean {
    this.elementwise('allFinite', { x }, n);
    return this.backend.allFinite(x, n);
  }

  copyRows(
    src: F32,
    srcOffset: number,
    srcLd: number,
    dst: F32,
    dstOffset: number,
    dstLd: number,
    rows: number,
    cols: number,
  ): void {
    const op = 'copyRows';
    dims(op, { srcOffset, srcLd, dstOffset, dstLd, rows, cols });
    if (rows > 1 && (srcLd < cols || dstLd < cols))
      fail(op, `srcLd ${srcLd} and dstLd ${dstLd} must be at least cols ${cols}`);
    const extent = (offset: number, ld: number): number => (rows > 0 ? offset + (rows - 1) * ld + cols : 0);
    const s = `${rows} rows of ${cols}`;
    need(op, 'src', src, extent(srcOffset, srcLd), `${s} from offset ${srcOffset}, ld ${srcLd}`);
    need(op, 'dst', dst, extent(dstOffset, dstLd), `${s} from offset ${dstOffset}, ld ${dstLd}`);
    this.backend.copyRows(src, srcOffset, srcLd, dst, dstOffset, dstLd, rows, cols);
  }

  embedding(table: F32, ids: I32, out: F32, rows: number, dim: number): void {
    const op = 'embedding';
    dims(op, { rows, dim });
    const s = `[rows=${rows},dim=${dim}]`;
    need(op, 'ids', ids, rows, s, true);
    need(op, 'out', out, rows * dim, s);
    idsCheck(op, ids, rows, dim === 0 ? 0 : Math.floor(table.length / dim), 'token id');
    this.backend.embedding(table, ids, out, rows, dim);
  }

  embeddingBackward(dOut: F32, ids: I32, dTable: F32, rows: number, dim: number): void {
    const op = 'embeddingBackward';
    dims(op, { rows, dim });
    const s = `[rows=${rows},dim=${dim}]`;
    need(op, 'ids', ids, rows, s, true);
    need(op, 'dOut', dOut, rows * dim, s);
    idsCheck(op, ids, rows, dim === 0 ? 0 : Math.floor(dTable.length / dim), 'token id');
    this.backend.embeddingBackward(dOut, ids, dTable, rows, dim);
  }
}

let shared: Engine | undefined;

/** The process-wide checked engine over the default backend (see defaultBackend for HACRL_BACKEND). */
export function engine(): Engine {
  shared ??= new Engine(defaultBackend());
  return shared;
}
