/**
 * Every kernel on every available backend against the float64 references of test/reference.ts (relative errors),
 * and, when the native addon loads, native against TypeScript on the same inputs.
 */
import { describe, test } from 'node:test';
import type { AttentionShape, GemmArgs, Kernels, MatrixRef } from '../src/backend/kernels.js';
import { typescriptKernels } from '../src/backend/typescript.js';
import { testedBackends } from './backends.js';
import { assertOutputsClose, mulberry32, randInt, randn, type Outputs, type Rng } from './helpers.js';
import * as ref from './reference.js';
import { bf16ToF32, f32ToBf16 } from '../src/tensor/half.js';

/** One check: a kernel call (or a short sequence of calls) and its float64 expectation. */
interface KernelCase {
  name: string;
  /** Largest relative error accepted. */
  tol: number;
  /** Errors relative to the largest expected value over all outputs (see assertOutputsClose). */
  sharedScale: boolean;
  /** Runs on a backend with fresh inputs, returning what to compare. */
  run(k: Kernels): Outputs;
  /** The float64 expectation (computed once). */
  expect(): Outputs;
}

const cases: KernelCase[] = [];

/** Registers a case; `make` draws its inputs from a seeded RNG, so run and expect see the same numbers. */
function kernelCase<I>(
  name: string,
  tol: number,
  make: (rng: Rng) => I,
  run: (k: Kernels, inputs: I) => Outputs,
  expect: (inputs: I) => Outputs,
  sharedScale = false,
): void {
  const seed = 1000 + cases.length;
  let expected: Outputs | undefined;
  cases.push({
    name,
    tol,
    sharedScale,
    run: (k) => run(k, make(mulberry32(seed))),
    expect: () => (expected ??= expect(make(mulberry32(seed)))),
  });
}

const F32 = Float32Array;
const TOL = 1e-5;

/** A float32 array of n NaNs: an output the kernel must overwrite. */
function nans(n: number): Float32Array {
  return new F32(n).fill(NaN);
}

// ---------------------------------------------------------------------------------------------------------------
// gemm

interface GemmCase {
  m: number;
  n: number;
  k: number;
  transA?: boolean;
  transB?: boolean;
  alpha?: number;
  beta?: number;
  /** Element offsets of A, B and C. */
  offsets?: [number, number, number];
  /** Extra leading-dimension elements beyond the stored widths. */
  pad?: number;
  batch?: number;
  /** Extra elements between consecutive matrices of a batch. */
  gap?: number;
  /** strideB = 0: one B for the whole batch. */
  broadcastB?: boolean;
  /** C starts as NaN everywhere (beta must be 0). */
  nanC?: boolean;
}

/** A matrix operand, leaving offset and ld out when they are the defaults. */
function matrix(data: Float32Array, offset: number, ld: number, width: number): MatrixRef<Float32Array> {
  return offset === 0 && ld === width ? { data } : { data, offset, ld };
}

function makeGemm(g: GemmCase, rng: Rng): GemmArgs {
  const batch = g.batch ?? 1;
  const pad = g.pad ?? 0;
  const gap = g.gap ?? 0;
  const [aOff, bOff, cOff] = g.offsets ?? [0, 0, 0];
  const [aRows, aCols] = g.transA ? [g.k, g.m] : [g.m, g.k];
  const [bRows, bCols] = g.transB ? [g.n, g.k] : [g.k, g.n];
  const strideA = aRows * (aCols + pad) + gap;
  const strideB = g.broadcastB ? 0 : bRows * (bCols + pad) + gap;
  const strideC = g.m * (g.n + pad) + gap;
  const a = randn(aOff + batch * strideA, rng);
  const b = randn(bOff + (batch - 1) * strideB + bRows * (bCols + pad), rng);
  const c = g.nanC ? nans(cOff + batch * strideC) : randn(cOff + batch * strideC, rng);
  return {
    m: g.m,
    n: g.n,
    k: g.k,
    ...(g.transA !== undefined && { transA: g.transA }),
    ...(g.transB !== undefined && { transB: g.transB }),
    ...(g.alpha !== undefined && { alpha: g.alpha }),
    ...(g.beta !== undefined && { beta: g.beta }),
    a: matrix(a, aOff, aCols + pad, aCols),
    b: matrix(b, bOff, bCols + pad, bCols),
    c: matrix(c, cOff, g.n + pad, g.n),
    ...(batch > 1 && { batch, strideA, strideB, strideC }),
  };
}

