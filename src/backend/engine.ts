import { resolveGemm } from './gemm-args.js';
import {
  KERNEL_ARGS,
  type ArgSpec,
  type AttentionShape,
  type BF16,
  type Dims,
  type F32,
  type GemmArgs,
  type I32,
  type KernelName,
  type Kernels,
} from './kernels.js';
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

/**
 * Requires `arr` to be a Float32Array (an Int32Array when `int`, a Uint16Array of bfloat16 bits when `bf16`) holding
 * at least `count` elements; `shape()` explains the count.
 */
function need(
  op: string,
  name: string,
  arr: unknown,
  count: number,
  shape: () => string,
  int = false,
  bf16 = false,
): void {
  const [type, kind] = int
    ? [Int32Array, 'Int32Array']
    : bf16
      ? [Uint16Array, 'Uint16Array']
      : [Float32Array, 'Float32Array'];
  if (!(arr instanceof type)) fail(op, `${name} must be a ${kind}`);
  const len = (arr as F32 | I32 | BF16).length;
  if (len < count) fail(op, `${name} has ${len} elements but ${shape()} needs ${count}`);
}

function finite(op: string, name: string, x: number): void {
  if (!Number.isFinite(x)) fail(op, `${name} must be finite, got ${x}`);
}

function headsCheck(op: string, queryHeads: number, kvHeads: number): void {
  if (kvHeads === 0 || queryHeads % kvHeads !== 0)
    fail(op, `queryHeads ${queryHeads} must be a positive multiple of kvHeads ${kvHeads}`);
}

