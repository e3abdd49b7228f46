// Length groups: the partition is the hand-worked optimum, and a mini-batch trained group by group gets the gradient
// of one padded pass over all its sequences.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { lengthGroups, packPromptResponses, type PromptResponse } from '../src/model/pack.js';
import { AdamW } from '../src/optim/adamw.js';
import { Tape } from '../src/tensor/tape.js';
import { runUpdates } from '../src/train/policy-updates.js';
import { mulberry32, randInt, relError } from './helpers.js';
import { CONFIGS, testModel, VOCAB } from './tiny-models.js';

describe('lengthGroups', () => {
  test('cuts the lengths sorted longest first where padded rows + the per-group cost are least', () => {
    // Sorted: #0 (10), #4 (10), #2 (9), #1 (3), #3 (2). With 4 rows per group: {0,4,2} {1,3} costs 4+30 + 4+6 = 44;
    // one group 4+50 = 54; {0,4} {2} {1,3} 4+20 + 4+9 + 4+6 = 47; {0,4,2,1} {3} 4+40 + 4+2 = 50.
    assert.deepEqual(lengthGroups([10, 3, 9, 2, 10], 4), [
      [0, 4, 2],
      [1, 3],
    ]);
    assert.deepEqual(lengthGroups([10, 3, 9, 2, 10], 1000), [[0, 4, 2, 1, 3]]);
    assert.deepEqual(lengthGroups([]), []);
  });
});

describe('runUpdates by length groups', () => {
  test('the gradient equals one padded pass over the whole mini-batch', () => {
    const k = engine();
    const model = testModel(CONFIGS.qwen3!, 3);
    const r = mulberry32(5);
    // Lengths 4..60 so the groups really split (each group costs 64 rows).
    const items: PromptResponse[] = [3, 40, 7, 55, 12, 1, 30, 2].map((n, i) => ({
      prompt: Array.from(randInt(3 + (i % 3), r, 0, VOCAB)),
      response: Array.from(randInt(n, r, 0, VOCAB)),
    }));
    assert.ok(lengthGroups(items.map((s) => s.prompt.length + s.response.length)).length > 1);
    // loss = −Σ log π over response tokens: every token's gradient is −1.
    const lossFn = (_b: readonly number[], lp: readonly Float32Array[]) => ({
      loss: -lp.reduce((a, x) => a + x.reduce((s, v) => s + v, 0), 0),
      grad: lp.map((x) => new Float32Array(x.length).fill(-1)),
      stats: {},
    });
    const batch = items.map((_, i) => i);
    runUpdates(model, new AdamW(model.params, { lr: 0 }), k, (i) => items[i]!, [batch], lossFn, { clip: 1e9, lr: 0 });
    const grouped = new Map([...model.params].map(([n, t]) => [n, Float32Array.from(t.grad!)]));

    for (const t of model.params.values()) t.zeroGrad();
    const packed = packPromptResponses(items);
    const tape = new Tape();
    const { logProb } = model.tokenLogProbs({ k, tape }, packed, packed.targets);
    const seed = new Float32Array(logProb.size);
    for (const row of packed.responseRows) seed.fill(-1, row.start, row.start + row.length);
    tape.backward(logProb, seed);
    for (const [name, t] of model.params) assert.ok(relError(grouped.get(name)!, t.grad!) < 1e-4, name);
  });
});