function gemmName(g: GemmCase): string {
  const ops = `${g.transA ? 'T' : 'N'}${g.transB ? 'T' : 'N'}`;
  const extras = [
    g.alpha !== undefined && `alpha=${g.alpha}`,
    g.beta !== undefined && `beta=${g.beta}`,
    g.offsets && `offsets ${g.offsets.join(',')}`,
    g.pad && `ld+${g.pad}`,
    g.batch && `batch ${g.batch}${g.broadcastB ? ' (B broadcast)' : ''}`,
    g.nanC && 'C = NaN',
  ].filter(Boolean);
  return `gemm ${g.m}×${g.n}×${g.k} ${ops} ${extras.join(' ')}`.trim();
}

const transposes = [false, true].flatMap((transA) => [false, true].map((transB) => ({ transA, transB })));
const gemmCases: GemmCase[] = [
  { m: 1, n: 1, k: 1 },
  ...transposes.flatMap((t) => [
    { m: 7, n: 13, k: 5, ...t },
    { m: 33, n: 65, k: 17, ...t, alpha: 0.75, beta: 1 },
    { m: 128, n: 96, k: 64, ...t, beta: 0.5 },
    { m: 2, n: 9, k: 300, ...t, alpha: -1.25, beta: 1 },
  ]),
  { m: 33, n: 65, k: 17, transA: true, offsets: [3, 5, 2], pad: 3, alpha: -0.5, beta: 1 },
  { m: 33, n: 65, k: 17, transB: true, offsets: [1, 2, 3], pad: 5, nanC: true },
  { m: 1, n: 40, k: 9, nanC: true, beta: 0 },
  { m: 6, n: 10, k: 7, transB: true, alpha: 2, beta: 1, batch: 3, gap: 4 },
  { m: 9, n: 5, k: 11, offsets: [2, 1, 3], pad: 1, batch: 4, gap: 2, broadcastB: true },
  { m: 300, n: 270, k: 520, transB: true },
  { m: 5, n: 3, k: 2000, transA: true },
  // Decode-sized products whose weights (> 2 MiB) are split by columns across threads, and a batch of two split
  // across threads by weight bytes.
  { m: 16, n: 1000, k: 600, offsets: [1, 2, 3], pad: 3, beta: 1 },
  { m: 16, n: 1000, k: 600, transB: true, alpha: 0.5 },
  { m: 4, n: 600, k: 500, batch: 2, gap: 3 },
  // Decode-sized products by an [out, in] weight, which bf16 products on AVX512_BF16 compute in bf16_skinny.c: rows
  // and columns that are not whole tiles, k not a whole number of 32-value steps, strides, C of NaN with beta 0.
  { m: 13, n: 71, k: 77, transB: true, offsets: [2, 3, 1], pad: 3, nanC: true },
  { m: 16, n: 36, k: 64, transB: true, alpha: -0.5, beta: 1 },
];

for (const g of gemmCases)
  kernelCase(
    gemmName(g),
    1e-6 + 2e-6 * Math.sqrt(g.k),
    (rng) => makeGemm(g, rng),
    (k, args) => {
      k.gemm(args);
      return { c: args.c.data };
    },
    (args) => ({ c: ref.refGemm(args) }),
  );

/** The product's A and B as bfloat16 bits (its C stays float32). */
function asBf16(args: GemmArgs): GemmArgs {
  const bits = (m: GemmArgs['a']): GemmArgs['a'] => ({ ...m, data: f32ToBf16(m.data as Float32Array) });
  return { ...args, a: bits(args.a), b: bits(args.b) };
}

/** A bf16 product with fp32 accumulation is the fp32 product of the widened operands (exact), up to the sums' order. */
function widened(args: GemmArgs): GemmArgs {
  const values = (m: GemmArgs['a']): GemmArgs['a'] => ({ ...m, data: bf16ToF32(m.data as Uint16Array) });
  return { ...args, a: values(args.a), b: values(args.b) };
}

for (const g of gemmCases)
  kernelCase(
    `${gemmName(g)}, bf16 operands`,
    1e-6 + 2e-6 * Math.sqrt(g.k),
    (rng) => asBf16(makeGemm(g, rng)),
    (k, args) => {
      k.gemm(args);
      return { c: args.c.data };
    },
    (args) => ({ c: ref.refGemm(widened(args)) }),
  );

// ---------------------------------------------------------------------------------------------------------------
// Normalisation

const ROWS = 5;
const DIM = 37;
const EPS = 1e-5;

