// Finite-difference checks of every differentiable op: the tape's float32 gradients against central differences of the
// float64 reference forward, on every backend.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Engine, engine } from '../src/backend/engine.js';
import * as ops from '../src/tensor/ops.js';
import { giveBack, MIN_POOL_CAP, poolCap, recycle, takeZeroed, trimPool } from '../src/tensor/grad-pool.js';
import { Tape, type Ctx } from '../src/tensor/tape.js';
import { generate } from '../src/model/generate.js';
import { CONFIGS, testModel } from './tiny-models.js';
import { Tensor } from '../src/tensor/tensor.js';
import { testedBackends } from './backends.js';
import { mulberry32, randn, relError } from './helpers.js';
import {
  refAddBias,
  refAttention,
  refEmbedding,
  refEntropy,
  refGatherLogProbs,
  refGelu,
  refGemm,
  refLayerNorm,
  refRmsNorm,
  refRope,
  refSwiglu,
  refVjp,
  type Vec,
} from './reference.js';

interface Input {
  shape: number[];
  data: Float32Array;
}

/** One op under test: its inputs, how hacrl computes it on the tape, and the float64 reference of the same function. */
interface Case {
  name: string;
  inputs: Record<string, Input>;
  run: (ctx: Ctx, t: Record<string, Tensor>) => Tensor;
  ref: (v: Record<string, Float64Array>) => Float64Array;
}

const rng = mulberry32(2024);
const input = (shape: number[], scale = 1): Input => ({
  shape,
  data: randn(
    shape.reduce((a, b) => a * b, 1),
    rng,
    scale,
  ),
});
const positive = (shape: number[]): Input => {
  const x = input(shape, 0.3);
  x.data.forEach((v, i) => (x.data[i] = 1 + v));
  return x;
};

const linearRef = (x: Vec, w: Vec, rows: number, outF: number, inF: number): Float64Array =>
  refGemm({
    transB: true,
    m: rows,
    n: outF,
    k: inF,
    a: { data: x },
    b: { data: w },
    c: { data: new Float64Array(rows * outF) },
  });

const ropeTables = (maxPos: number, half: number): { cos: Float32Array; sin: Float32Array } => {
  const cos = new Float32Array(maxPos * half);
  const sin = new Float32Array(maxPos * half);
  for (let p = 0; p < maxPos; p++)
    for (let i = 0; i < half; i++) {
      cos[p * half + i] = Math.cos(p / 10000 ** ((2 * i) / (2 * half)));
      sin[p * half + i] = Math.sin(p / 10000 ** ((2 * i) / (2 * half)));
    }
  return { cos, sin };
};

const attnShape = { batch: 2, seqLen: 5, queryHeads: 4, kvHeads: 2, headDim: 6 };
const keyStart = Int32Array.of(0, 2);
const positions = Int32Array.of(0, 3, 1, 4, 2, 7);
const rot = ropeTables(8, 4);
const ids = Int32Array.of(3, 1, 3, 0, 6);
const targets = Int32Array.of(2, -1, 10, 4, 0, 7, 7);
const splitWeights = randn(21, rng);

