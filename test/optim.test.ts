// Training primitives: schedules, clipping, the AdamW optimizer's state, and a tiny model that really learns.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { responseTokens, sftLoss } from '../src/model/sft.js';
import { AdamW } from '../src/optim/adamw.js';
import { clipGradNorm } from '../src/optim/grad-clip.js';
import { learningRate } from '../src/optim/schedule.js';
import { Tape } from '../src/tensor/tape.js';
import { Tensor } from '../src/tensor/tensor.js';
import { CONFIGS, testModel } from './tiny-models.js';

const k = engine();

describe('learning-rate schedules', () => {
  test('warm-up is linear and reaches the peak; cosine and linear end at minRatio·peak', () => {
    const o = { peak: 1, warmupSteps: 4, totalSteps: 14, minRatio: 0.1 };
    assert.deepEqual(
      [0, 1, 2, 3].map((s) => learningRate(s, o)),
      [0.2, 0.4, 0.6, 0.8],
    );
    assert.equal(learningRate(4, { ...o, kind: 'cosine' }), 1);
    assert.ok(Math.abs(learningRate(9, { ...o, kind: 'cosine' }) - 0.55) < 1e-12);
    assert.ok(Math.abs(learningRate(14, { ...o, kind: 'cosine' }) - 0.1) < 1e-12);
    assert.ok(Math.abs(learningRate(9, { ...o, kind: 'linear' }) - 0.55) < 1e-12);
    assert.equal(learningRate(100, { ...o, kind: 'constant' }), 1);
    assert.throws(() => learningRate(5, { peak: 1, kind: 'cosine' }), /needs totalSteps/);
  });
});

describe('gradient clipping', () => {
  test('scales to maxNorm when above, leaves alone when below, reports non-finite norms without scaling', () => {
    const a = new Tensor(new Float32Array(2), [2], true);
    const b = new Tensor(new Float32Array(1), [1], true);
    a.ensureGrad().set([3, 0]);
    b.ensureGrad().set([4]);
    assert.equal(clipGradNorm(k, [a, b], 10), 5);
    assert.deepEqual(Array.from(a.grad!), [3, 0]);
    assert.equal(clipGradNorm(k, [a, b], 1), 5);
    assert.ok(Math.abs(Math.hypot(a.grad![0]!, b.grad![0]!) - 1) < 1e-5);
    b.grad![0] = NaN;
    assert.ok(Number.isNaN(clipGradNorm(k, [a, b], 1)));
    assert.ok(Math.abs(a.grad![0]! - 0.6) < 1e-5, 'nothing scaled when the norm is not finite');
  });
});

describe('AdamW and SFT', () => {
  const items = [
    { prompt: [1, 2, 3], response: [4, 5, 6, 7] },
    { prompt: [9, 8], response: [7, 6, 5] },
    { prompt: [20, 21, 22, 23], response: [30, 31] },
  ];

  /** Takes `steps` optimizer steps of SFT on `items` and returns the losses before each. */
  function train(model: ReturnType<typeof testModel>, opt: AdamW, steps: number): number[] {
    const losses: number[] = [];
    for (let s = 0; s < steps; s++) {
      const tape = new Tape();
      const { loss } = sftLoss({ k, tape }, model, items);
      losses.push(loss.data[0]!);
      opt.zeroGrad();
      tape.backward(loss);
      clipGradNorm(k, model.params.values(), 1);
      opt.step(k);
    }
    return losses;
  }

  test('a tiny model memorises its responses: the masked SFT loss falls by an order of magnitude', () => {
    const model = testModel(CONFIGS.qwen3!, 3);
    const losses = train(model, new AdamW(model.params, { lr: 3e-3 }), 60);
    assert.ok(losses[0]! > 3, `initial loss ${losses[0]}`);
    assert.ok(losses.at(-1)! < losses[0]! / 10, `loss went ${losses[0]} → ${losses.at(-1)}`);
  });

  test('saving and restoring the optimizer state continues bit for bit', () => {
    const a = testModel(CONFIGS.llama!, 4);
    const b = testModel(CONFIGS.llama!, 4);
    const optA = new AdamW(a.params, { lr: 1e-3 });
    train(a, optA, 3);
    const optB = new AdamW(b.params, { lr: 1e-3 });
    train(b, optB, 3);
    const saved = optB.state();
    const copy = {
      step: saved.step,
      m: new Map([...saved.m].map(([n, x]) => [n, x.slice()])),
      v: new Map([...saved.v].map(([n, x]) => [n, x.slice()])),
    };
    const restored = new AdamW(b.params, { lr: 1e-3 });
    restored.load(copy);
    train(a, optA, 2);
    train(b, restored, 2);
    for (const [name, p] of a.params) assert.deepEqual(b.params.get(name)!.data, p.data, name);
  });

  test('weight decay skips biases and norm scales by default', () => {
    const model = testModel(CONFIGS.qwen2!, 6);
    const before = new Map([...model.params].map(([n, p]) => [n, p.data.slice()]));
    for (const p of model.params.values()) p.ensureGrad().fill(0);
    new AdamW(model.params, { lr: 0.1, weightDecay: 0.5 }).step(k);
    for (const [name, p] of model.params) {
      const changed = p.data.some((x, i) => x !== before.get(name)![i]);
      assert.equal(changed, p.shape.length >= 2, name);
    }
  });
});

describe('gradient accumulation', () => {
  test('two micro-batches normalised by the whole batch give the gradients of one big batch', () => {
    const items = [
      { prompt: [1, 2, 3], response: [4, 5, 6, 7] },
      { prompt: [9, 8], response: [7, 6, 5] },
      { prompt: [20, 21, 22, 23], response: [30, 31] },
    ];
    const whole = testModel(CONFIGS.gpt2!, 8);
    const split = testModel(CONFIGS.gpt2!, 8);
    const tape = new Tape();
    tape.backward(sftLoss({ k, tape }, whole, items).loss);
    const total = responseTokens(items);
    for (const part of [items.slice(0, 1), items.slice(1)]) {
      const t = new Tape();
      t.backward(sftLoss({ k, tape: t }, split, part, total).loss);
    }
    for (const [name, p] of whole.params) {
      const g = split.params.get(name)!.grad!;
      let worst = 0;
      let scale = 1e-12;
      p.grad!.forEach((x, i) => {
        worst = Math.max(worst, Math.abs(x - g[i]!));
        scale = Math.max(scale, Math.abs(x));
      });
      assert.ok(worst / scale < 1e-4, `${name}: ${worst / scale}`);
    }
  });
});