kernelCase(
  `rmsNorm ${ROWS}×${DIM}`,
  TOL,
  (rng) => ({ x: randn(ROWS * DIM, rng, 3), w: randn(DIM, rng) }),
  (k, { x, w }) => {
    const out = nans(x.length);
    const invRms = nans(ROWS);
    k.rmsNorm(x, w, out, invRms, ROWS, DIM, EPS);
    return { out, invRms };
  },
  ({ x, w }) => ({ out: ref.refRmsNorm(x, w, ROWS, DIM, EPS), invRms: ref.refInvRms(x, ROWS, DIM, EPS) }),
);

/** Inputs of a normalisation backward: x, weight, bias, output gradient and the accumulators' initial values. */
function normInputs(rng: Rng) {
  const x = randn(ROWS * DIM, rng, 2);
  return {
    x,
    w: randn(DIM, rng),
    bias: randn(DIM, rng),
    dy: randn(x.length, rng),
    dw: randn(DIM, rng),
    db: randn(DIM, rng),
  };
}

kernelCase(
  'rmsNormBackward',
  TOL,
  normInputs,
  (k, { x, w, dy, dw }) => {
    const invRms = new F32(ROWS);
    k.rmsNorm(x, w, new F32(x.length), invRms, ROWS, DIM, EPS);
    const dx = nans(x.length);
    k.rmsNormBackward(dy, x, w, invRms, dx, dw, ROWS, DIM);
    return { dx, dWeight: dw };
  },
  ({ x, w, dy, dw }) => ({
    dx: ref.refVjp((xs) => ref.refRmsNorm(xs, w, ROWS, DIM, EPS), x, dy),
    dWeight: ref.refAxpy(
      1,
      ref.refVjp((ws) => ref.refRmsNorm(x, ws, ROWS, DIM, EPS), w, dy),
      dw,
      DIM,
    ),
  }),
);

kernelCase(
  `layerNorm ${ROWS}×${DIM}`,
  TOL,
  (rng) => ({ x: randn(ROWS * DIM, rng, 3), w: randn(DIM, rng), b: randn(DIM, rng) }),
  (k, { x, w, b }) => {
    const [out, mean, rstd] = [nans(x.length), nans(ROWS), nans(ROWS)];
    k.layerNorm(x, w, b, out, mean, rstd, ROWS, DIM, EPS);
    return { out, mean, rstd };
  },
  ({ x, w, b }) => ({
    out: ref.refLayerNorm(x, w, b, ROWS, DIM, EPS),
    mean: ref.refRowMean(x, ROWS, DIM),
    rstd: ref.refRowRstd(x, ROWS, DIM, EPS),
  }),
);

kernelCase(
  'layerNormBackward',
  TOL,
  normInputs,
  (k, { x, w, bias, dy, dw, db }) => {
    const [mean, rstd] = [new F32(ROWS), new F32(ROWS)];
    k.layerNorm(x, w, bias, new F32(x.length), mean, rstd, ROWS, DIM, EPS);
    const dx = nans(x.length);
    k.layerNormBackward(dy, x, w, mean, rstd, dx, dw, db, ROWS, DIM);
    return { dx, dWeight: dw, dBias: db };
  },
  ({ x, w, bias, dy, dw, db }) => ({
    dx: ref.refVjp((xs) => ref.refLayerNorm(xs, w, bias, ROWS, DIM, EPS), x, dy),
    dWeight: ref.refAxpy(
      1,
      ref.refVjp((ws) => ref.refLayerNorm(x, ws, bias, ROWS, DIM, EPS), w, dy),
      dw,
      DIM,
    ),
    dBias: ref.refAxpy(
      1,
      ref.refVjp((bs) => ref.refLayerNorm(x, w, bs, ROWS, DIM, EPS), bias, dy),
      db,
      DIM,
    ),
  }),
);

// ---------------------------------------------------------------------------------------------------------------
// Softmax family

/** Logits around 80 (exp would overflow float32 without the max subtraction). */
function shiftedLogits(rng: Rng, n: number): Float32Array {
  return randn(n, rng, 4).map((v) => v + 80);
}

for (const [name, kernel, reference] of [
  ['softmax', 'softmax', ref.refSoftmax],
  ['logSoftmax', 'logSoftmax', ref.refLogSoftmax],
] as const)
  kernelCase(
    `${name} ${ROWS}×${DIM} (separate output and in place)`,
    TOL,
    (rng) => shiftedLogits(rng, ROWS * DIM),
    (k, x) => {
      const out = nans(x.length);
      k[kernel](x, out, ROWS, DIM);
      k[kernel](x, x, ROWS, DIM);
      return { out, inPlace: x };
    },
    (x) => ({ out: reference(x, ROWS, DIM), inPlace: reference(x, ROWS, DIM) }),
  );