const cases: Case[] = [
  {
    name: 'linear with bias',
    inputs: { x: input([2, 3, 5]), w: input([4, 5]), b: input([4]) },
    run: (ctx, t) => ops.linear(ctx, t.x!, t.w!, t.b!),
    ref: (v) => refAddBias(linearRef(v.x!, v.w!, 6, 4, 5), v.b!, 6, 4),
  },
  {
    name: 'add (one input used twice accumulates)',
    inputs: { a: input([3, 4]), b: input([3, 4]) },
    run: (ctx, t) => ops.add(ctx, ops.add(ctx, t.a!, t.b!), t.a!),
    ref: (v) => v.a!.map((a, i) => 2 * a + v.b![i]!),
  },
  {
    name: 'mul',
    inputs: { a: input([7]), b: input([7]) },
    run: (ctx, t) => ops.mul(ctx, t.a!, t.b!),
    ref: (v) => v.a!.map((a, i) => a * v.b![i]!),
  },
  {
    name: 'rmsNorm',
    inputs: { x: input([3, 8]), w: positive([8]) },
    run: (ctx, t) => ops.rmsNorm(ctx, t.x!, t.w!, 1e-6),
    ref: (v) => refRmsNorm(v.x!, v.w!, 3, 8, 1e-6),
  },
  {
    name: 'layerNorm',
    inputs: { x: input([3, 8]), w: positive([8]), b: input([8]) },
    run: (ctx, t) => ops.layerNorm(ctx, t.x!, t.w!, t.b!, 1e-5),
    ref: (v) => refLayerNorm(v.x!, v.w!, v.b!, 3, 8, 1e-5),
  },
  {
    name: 'rope',
    inputs: { x: input([6, 2 * 8]) },
    run: (ctx, t) => ops.rope(ctx, t.x!, positions, rot.cos, rot.sin, 2, 8),
    ref: (v) => refRope(v.x!, positions, rot.cos, rot.sin, 6, 2, 8, false),
  },
  {
    name: 'swiglu',
    inputs: { g: input([9]), u: input([9]) },
    run: (ctx, t) => ops.swiglu(ctx, t.g!, t.u!),
    ref: (v) => refSwiglu(v.g!, v.u!, 9),
  },
  {
    name: 'gelu',
    inputs: { x: input([9], 2) },
    run: (ctx, t) => ops.gelu(ctx, t.x!),
    ref: (v) => refGelu(v.x!, 9),
  },
  {
    name: 'attention (GQA 4/2, left padding)',
    inputs: { q: input([10, 24]), k: input([10, 12]), v: input([10, 12]) },
    run: (ctx, t) => ops.attention(ctx, t.q!, t.k!, t.v!, attnShape, keyStart),
    ref: (v) => refAttention(v.q!, v.k!, v.v!, attnShape, keyStart).out,
  },
  {
    name: 'embedding (repeated ids)',
    inputs: { table: input([7, 3]) },
    run: (ctx, t) => ops.embedding(ctx, t.table!, ids),
    ref: (v) => refEmbedding(v.table!, ids, ids.length, 3),
  },
  ...[Infinity, 0].map((keepLogitsLimit) => ({
    name: `lmHeadLogProbs (chunked, ignored rows, logits ${keepLogitsLimit ? 'kept' : 'recomputed'})`,
    inputs: { h: input([7, 6]), w: input([11, 6]) },
    run: (ctx: Ctx, t: Record<string, Tensor>) =>
      ops.lmHeadLogProbs(ctx, t.h!, t.w!, targets, { chunkRows: 3, keepLogitsLimit }).logProb,
    ref: (v: Record<string, Float64Array>) => {
      const lp = refGatherLogProbs(linearRef(v.h!, v.w!, 7, 11, 6), targets, 7, 11);
      return lp.map((x, r) => (targets[r]! < 0 ? 0 : x));
    },
  })),
  {
    name: 'splitColumns (and reshape views sharing a gradient)',
    inputs: { x: input([3, 7]) },
    run: (ctx, t) => {
      const [a, b] = ops.splitColumns(ctx, t.x!.reshape([21]).reshape([3, 7]), [4, 3]);
      const squares = ops.mul(ctx, a!, a!.reshape([12]));
      return ops.add(
        ctx,
        ops.weightedSum(ctx, squares, splitWeights.subarray(0, 12)),
        ops.weightedSum(ctx, b!, splitWeights.subarray(12)),
      );
    },
    ref: (v) => {
      let s = 0;
      for (let r = 0; r < 3; r++) {
        for (let c = 0; c < 4; c++) s += splitWeights[r * 4 + c]! * v.x![r * 7 + c]! ** 2;
        for (let c = 0; c < 3; c++) s += splitWeights[12 + r * 3 + c]! * v.x![r * 7 + 4 + c]!;
      }
      return Float64Array.of(s);
    },
  },
  {
    name: 'weightedSum',
    inputs: { x: input([5]) },
    run: (ctx, t) => ops.weightedSum(ctx, t.x!, Float32Array.of(1, -2, 0.5, 0, 3)),
    ref: (v) => Float64Array.of([1, -2, 0.5, 0, 3].reduce((s, w, i) => s + w * v.x![i]!, 0)),
  },
];