function keyStartCheck(op: string, keyStart: I32 | undefined, batch: number, limit: number): void {
  if (keyStart === undefined) return;
  need(op, 'keyStart', keyStart, batch, () => `batch ${batch}`, true);
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

/** gemm's checks: leading dimensions, batch strides, and each operand's extent (GemmArgs has its own layout rules). */
function gemmCheck(args: GemmArgs): void {
  const op = 'gemm';
  const g = resolveGemm(args);
  dims(op, { m: g.m, n: g.n, k: g.k, batch: g.batch, threads: g.threads });
  finite(op, 'alpha', g.alpha);
  finite(op, 'beta', g.beta);
  const aRows = g.transA ? g.k : g.m;
  const aCols = g.transA ? g.m : g.k;
  const bRows = g.transB ? g.n : g.k;
  const bCols = g.transB ? g.k : g.n;
  const shape = (): string => `op(A)[${g.m}×${g.k}]·op(B)[${g.k}×${g.n}]`;
  if (g.lda < Math.max(1, aCols)) fail(op, `lda ${g.lda} < stored width ${aCols} of A for ${shape()}`);
  if (g.ldb < Math.max(1, bCols)) fail(op, `ldb ${g.ldb} < stored width ${bCols} of B for ${shape()}`);
  if (g.ldc < Math.max(1, g.n)) fail(op, `ldc ${g.ldc} < width ${g.n} of C for ${shape()}`);
  if (g.a instanceof Uint16Array !== g.b instanceof Uint16Array)
    fail(op, 'a and b must both be Float32Arrays or both Uint16Arrays of bfloat16 bits (a bf16 product)');
  if (g.batch === 0) return;
  const extent = (r: number, c: number, ld: number): number => (r === 0 || c === 0 ? 0 : (r - 1) * ld + c);
  if (g.batch > 1 && g.strideC < extent(g.m, g.n, g.ldc))
    fail(op, `strideC ${g.strideC} makes the ${g.batch} products of the batch overlap in C (${shape()})`);
  const last = g.batch - 1;
  const bf16 = g.a instanceof Uint16Array;
  need(op, 'a', g.a, g.aOff + last * g.strideA + extent(aRows, aCols, g.lda), shape, false, bf16);
  need(op, 'b', g.b, g.bOff + last * g.strideB + extent(bRows, bCols, g.ldb), shape, false, bf16);
  need(op, 'c', g.c, g.cOff + last * g.strideC + extent(g.m, g.n, g.ldc), shape);
}

/** A call's arguments by name. */
type Named = Record<string, unknown>;

/** What the sizes of KERNEL_ARGS cannot say: value ranges, relations between dimensions, aliasing. */
const VALUE_RULES: Partial<Record<KernelName, (op: string, a: Named, d: Dims, backend: Kernels) => void>> = {
  gatherLogProbs: (op, a, d) => idsCheck(op, a.targets as I32, d.rows!, d.vocab!, 'target'),
  gatherLogProbsBackward: (op, a, d) => idsCheck(op, a.targets as I32, d.rows!, d.vocab!, 'target'),
  entropyBackward: (op, a) => {
    const [logits, dLogits] = [a.logits as F32, a.dLogits as F32];
    if (dLogits.buffer === logits.buffer && dLogits.byteOffset === logits.byteOffset)
      fail(op, 'dLogits must not alias logits (the logits are read after dLogits is written)');
  },
  rope: (op, a, d) => {
    const [positions, cos, sin] = [a.positions as I32, a.cos as F32, a.sin as F32];
    if (d.headDim! % 2 !== 0) fail(op, `headDim ${d.headDim} must be even`);
    if (cos.length !== sin.length) fail(op, `cos (${cos.length}) and sin (${sin.length}) tables differ in length`);
    const maxPos = Math.floor(cos.length / Math.max(d.headDim! / 2, 1));
    for (let r = 0; r < d.rows!; r++)
      if (positions[r]! < 0 || positions[r]! >= maxPos)
        fail(op, `position ${positions[r]} at row ${r} is outside the rotary table [0, ${maxPos})`);
  },
  attention: (op, a, d) => {
    headsCheck(op, d.queryHeads!, d.kvHeads!);
    keyStartCheck(op, a.keyStart as I32 | undefined, d.batch!, d.seqLen!);
  },
  attentionBackward: (op, a, d) => {
    headsCheck(op, d.queryHeads!, d.kvHeads!);
    keyStartCheck(op, a.keyStart as I32 | undefined, d.batch!, d.seqLen!);
  },
  attentionDecode: (op, a, d) => {
    headsCheck(op, d.queryHeads!, d.kvHeads!);
    if (d.length! > d.capacity!) fail(op, `length ${d.length} exceeds the cache capacity ${d.capacity}`);
    keyStartCheck(op, a.keyStart as I32 | undefined, d.batch!, d.length!);
  },
  adamw: (op, a, d, backend) => {
    if (d.step! < 1) fail(op, `step must be ≥ 1, got ${d.step}`);
    const [beta1, beta2] = [d.beta1!, d.beta2!];
    if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
      fail(op, `betas must be in [0, 1), got ${beta1}, ${beta2}`);
    if (!backend.allFinite(a.grad as F32, d.n!))
      fail(op, `the gradient has NaN or infinite values (n=${d.n}); skip this step`);
  },
  copyRows: (op, a, d) => {
    const { rows, cols } = d as { rows: number; cols: number };
    if (rows > 1 && (d.srcLd! < cols || d.dstLd! < cols))
      fail(op, `srcLd ${d.srcLd} and dstLd ${d.dstLd} must be at least cols ${cols}`);
    for (const side of ['src', 'dst']) {
      const [offset, ld] = [d[`${side}Offset`]!, d[`${side}Ld`]!];
      const extent = rows > 0 ? offset + (rows - 1) * ld + cols : 0;
      need(op, side, a[side], extent, () => `${rows} rows of ${cols} from offset ${offset}, ld ${ld}`);
    }
  },
  embedding: (op, a, d) => {
    const rows = d.dim === 0 ? 0 : Math.floor((a.table as F32).length / d.dim!);
    idsCheck(op, a.ids as I32, d.rows!, rows, 'token id');
  },
  embeddingBackward: (op, a, d) => {
    const rows = d.dim === 0 ? 0 : Math.floor((a.dTable as F32).length / d.dim!);
    idsCheck(op, a.ids as I32, d.rows!, rows, 'token id');
  },
};

/** Size errors name the shape: the element count alone for element-wise kernels, else every dimension. */
function shapeLabel(op: KernelName, d: Dims, integers: Dims): string {
  if (op === 'attention' || op === 'attentionBackward')
    return `[B=${d.batch},T=${d.seqLen},Hq=${d.queryHeads},Hkv=${d.kvHeads},D=${d.headDim}]`;
  if (op === 'attentionDecode')
    return `[B=${d.batch},Hq=${d.queryHeads},Hkv=${d.kvHeads},D=${d.headDim},S=${d.capacity}]`;
  if (d.n !== undefined) return `n=${d.n}`;
  return `[${Object.entries(integers)
    .map(([k, v]) => `${k}=${v}`)
    .join(',')}]`;
}

/** Validates one call of kernel `op` against its signature; throws a KernelInputError naming what is wrong. */
function checkCall(op: KernelName, specs: readonly ArgSpec[], values: readonly unknown[], backend: Kernels): void {
  if (op === 'gemm') return gemmCheck(values[0] as GemmArgs);
  const a: Named = {};
  const integers: Dims = {};
  const reals: Dims = {};
  specs.forEach((spec, i) => {
    const v = values[i];
    a[spec.name] = v;
    if (spec.kind === 'dim') integers[spec.name] = v as number;
    else if (spec.kind === 'real') reals[spec.name] = v as number;
    else if (spec.kind === 'attention') {
      const { batch, seqLen, queryHeads, kvHeads, headDim, scale } = v as AttentionShape;
      Object.assign(integers, { batch, seqLen, queryHeads, kvHeads, headDim });
      if (scale !== undefined) reals.scale = scale;
    }
  });
  dims(op, integers);
  for (const [name, x] of Object.entries(reals)) finite(op, name, x);
  const d: Dims = { ...integers, ...reals };
  for (const spec of specs) {
    if (spec.kind !== 'f32' && spec.kind !== 'i32' && spec.kind !== 'u16') continue;
    if (spec.optional && a[spec.name] === undefined) continue;
    const label = (): string => shapeLabel(op, d, integers);
    need(op, spec.name, a[spec.name], spec.size(d), label, spec.kind === 'i32', spec.kind === 'u16');
  }
  VALUE_RULES[op]?.(op, a, d, backend);
}

/** The checked kernels' own members; their kernel methods are installed from KERNEL_ARGS below. */
class CheckedKernels {
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

  get bf16(): string {
    return this.backend.bf16;
  }
}

for (const op of Object.keys(KERNEL_ARGS) as KernelName[]) {
  const specs = KERNEL_ARGS[op];
  Object.defineProperty(CheckedKernels.prototype, op, {
    value(this: CheckedKernels, ...values: unknown[]): unknown {
      checkCall(op, specs, values, this.backend);
      return (this.backend[op] as (...v: unknown[]) => unknown)(...values);
    },
  });
}

/**
 * A backend behind argument validation: every call checks types, lengths against the shapes, and the values where
 * they matter (ids in range, finite hyper-parameters), and raises a KernelInputError naming the op and the shapes
 * instead of reading out of bounds or crashing the process.
 */
export type Engine = Kernels & CheckedKernels;
/** `new Engine(backend)`: the backend behind argument validation. */
export const Engine = CheckedKernels as unknown as new (backend: Kernels) => Engine;

let shared: Engine | undefined;

/** The process-wide checked engine over the default backend (see defaultBackend for HACRL_BACKEND). */
export function engine(): Engine {
  shared ??= new Engine(defaultBackend());
  return shared;
}