/** Rows of 37 (a vector tail after two 16-wide blocks) with hand-picked first maxima: ties, NaN, −inf and ±0. */
const ARGMAX_ROWS: [string, (row: Float32Array) => void, number][] = [
  ['tie in the tail', (r) => ((r[30] = 9), (r[35] = 9)), 30],
  ['NaN first', (r) => ((r[0] = NaN), (r[5] = 9)), 0],
  ['NaN around the max', (r) => ((r[3] = NaN), (r[20] = 9), (r[21] = NaN)), 20],
  ['all −inf', (r) => r.fill(-Infinity), 0],
  ['−0 before +0', (r) => (r.fill(-1), (r[2] = -0), (r[7] = 0)), 2],
  ['tie with the first', (r) => ((r[0] = 9), (r[17] = 9)), 0],
];

kernelCase(
  `argmaxRows ${ARGMAX_ROWS.length}×37 (${ARGMAX_ROWS.map(([what]) => what).join(', ')})`,
  0,
  (rng) => {
    const x = randn(ARGMAX_ROWS.length * 37, rng);
    ARGMAX_ROWS.forEach(([, plant], r) => plant(x.subarray(r * 37, (r + 1) * 37)));
    return x;
  },
  (k, x) => {
    const out = new Int32Array(ARGMAX_ROWS.length).fill(-1);
    k.argmaxRows(x, out, ARGMAX_ROWS.length, 37);
    return { out };
  },
  () => ({ out: ARGMAX_ROWS.map(([, , want]) => want) }),
);

kernelCase(
  'argmaxRows 3×50257 (random logits)',
  0,
  (rng) => shiftedLogits(rng, 3 * 50257),
  (k, x) => {
    const out = new Int32Array(3).fill(-1);
    k.argmaxRows(x, out, 3, 50257);
    return { out };
  },
  (x) => ({
    out: [0, 1, 2].map((r) => {
      const row = Array.from(x.subarray(r * 50257, (r + 1) * 50257));
      return row.indexOf(Math.max(...row));
    }),
  }),
);

/** Logits and targets (row 1's target negative) of a gatherLogProbs case. */
function gatherInputs(rows: number, vocab: number) {
  return (rng: Rng) => {
    const targets = randInt(rows, rng, 0, vocab);
    targets[1] = -1;
    return { logits: shiftedLogits(rng, rows * vocab), targets, dLogProb: randn(rows, rng) };
  };
}

for (const [rows, vocab] of [
  [6, 37],
  [3, 50257],
])
  kernelCase(
    `gatherLogProbs ${rows}×${vocab} (entropy, a negative target)`,
    TOL,
    gatherInputs(rows, vocab),
    (k, { logits, targets }) => {
      const [logProb, lse, entropy, plain] = [nans(rows), nans(rows), nans(rows), nans(rows)];
      k.gatherLogProbs(logits, targets, logProb, lse, rows, vocab, entropy);
      k.gatherLogProbs(logits, targets, plain, new F32(rows), rows, vocab);
      return { logProb, lse, entropy, withoutEntropy: plain };
    },
    ({ logits, targets }) => {
      const logProb = ref.refGatherLogProbs(logits, targets, rows, vocab);
      const lse = ref.refLogSumExp(logits, rows, vocab);
      return { logProb, lse, entropy: ref.refEntropy(logits, rows, vocab), withoutEntropy: logProb };
    },
  );

type GatherInputs = ReturnType<ReturnType<typeof gatherInputs>>;

/** The backend's gatherLogProbsBackward (after its forward, for lse), into a fresh array or in place over the logits. */
function runGatherBackward(k: Kernels, inputs: GatherInputs, rows: number, vocab: number, inPlace: boolean): Outputs {
  const { logits, targets, dLogProb } = inputs;
  const lse = new F32(rows);
  k.gatherLogProbs(logits, targets, new F32(rows), lse, rows, vocab);
  const dLogits = inPlace ? logits : nans(logits.length);
  k.gatherLogProbsBackward(logits, targets, lse, dLogProb, dLogits, rows, vocab);
  return { dLogits };
}

kernelCase(
  'gatherLogProbsBackward 6×37 (vs finite differences)',
  TOL,
  gatherInputs(6, 37),
  (k, inputs) => runGatherBackward(k, inputs, 6, 37, false),
  ({ logits, targets, dLogProb }) => ({
    dLogits: ref.refVjp((x) => ref.refGatherLogProbs(x, targets, 6, 37), logits, dLogProb),
  }),
);

kernelCase(
  'gatherLogProbsBackward 3×50257 in place (dLogits = logits)',
  TOL,
  gatherInputs(3, 50257),
  (k, inputs) => runGatherBackward(k, inputs, 3, 50257, true),
  ({ logits, targets, dLogProb }) => ({
    dLogits: ref.refGatherLogProbsBackward(logits, targets, dLogProb, 3, 50257),
  }),
);