for (const backend of testedBackends('autograd')) {
  const k = new Engine(backend);
  describe(`autograd on ${backend.name}`, () => {
    for (const c of cases)
      test(`${c.name}: gradients match finite differences of the float64 reference`, () => {
        const tape = new Tape();
        const tensors = Object.fromEntries(
          Object.entries(c.inputs).map(([n, i]) => [n, new Tensor(Float32Array.from(i.data), i.shape, true)]),
        );
        const out = c.run({ k, tape }, tensors);
        const values = Object.fromEntries(Object.entries(c.inputs).map(([n, i]) => [n, Float64Array.from(i.data)]));
        const want = c.ref(values);
        assert.ok(relError(out.data, want) < 1e-5, `${c.name}: forward differs from the reference`);
        const dy = randn(out.size, mulberry32(out.size));
        tape.backward(out, dy);
        for (const [name, i] of Object.entries(c.inputs)) {
          const numeric = refVjp((x) => c.ref({ ...values, [name]: x }), i.data, dy);
          const got = tensors[name]!.grad;
          assert.ok(got, `${c.name}: no gradient reached ${name}`);
          const err = relError(got, numeric);
          assert.ok(err < 1e-4, `${c.name}: gradient of ${name} off by ${err.toExponential(2)} relative`);
        }
      });

    test('lmHeadLogProbs with an entropy seed: the entropy bonus gradient matches finite differences', () => {
      // L = Σ_r dLp_r·log p_r(target) + Σ_r dH_r·H_r, the second term through entropySeed (rows 0 and 4 get none).
      const [rows, vocab, dim] = [7, 11, 6];
      const h0 = input([rows, dim]).data;
      const w0 = input([vocab, dim]).data;
      const dLp = randn(rows, mulberry32(5));
      const dH = randn(rows, mulberry32(6)).map((v, r) => (r === 0 || r === 4 ? 0 : v));
      const tape = new Tape();
      const [h, w] = [
        new Tensor(Float32Array.from(h0), [rows, dim], true),
        new Tensor(Float32Array.from(w0), [vocab, dim], true),
      ];
      const r = ops.lmHeadLogProbs({ k, tape }, h, w, targets, { chunkRows: 3, entropy: true });
      r.entropySeed!.set(dH);
      tape.backward(r.logProb, dLp);
      const f = (hv: Vec, wv: Vec): Float64Array => {
        const logits = linearRef(hv, wv, rows, vocab, dim);
        const lp = refGatherLogProbs(logits, targets, rows, vocab).map((x, i) => (targets[i]! < 0 ? 0 : x));
        return Float64Array.from([...lp, ...refEntropy(logits, rows, vocab)]);
      };
      const dy = Float64Array.from([...dLp, ...dH]);
      const H = Float64Array.from(h0);
      const W = Float64Array.from(w0);
      assert.ok(relError(r.entropy!, refEntropy(linearRef(H, W, rows, vocab, dim), rows, vocab)) < 1e-5);
      const errH = relError(
        h.grad!,
        refVjp((x) => f(x, W), h0, dy),
      );
      const errW = relError(
        w.grad!,
        refVjp((x) => f(H, x), w0, dy),
      );
      assert.ok(
        errH < 1e-4 && errW < 1e-4,
        `hidden ${errH.toExponential(2)}, weight ${errW.toExponential(2)} relative`,
      );
    });

    test('no tape: ops record nothing and allocate no gradients', () => {
      const x = new Tensor(Float32Array.of(1, 2, 3, 4), [2, 2], true);
      const w = new Tensor(Float32Array.of(1, 0, 0, 1), [2, 2], true);
      const y = ops.linear({ k, tape: null }, x, w);
      assert.equal(y.requiresGrad, false);
      assert.equal(x.grad, null);
    });

    test('recycled gradient buffers: a second pass gets the same gradients, and the buffers come back zeroed', () => {
      // Big enough (≥ 4096 floats per intermediate) for the pool to recycle the intermediates' gradients.
      const r = mulberry32(9);
      const x = new Tensor(randn(64 * 96, r), [64, 96]);
      const w = new Tensor(randn(128 * 96, r, 0.1), [128, 96], true);
      const g = new Tensor(randn(128, r), [128], true);
      const pass = (): Float32Array[] => {
        w.zeroGrad();
        g.zeroGrad();
        const tape = new Tape();
        const ctx = { k, tape };
        const h = ops.rmsNorm(ctx, ops.linear(ctx, x, w), g, 1e-6);
        const y = ops.mul(ctx, h, ops.add(ctx, h, h));
        tape.backward(y);
        assert.equal(h.grad, null, 'an intermediate gradient is handed back when the pass ends');
        return [Float32Array.from(w.grad!), Float32Array.from(g.grad!)];
      };
      const first = pass();
      const second = pass();
      assert.deepEqual(second, first);
      const taken = takeZeroed(5000);
      taken.fill(7);
      giveBack(taken);
      const again = takeZeroed(5000);
      assert.equal(again.buffer, taken.buffer);
      assert.ok(again.every((v) => v === 0));
      again.fill(3);
      giveBack(again);
      const smaller = takeZeroed(4500); // another capacity class: a free buffer up to twice its size is reused
      assert.equal(smaller.buffer, taken.buffer);
      assert.equal(smaller.length, 4500);
      assert.ok(smaller.every((v) => v === 0));
      giveBack(smaller);
      assert.notEqual(takeZeroed(20000).buffer, taken.buffer, 'nor is one under half the size asked for');
    });

    test('shape errors name the op and the shapes', () => {
      const ctx = { k, tape: new Tape() };
      const x = Tensor.zeros([2, 3]);
      assert.throws(() => ops.linear(ctx, x, Tensor.zeros([4, 5])), /linear: input \[2,3\] does not end in 5/);
      assert.throws(() => ops.add(ctx, x, Tensor.zeros([3, 3])), /add: shapes \[2,3\] and \[3,3\] differ/);
      assert.throws(
        () => ops.embedding(ctx, Tensor.zeros([4, 3]), Int32Array.of(1, 4)),
        /embedding: token id 4 at row 1/,
      );
      assert.throws(() => new Tensor(new Float32Array(5), [2, 3]), /shape \[2,3\] needs 6 elements/);
    });
  });
}

