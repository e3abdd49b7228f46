// The bench shapes of public checkpoints: each parses as its family, and the parameters counted from the shape alone
// are the published totals (no weights are allocated here: real shapes run only in the benches). The count itself is
// checked against models built for real, on the tiny configs of every family.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseHfConfig } from '../src/model/hf-config.js';
import { SHAPE_NAMES, configParameterCount, shapeConfig } from '../src/model/shapes.js';
import { initModel } from '../src/model/weights.js';
import { CONFIGS } from './tiny-models.js';

test('the shape table gives the published parameter totals, counted without allocating weights', () => {
  // Model cards: SmolLM2-135M 134,515,008; Qwen2.5-0.5B 494,032,768 (0.49B); Qwen3-0.6B 596,049,920 (0.6B);
  // Llama-3.2-1B 1,235,814,400 (1.23B), all with tied embeddings counted once.
  const totals = Object.fromEntries(SHAPE_NAMES.map((n) => [n, configParameterCount(shapeConfig(n))]));
  assert.deepEqual(totals, {
    'smollm2-135m': 134_515_008,
    'qwen2.5-0.5b': 494_032_768,
    'qwen3-0.6b': 596_049_920,
    'llama-3.2-1b': 1_235_814_400,
  });
  const llama = shapeConfig('llama-3.2-1b');
  assert.deepEqual(
    [llama.family, llama.kvHeads, llama.headDim, llama.position],
    [
      'llama',
      8,
      64,
      {
        kind: 'rope',
        theta: 500000,
        scaling: { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 },
      },
    ],
  );
  assert.deepEqual([shapeConfig('qwen2.5-0.5b').qkvBias, shapeConfig('qwen3-0.6b').qkNorm], [true, true]);
  assert.throws(() => shapeConfig('gpt-5'), /unknown shape "gpt-5": choose one of smollm2-135m, qwen2.5-0.5b/);
});

test('the count from the shape equals the parameters of a model built from it, in every family', () => {
  for (const [name, json] of Object.entries(CONFIGS)) {
    const cfg = parseHfConfig(json);
    for (const tied of [true, false]) {
      const c = { ...cfg, tiedEmbeddings: tied };
      assert.equal(configParameterCount(c), initModel(c, 1).numParameters, `${name}, tied ${tied}`);
    }
  }
});