for (const [rows, vocab] of [
  [6, 37],
  [3, 50257],
])
  kernelCase(
    `entropyBackward ${rows}×${vocab} adds dH·∂H/∂x (vs finite differences of the entropy)`,
    TOL,
    (rng) => ({ ...gatherInputs(rows, vocab)(rng), base: randn(rows * vocab, rng) }),
    (k, { logits, targets, dLogProb, base }) => {
      const [lse, entropy] = [new F32(rows), new F32(rows)];
      k.gatherLogProbs(logits, targets, new F32(rows), lse, rows, vocab, entropy);
      const dLogits = Float32Array.from(base);
      k.entropyBackward(logits, lse, entropy, dLogProb, dLogits, rows, vocab);
      return { dLogits };
    },
    ({ logits, dLogProb, base }) => {
      const vjp =
        vocab < 100
          ? ref.refVjp((x) => ref.refEntropy(x, rows, vocab), logits, dLogProb)
          : ref.refEntropyBackward(logits, dLogProb, rows, vocab);
      return { dLogits: vjp.map((v, i) => v + base[i]!) };
    },
    true,
  );

// ---------------------------------------------------------------------------------------------------------------
// Rotary embedding and activations

const ROPE = { rows: 5, heads: 3, headDim: 8, maxPos: 16 };

/** x, positions and the cos/sin tables [maxPos, headDim/2] with the usual 10000^(−2i/D) frequencies. */
function ropeInputs(rng: Rng) {
  const { rows, heads, headDim, maxPos } = ROPE;
  const half = headDim / 2;
  const angle = (e: number) => Math.floor(e / half) * Math.pow(10000, (-2 * (e % half)) / headDim);
  return {
    x: randn(rows * heads * headDim, rng),
    positions: randInt(rows, rng, 0, maxPos),
    cos: F32.from({ length: maxPos * half }, (_, e) => Math.cos(angle(e))),
    sin: F32.from({ length: maxPos * half }, (_, e) => Math.sin(angle(e))),
  };
}

kernelCase(
  'rope forward, inverse and forward∘inverse = identity',
  TOL,
  ropeInputs,
  (k, { x, positions, cos, sin }) => {
    const { rows, heads, headDim } = ROPE;
    const [forward, inverse, roundTrip] = [x.slice(), x.slice(), x.slice()];
    k.rope(forward, positions, cos, sin, rows, heads, headDim, false);
    k.rope(inverse, positions, cos, sin, rows, heads, headDim, true);
    k.rope(roundTrip, positions, cos, sin, rows, heads, headDim, false);
    k.rope(roundTrip, positions, cos, sin, rows, heads, headDim, true);
    return { forward, inverse, roundTrip };
  },
  ({ x, positions, cos, sin }) => {
    const { rows, heads, headDim } = ROPE;
    return {
      forward: ref.refRope(x, positions, cos, sin, rows, heads, headDim, false),
      inverse: ref.refRope(x, positions, cos, sin, rows, heads, headDim, true),
      roundTrip: Float64Array.from(x),
    };
  },
);

const N = 1000;

kernelCase(
  `swiglu and gelu, n=${N}`,
  TOL,
  (rng) => ({ gate: randn(N, rng, 3), up: randn(N, rng) }),
  (k, { gate, up }) => {
    const [swiglu, gelu] = [nans(N), nans(N)];
    k.swiglu(gate, up, swiglu, N);
    k.gelu(gate, gelu, N);
    return { swiglu, gelu };
  },
  ({ gate, up }) => ({ swiglu: ref.refSwiglu(gate, up, N), gelu: ref.refGelu(gate, N) }),
);

kernelCase(
  `swigluBackward and geluBackward, n=${N} (vs finite differences)`,
  TOL,
  (rng) => ({ gate: randn(N, rng, 3), up: randn(N, rng), dy: randn(N, rng) }),
  (k, { gate, up, dy }) => {
    const [dGate, dUp, dx] = [nans(N), nans(N), nans(N)];
    k.swigluBackward(dy, gate, up, dGate, dUp, N);
    k.geluBackward(dy, gate, dx, N);
    return { dGate, dUp, geluDx: dx };
  },
  ({ gate, up, dy }) => ({
    dGate: ref.refVjp((g) => ref.refSwiglu(g, up, N), gate, dy),
    dUp: ref.refVjp((u) => ref.refSwiglu(gate, u, N), up, dy),
    geluDx: ref.refVjp((x) => ref.refGelu(x, N), gate, dy),
  }),
);

