// A diverged model never hangs sampling and is never saved: top-p on NaN logits fails at once naming the model,
// `eval --top-p 0.9` on such an agent ends with an error at its first sampled token, a warm start whose loss is not finite exits
// non-zero without writing an agent, and weights that are NaN or infinite are refused at save.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { generate, sampleToken } from '../src/model/generate.js';
import { loadPretrained, savePretrained } from '../src/model/pretrained.js';
import { saveModel } from '../src/model/weights.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { Rng } from '../src/util/rng.js';
import { hacrl, TINY_AGENT_FLAGS } from './cli.js';
import { CONFIGS, testModel, VOCAB } from './tiny-models.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-diverged-'));
after(() => rm(root, { recursive: true, force: true }));

/** Printable ASCII but '~', a newline and two special tokens: exactly the tiny models' 97 ids. */
const tokenizer = new CharTokenizer({
  alphabet: Array.from({ length: 94 }, (_, i) => String.fromCharCode(32 + i)).join('') + '\n',
  specialTokens: ['<eos>', '<pad>'],
  names: { eos: '<eos>', pad: '<pad>' },
});

/** A tiny model whose weights are finite but so large that its activations overflow: logits are NaN. */
function divergedModel() {
  const model = testModel(CONFIGS.qwen3!, 5);
  for (const t of model.params.values()) for (let i = 0; i < t.data.length; i++) t.data[i]! *= 1e30;
  return model;
}

describe('a diverged model', () => {
  test('sampling with top-p fails at once, naming the model and the token', () => {
    assert.equal(tokenizer.vocabSize, VOCAB);
    for (const o of [{ topP: 0.9 }, { topP: 0.95, temperature: 0.7 }, { temperature: 0 }, {}])
      assert.throws(
        () => generate(divergedModel(), engine(), [[5, 6, 7]], { ...o, maxNewTokens: 4, name: 'agent a' }),
        /sampling: agent a produced (NaN|infinite) logits for sequence 0 at new token 1: the model has diverged/,
        JSON.stringify(o),
      );
    const nan = new Float32Array(VOCAB).fill(NaN);
    assert.throws(() => sampleToken(nan, { temperature: 1, topK: 0, topP: 0.9 }, new Rng(1)), /logits are not finite/);
  });

  // Bounded by steps, not by a wall-clock limit (which fails on a loaded machine): the error must come at the first
  // sampled token; the spawn's timeout only catches a hang.
  test('`hacrl eval --top-p 0.9` ends with an error naming the agent at its first sampled token', async () => {
    const dir = join(root, 'diverged');
    await savePretrained(dir, { model: divergedModel(), tokenizer, generation: null });
    const r = spawnSync(
      process.execPath,
      [
        'dist/src/cli/main.js',
        'eval',
        '--model',
        dir,
        '--data',
        'arith:test:8',
        '--k',
        '2',
        '--top-p',
        '0.9',
        '--max-new-tokens',
        '16',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    assert.notEqual(r.status, 0);
    assert.equal(r.signal, null, 'killed by the hang timeout');
    assert.match(
      r.stderr,
      new RegExp(`sampling: ${dir} produced (NaN|infinite) logits for sequence \\d+ at new token 1:`),
    );
  });

  test('a warm start whose loss is not finite exits non-zero and saves no agent', () => {
    const out = join(root, 'sft-nan');
    const r = hacrl([
      'sft',
      '--out',
      out,
      ...TINY_AGENT_FLAGS,
      '--lr',
      '1e38',
      '--steps',
      '20',
      '--eval-every',
      '0',
      '--eval-n',
      '4',
      '--train-n',
      '64',
    ]);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /warm start: step \d+ has a non-finite loss or gradient .*lower the learning rate/);
    assert.ok(!existsSync(join(out, 'model.safetensors')));
  });

  test('weights that are NaN or infinite are refused at save, and the folder keeps its last good agent', async () => {
    const dir = join(root, 'kept');
    await saveModel(dir, testModel(CONFIGS.qwen3!, 6));
    await tokenizer.save(dir);
    const bad = testModel(CONFIGS.qwen3!, 7);
    bad.p('model.norm.weight').data[3] = NaN;
    await assert.rejects(
      savePretrained(dir, { model: bad, tokenizer, generation: null }),
      /saving .*kept: refusing to save non-finite weights .*tensor "model.norm.weight" has 1 of 64 values that are NaN or infinite/,
    );
    const { model } = await loadPretrained(dir);
    assert.deepEqual(model.p('model.norm.weight').data, testModel(CONFIGS.qwen3!, 6).p('model.norm.weight').data);
  });
});