describe('the buffer pool', () => {
  test('keeps every buffer of a pass larger than its initial cap, so the next pass takes none fresh', () => {
    // 4 × 2^26 floats (1 GiB) exceed MIN_POOL_CAP (2^27 floats): a fixed cap dropped the third buffer.
    const n = 2 ** 26;
    const fresh = (): Float32Array[] => [takeZeroed(n), takeZeroed(n), takeZeroed(n), takeZeroed(n)];
    const first = fresh();
    recycle(first);
    assert.ok(poolCap() >= 4 * n, `cap ${poolCap()} floats`);
    let last = first;
    /** Takes four buffers and hands them back: how many came from the pass before. */
    const reused = (): number => {
      const next = fresh();
      recycle(next);
      const count = next.filter((b) => last.some((f) => f.buffer === b.buffer)).length;
      last = next;
      return count;
    };
    assert.equal(reused(), 4);
    assert.ok(MIN_POOL_CAP === 2 * n);
    // A tiny model's sampling needs a few KiB beside the pool: one buffer makes room, three stay.
    generate(testModel(CONFIGS.qwen3!, 1), engine(), [[1, 2, 3]], { maxNewTokens: 2, temperature: 0 });
    assert.equal(reused(), 3);
    // Room for one buffer's worth: three stay (fewer if other tests' buffers sit in the pool; the largest go first).
    trimPool(n);
    assert.ok([2, 3].includes(reused()));
    // Room for all four: the pool keeps MIN_POOL_CAP, two of them.
    trimPool(4 * n);
    assert.ok([1, 2].includes(reused()));
    trimPool(Infinity);
    assert.equal(poolCap(), 4 * n, 'the cap stays: the next pass most likely has the same shapes');
  });
});