// ---------------------------------------------------------------------------------------------------------------
// Attention

const GQA: AttentionShape = { batch: 2, seqLen: 9, queryHeads: 4, kvHeads: 2, headDim: 8 };

interface AttentionCase {
  label: string;
  shape: AttentionShape;
  keyStart?: number[];
}

const attentionCases: AttentionCase[] = [
  { label: 'GQA 4/2 T=9', shape: GQA },
  { label: 'GQA 4/2 T=1', shape: { ...GQA, seqLen: 1 } },
  { label: 'GQA 4/2 T=9 keyStart [3, 9] scale 0.3', shape: { ...GQA, scale: 0.3 }, keyStart: [3, 9] },
  { label: 'MQA 3/1 T=5 keyStart [0, 2]', shape: { ...GQA, seqLen: 5, queryHeads: 3, kvHeads: 1 }, keyStart: [0, 2] },
];

/** Elements of a [B,T,H,D] tensor. */
function headsSize(s: AttentionShape, heads: number): number {
  return s.batch * s.seqLen * heads * s.headDim;
}

function attentionInputs(c: AttentionCase) {
  return (rng: Rng) => ({
    q: randn(headsSize(c.shape, c.shape.queryHeads), rng),
    k: randn(headsSize(c.shape, c.shape.kvHeads), rng),
    v: randn(headsSize(c.shape, c.shape.kvHeads), rng),
    dOut: randn(headsSize(c.shape, c.shape.queryHeads), rng),
    keyStart: c.keyStart && Int32Array.from(c.keyStart),
  });
}

/** lse with the entries of fully masked queries set to 0: their value is not specified by the interface. */
function visibleLse(lse: ArrayLike<number>, s: AttentionShape, keyStart?: ArrayLike<number>): Float64Array {
  return Float64Array.from(lse, (l, e) =>
    (keyStart?.[Math.floor(e / (s.queryHeads * s.seqLen))] ?? 0) > e % s.seqLen ? 0 : l,
  );
}

/** The backend's attention forward: out and lse. */
function runAttention(
  k: Kernels,
  s: AttentionShape,
  q: Float32Array,
  kk: Float32Array,
  v: Float32Array,
  ks?: Int32Array,
) {
  const out = nans(q.length);
  const lse = nans(s.batch * s.queryHeads * s.seqLen);
  k.attention(q, kk, v, out, lse, s, ks);
  return { out, lse };
}

for (const c of attentionCases) {
  const s = c.shape;
  kernelCase(
    `attention ${c.label}`,
    TOL,
    attentionInputs(c),
    (k, { q, k: kk, v, keyStart }) => {
      const { out, lse } = runAttention(k, s, q, kk, v, keyStart);
      return { out, lse: visibleLse(lse, s, keyStart) };
    },
    ({ q, k, v, keyStart }) => {
      const { out, lse } = ref.refAttention(q, k, v, s, keyStart);
      return { out, lse: visibleLse(lse, s, keyStart) };
    },
  );
  kernelCase(
    `attentionBackward ${c.label} (vs finite differences)`,
    TOL,
    attentionInputs(c),
    (k, { q, k: kk, v, dOut, keyStart }) => {
      const { out, lse } = runAttention(k, s, q, kk, v, keyStart);
      const [dq, dk, dv] = [nans(q.length), nans(kk.length), nans(v.length)];
      k.attentionBackward(dOut, q, kk, v, out, lse, dq, dk, dv, s, keyStart);
      return { dq, dk, dv };
    },
    ({ q, k, v, dOut, keyStart }) => ({
      dq: ref.refVjp((x) => ref.refAttention(x, k, v, s, keyStart).out, q, dOut),
      dk: ref.refVjp((x) => ref.refAttention(q, x, v, s, keyStart).out, k, dOut),
      dv: ref.refVjp((x) => ref.refAttention(q, k, x, s, keyStart).out, v, dOut),
    }),
    true, // at T = 1, dq and dk are exactly 0: judge them on the scale of dv
  );
}

/** Rows t = T−1 of a [B,T,width] tensor, as [B,width]. */
function lastRow(x: ArrayLike<number>, batch: number, seqLen: number, width: number): Float32Array {
  return F32.from(
    { length: batch * width },
    (_, e) => x[(Math.floor(e / width) * seqLen + seqLen - 1) * width + (e % width)],
  );
}

