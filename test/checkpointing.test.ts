// Activation checkpointing (ops.checkpoint, Ctx.checkpointing): a training pass that recomputes each block in the
// backward gives the same log-probs, entropies and gradients, bit for bit, as one that keeps every activation; the
// update loop with it on makes the same updates.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Engine } from '../src/backend/engine.js';
import { packPromptResponses } from '../src/model/pack.js';
import type { Transformer } from '../src/model/transformer.js';
import { AdamW } from '../src/optim/adamw.js';
import { checkpoint, linear } from '../src/tensor/ops.js';
import { Tape } from '../src/tensor/tape.js';
import { Tensor } from '../src/tensor/tensor.js';
import { runUpdates } from '../src/train/policy-updates.js';
import { testedBackends } from './backends.js';
import { mulberry32, randn, relError } from './helpers.js';
import { CONFIGS, testModel, VOCAB } from './tiny-models.js';

/** Three prompt+response pairs of different lengths (so the batch pads), ids drawn from `seed`. */
function items(seed: number) {
  const rng = mulberry32(seed);
  const ids = (n: number): number[] => Array.from({ length: n }, () => 1 + Math.floor(rng() * (VOCAB - 1)));
  return [
    { prompt: ids(5), response: ids(9) },
    { prompt: ids(3), response: ids(4) },
    { prompt: ids(7), response: ids(6) },
  ];
}

const bits = (a: Float32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/** Log-probs, entropies and every parameter's gradient of one backward from fixed seeds. */
function gradients(model: Transformer, k: Engine, checkpointing: boolean) {
  const packed = packPromptResponses(items(3));
  const tape = new Tape();
  const out = model.tokenLogProbs({ k, tape, checkpointing }, packed, packed.targets, { entropy: true });
  const rng = mulberry32(11);
  const seed = randn(out.logProb.size, rng);
  out.entropySeed!.set(randn(out.logProb.size, rng));
  tape.backward(out.logProb, seed);
  const grads = new Map([...model.params].map(([name, p]) => [name, Float32Array.from(p.grad!)]));
  for (const p of model.params.values()) p.zeroGrad();
  return { logProb: out.logProb.data.slice(), entropy: out.entropy!.slice(), grads };
}

for (const k of testedBackends('activation checkpointing').map((b) => new Engine(b))) {
  describe(`activation checkpointing on ${k.name}`, () => {
    for (const [family, json] of Object.entries(CONFIGS))
      test(`${family}: log-probs, entropies and every gradient bit-identical to the kept activations`, () => {
        const model = testModel(json, 5);
        const kept = gradients(model, k, false);
        const recomputed = gradients(model, k, true);
        assert.ok(bits(kept.logProb).equals(bits(recomputed.logProb)), 'log-probs differ');
        assert.ok(bits(kept.entropy).equals(bits(recomputed.entropy)), 'entropies differ');
        for (const [name, g] of kept.grads) {
          assert.ok(
            g.some((v) => v !== 0),
            `${name} has no gradient: the check would be vacuous`,
          );
          assert.ok(bits(g).equals(bits(recomputed.grads.get(name)!)), `gradient of ${name} differs`);
        }
      });

    test('the update loop makes the same updates with checkpointing on', () => {
      const [a, b] = [testModel(CONFIGS.qwen3!, 8), testModel(CONFIGS.qwen3!, 8)];
      const run = (model: Transformer, checkpointing: boolean): void => {
        const opt = new AdamW(model.params, { lr: 1e-2 });
        const pairs = items(21);
        runUpdates(
          model,
          opt,
          k,
          (i) => pairs[i]!,
          [[0, 1, 2], [2, 0], [1]],
          (_, logProbs) => ({
            loss: -logProbs.reduce((s, lp) => s + lp.reduce((t, v) => t + v, 0), 0),
            grad: logProbs.map((lp) => new Float32Array(lp.length).fill(-1)),
            stats: {},
          }),
          { clip: 1, lr: 1e-2, checkpointing },
        );
      };
      run(a, false);
      run(b, true);
      for (const [name, p] of a.params) assert.ok(bits(p.data).equals(bits(b.p(name).data)), `${name} differs`);
    });

    test('checkpoint adds into an input gradient that already holds a contribution (to rounding)', () => {
      const rng = mulberry32(4);
      const x = new Tensor(randn(12, rng), [3, 4], true);
      const w = new Tensor(randn(20, rng), [5, 4], true);
      const seed = randn(15, rng);
      const run = (wrapped: boolean): [Float32Array, Float32Array] => {
        const tape = new Tape();
        const ctx = { k, tape };
        const y = wrapped ? checkpoint(ctx, x, (c, input) => linear(c, input, w)) : linear(ctx, x, w);
        // x also feeds a second product, so its gradient has two contributions to add.
        const z = linear(ctx, x, w);
        const both = new Tensor(new Float32Array(30), [30], true);
        both.data.set(y.data);
        both.data.set(z.data, 15);
        tape.record(() => {
          y.ensureGrad().set(both.grad!.subarray(0, 15));
          z.ensureGrad().set(both.grad!.subarray(15));
        }, both);
        tape.backward(both, Float32Array.from([...seed, ...seed]));
        const out: [Float32Array, Float32Array] = [x.grad!.slice(), w.grad!.slice()];
        x.zeroGrad();
        w.zeroGrad();
        return out;
      };
      const [dxPlain, dwPlain] = run(false);
      const [dxCkpt, dwCkpt] = run(true);
      assert.ok(dxPlain.some((v) => v !== 0));
      // The weight's gradient is reached in the same order; x's second contribution is added once more rounded.
      assert.deepEqual(Array.from(dwCkpt), Array.from(dwPlain));
      assert.ok(relError(dxCkpt, dxPlain) < 1e-6, `input gradient off by ${relError(dxCkpt, dxPlain)}`);
    });
  });
}
