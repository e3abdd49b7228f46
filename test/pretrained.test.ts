// A whole agent folder: model, tokenizer and generation defaults saved together and loaded back.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { generate } from '../src/model/generate.js';
import { loadPretrained, savePretrained } from '../src/model/pretrained.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { CONFIGS, testModel } from './tiny-models.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-pretrained-'));
after(() => rm(root, { recursive: true, force: true }));

const tokenizer = (alphabet: string): CharTokenizer =>
  new CharTokenizer({ alphabet, specialTokens: ['<eos>', '<pad>'], names: { eos: '<eos>', pad: '<pad>' } });

test('savePretrained writes a complete folder that loads back and generates the same text', async () => {
  const dir = join(root, 'agent');
  const model = testModel(CONFIGS.llama!, 2);
  // All 95 printable ASCII characters and two special tokens: exactly the tiny models' 97 ids.
  const tok = tokenizer(Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join(''));
  await savePretrained(dir, { model, tokenizer: tok, generation: null });
  assert.deepEqual((await readdir(dir)).sort(), [
    'config.json',
    'generation_config.json',
    'model.safetensors',
    'tokenizer.json',
    'tokenizer_config.json',
  ]);
  const back = await loadPretrained(dir);
  assert.deepEqual(back.generation?.eosIds, [tok.eosId]);
  const prompt = [back.tokenizer.encode('12+30=')];
  const decode = (ids: number[]): string => back.tokenizer.decode(ids);
  const a = generate(model, engine(), prompt, { temperature: 0, maxNewTokens: 5, decode });
  const b = generate(back.model, engine(), prompt, { temperature: 0, maxNewTokens: 5, decode });
  assert.deepEqual(b, a);
});

test('a tokenizer whose ids do not fit the model is refused, naming both sizes', async () => {
  const model = testModel(CONFIGS.qwen2!, 2);
  const big = tokenizer(Array.from({ length: 120 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join(''));
  await assert.rejects(
    savePretrained(join(root, 'bad'), { model, tokenizer: big, generation: null }),
    /tokenizer produces ids up to 121 but the model's embedding has only 97 rows/,
  );
});