/** A KV cache [B,Hkv,S,D] holding the keys (or values) [B,T,Hkv,D] at positions 0..T−1 and noise after them. */
function toCache(x: Float32Array, s: AttentionShape, capacity: number, rng: Rng): Float32Array {
  const { batch, seqLen, kvHeads, headDim } = s;
  const cache = randn(batch * kvHeads * capacity * headDim, rng, 100);
  for (let b = 0; b < batch; b++)
    for (let t = 0; t < seqLen; t++)
      for (let h = 0; h < kvHeads; h++) {
        const from = ((b * seqLen + t) * kvHeads + h) * headDim;
        cache.set(x.subarray(from, from + headDim), ((b * kvHeads + h) * capacity + t) * headDim);
      }
  return cache;
}

const CAPACITY = 12;

// Head dimension 32 and 21 keys: the AVX-512 decode path (16 keys at a time) with a partial last block.
const wideDecode: AttentionCase = {
  label: 'GQA 4/2 D=32 T=21 keyStart [0, 4]',
  shape: { ...GQA, headDim: 32, seqLen: 21 },
  keyStart: [0, 4],
};

for (const c of [attentionCases[0], attentionCases[2], attentionCases[3], wideDecode]) {
  const s = c.shape;
  const { batch, queryHeads, kvHeads, headDim, seqLen } = s;
  const capacity = Math.max(CAPACITY, seqLen + 3);
  const scale = s.scale ?? 1 / Math.sqrt(headDim);
  const qWidth = queryHeads * headDim;
  const decodeInputs = (rng: Rng) => {
    const inputs = attentionInputs(c)(rng);
    const [kCache, vCache] = [toCache(inputs.k, s, capacity, rng), toCache(inputs.v, s, capacity, rng)];
    return { ...inputs, qLast: lastRow(inputs.q, batch, seqLen, qWidth), kCache, vCache };
  };
  kernelCase(
    `attentionDecode ${c.label} (cache capacity ${capacity}) = last row of attention`,
    TOL,
    decodeInputs,
    (k, { q, k: kk, v, keyStart, qLast, kCache, vCache }) => {
      const decode = nans(qLast.length);
      k.attentionDecode(
        qLast,
        kCache,
        vCache,
        decode,
        batch,
        queryHeads,
        kvHeads,
        headDim,
        capacity,
        seqLen,
        scale,
        keyStart,
      );
      const training = lastRow(runAttention(k, s, q, kk, v, keyStart).out, batch, seqLen, qWidth);
      return { decode, training };
    },
    ({ q, k, v, keyStart, qLast, kCache, vCache }) => {
      const training = lastRow(ref.refAttention(q, k, v, s, keyStart).out, batch, seqLen, qWidth);
      const geometry = { batch, queryHeads, kvHeads, headDim, capacity, length: seqLen, scale };
      return { decode: ref.refAttentionDecode(qLast, kCache, vCache, geometry, keyStart), training };
    },
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Optimiser

const ADAMW = { lr: 1e-2, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1 };

kernelCase(
  'adamw, 3 steps',
  TOL,
  (rng) => ({ param: randn(DIM, rng), grads: [1, 2, 3].map(() => randn(DIM, rng)) }),
  (k, { param, grads }) => {
    const [m, v] = [new F32(DIM), new F32(DIM)];
    const { lr, beta1, beta2, eps, weightDecay } = ADAMW;
    grads.forEach((g, t) => k.adamw(param, g, m, v, DIM, lr, beta1, beta2, eps, weightDecay, t + 1));
    return { param, m, v };
  },
  ({ param, grads }) => {
    let state: ReturnType<typeof ref.refAdamw> = {
      param: Float64Array.from(param),
      m: new Float64Array(DIM),
      v: new Float64Array(DIM),
    };
    for (const [t, g] of grads.entries())
      state = ref.refAdamw(state.param, g, state.m, state.v, { ...ADAMW, step: t + 1 });
    return state;
  },
);

// ---------------------------------------------------------------------------------------------------------------
// Small elementwise kernels and embeddings

kernelCase(
  'addBias 3×13 (separate output and in place)',
  TOL,
  (rng) => ({ x: randn(39, rng), bias: randn(13, rng) }),
  (k, { x, bias }) => {
    const out = nans(39);
    k.addBias(x, bias, out, 3, 13);
    k.addBias(x, bias, x, 3, 13);
    return { out, inPlace: x };
  },
  ({ x, bias }) => ({ out: ref.refAddBias(x, bias, 3, 13), inPlace: ref.refAddBias(x, bias, 3, 13) }),
);

kernelCase(
  'sumRows 5×13 (accumulates)',
  TOL,
  (rng) => ({ dy: randn(65, rng), dBias: randn(13, rng) }),
  (k, { dy, dBias }) => {
    k.sumRows(dy, dBias, 5, 13);
    return { dBias };
  },
  ({ dy, dBias }) => ({ dBias: ref.refAxpy(1, ref.refSumRows(dy, 5, 13), dBias, 13) }),
);

/** Arrays a little longer than the n the kernels are given, to check they stop at n. */
const LEN = 1010;
const n = 1001;

kernelCase(
  `axpy, scale, mul (n=${n} of ${LEN})`,
  TOL,
  (rng) => ({ x: randn(LEN, rng), y: randn(LEN, rng), z: randn(LEN, rng) }),
  (k, { x, y, z }) => {
    const product = nans(n);
    k.axpy(-0.7, x, y, n);
    k.scale(x, 1.5, n);
    k.mul(z, y, product, n);
    k.mul(z, y, z, n);
    return { axpy: y, scale: x, mul: product, mulInPlace: z.subarray(0, n) };
  },
  ({ x, y, z }) => {
    const axpy = ref.refAxpy(-0.7, x, y, n);
    return { axpy, scale: ref.refScale(x, 1.5, n), mul: ref.refMul(z, axpy, n), mulInPlace: ref.refMul(z, axpy, n) };
  },
);

kernelCase(
  `sumSquares (n=${n} of ${LEN})`,
  TOL,
  (rng) => randn(LEN, rng),
  (k, x) => ({ sum: k.sumSquares(x, n) }),
  (x) => ({ sum: ref.refSumSquares(x, n) }),
);

/** x with `value` written at index i. */
function withValue(x: Float32Array, i: number, value: number): Float32Array {
  const y = x.slice();
  y[i] = value;
  return y;
}

kernelCase(
  'allFinite (finite, NaN, +Inf, −Inf, NaN past n)',
  0,
  (rng) => {
    const x = randn(LEN, rng);
    return {
      finite: x,
      nan: withValue(x, 500, NaN),
      posInf: withValue(x, 0, Infinity),
      negInf: withValue(x, n - 1, -Infinity),
      nanPastN: withValue(x, n, NaN),
    };
  },
  (k, arrays) => Object.fromEntries(Object.entries(arrays).map(([name, x]) => [name, k.allFinite(x, n)])),
  (arrays) => Object.fromEntries(Object.entries(arrays).map(([name, x]) => [name, ref.refAllFinite(x, n)])),
);

const IDS = [3, 1, 3, 9, 0, 3];

kernelCase(
  'copyRows 5×7 from offset 3, ld 11, into offset 2, ld 9 (the rest of dst untouched)',
  0,
  (rng) => ({ src: randn(3 + 4 * 11 + 7, rng), dst: randn(2 + 4 * 9 + 7 + 5, rng) }),
  (k, { src, dst }) => {
    k.copyRows(src, 3, 11, dst, 2, 9, 5, 7);
    return { dst };
  },
  ({ src, dst }) => {
    const want = Float32Array.from(dst);
    for (let r = 0; r < 5; r++) for (let c = 0; c < 7; c++) want[2 + r * 9 + c] = src[3 + r * 11 + c]!;
    return { dst: want };
  },
);

kernelCase(
  'embedding 6 ids of a 10×13 table (repeated ids)',
  0,
  (rng) => randn(130, rng),
  (k, table) => {
    const out = nans(IDS.length * 13);
    k.embedding(table, Int32Array.from(IDS), out, IDS.length, 13);
    return { out };
  },
  (table) => ({ out: ref.refEmbedding(table, IDS, IDS.length, 13) }),
);

kernelCase(
  'embeddingBackward (repeated ids accumulate)',
  TOL,
  (rng) => ({ dOut: randn(IDS.length * 13, rng), dTable: randn(130, rng) }),
  (k, { dOut, dTable }) => {
    k.embeddingBackward(dOut, Int32Array.from(IDS), dTable, IDS.length, 13);
    return { dTable };
  },
  ({ dOut, dTable }) => ({ dTable: ref.refEmbeddingBackward(dOut, IDS, dTable, IDS.length, 13) }),
);

// ---------------------------------------------------------------------------------------------------------------

const backends = testedBackends('kernels');

for (const k of backends)
  describe(`${k.name} backend (${k.blas})`, () => {
    for (const c of cases) test(c.name, () => assertOutputsClose(c.run(k), c.expect(), c.tol, c.sharedScale));
  });

const native = backends.find((k) => k.name === 'native');
if (native)
  describe('native agrees with typescript', () => {
    for (const c of cases)
      test(c.name, () =>
        assertOutputsClose(c.run(native), c.run(typescriptKernels), Math.max(c.tol, TOL), c.sharedScale),
      );
  });
