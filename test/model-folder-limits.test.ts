// Untrusted model folders: sizes bounded and checked against the weight files before anything is allocated, special
// ids inside the vocabulary, non-finite weights refused, chat templates bounded; plus a seeded fuzz loop over the
// safetensors and config.json readers.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { writeCheckpoint } from '../src/model/checkpoint.js';
import { parseHfConfig, writeHfConfig } from '../src/model/hf-config.js';
import { loadPretrained, savePretrained } from '../src/model/pretrained.js';
import { parseSafetensors, serializeSafetensors } from '../src/model/safetensors.js';
import { loadModel, saveModel, tensorsForCheckpoint } from '../src/model/weights.js';
import { ChatTemplate, MAX_TEMPLATE_MS } from '../src/tokenizer/chat-template.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { Rng } from '../src/util/rng.js';
import { CONFIGS, testModel } from './tiny-models.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-folder-limits-'));
after(() => rm(root, { recursive: true, force: true }));

/** A saved tiny llama folder; `edit` rewrites its config.json. */
async function folder(name: string, edit: (c: Record<string, unknown>) => void = () => {}): Promise<string> {
  const dir = join(root, name);
  await saveModel(dir, testModel(CONFIGS.llama!, 1));
  const cfg = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  edit(cfg);
  await writeFile(join(dir, 'config.json'), JSON.stringify(cfg));
  return dir;
}

describe('config.json sizes', () => {
  test('absurd sizes are refused by name before anything is built', () => {
    const start = performance.now();
    assert.throws(
      () => parseHfConfig({ ...CONFIGS.llama, num_hidden_layers: 100_000_000 }, 'cfg'),
      /cfg: num_hidden_layers is 100000000, above the limit of 1024/,
    );
    assert.throws(
      () => parseHfConfig({ ...CONFIGS.gpt2, n_layer: 100_000_000 }, 'cfg'),
      /cfg: n_layer is 100000000, above the limit/,
    );
    assert.throws(() => parseHfConfig({ ...CONFIGS.llama, vocab_size: 1e9 }, 'cfg'), /vocab_size is 1000000000/);
    assert.throws(
      () => parseHfConfig({ ...CONFIGS.llama, eos_token_id: 5000 }, 'cfg'),
      /eos_token_id 5000 is outside the vocabulary \(vocab_size 97\)/,
    );
    assert.ok(performance.now() - start < 1000);
  });

  test('a config that claims more than the weight files hold is refused before reading them', async () => {
    const more = await folder('more-layers', (c) => (c.num_hidden_layers = 40));
    await assert.rejects(loadModel(more), /missing tensor "model\.layers\.\d+\.input_layernorm\.weight"/);
    const wider = await folder('wider', (c) => (c.intermediate_size = 200_000));
    await assert.rejects(
      loadModel(wider),
      /tensor "model\.layers\.0\.mlp\.gate_proj\.weight" has shape \[128, 64\] in the weight files, config\.json needs \[200000, 64\]/,
    );
    assert.ok(await loadModel(await folder('as-saved')), 'the unedited folder loads');
  });

  test('NaN or infinite weights are refused at load, naming the tensor', async () => {
    const model = testModel(CONFIGS.llama!, 1);
    model.p('model.norm.weight').data[3] = Number.NaN;
    model.p('model.norm.weight').data[4] = Number.POSITIVE_INFINITY;
    const dir = join(root, 'nan');
    // Written below saveModel, which refuses such weights: a folder from elsewhere may hold them.
    await writeCheckpoint(dir, tensorsForCheckpoint(model));
    await writeHfConfig(dir, model.cfg);
    await assert.rejects(loadModel(dir), /tensor "model\.norm\.weight" has 2 of 64 values that are NaN or infinite/);
  });

  test('special ids outside the vocabulary are refused (tokenizer and generation_config.json)', async () => {
    const dir = join(root, 'gen-eos');
    const alphabet = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');
    const tokenizer = new CharTokenizer({ alphabet, specialTokens: ['<eos>', '<pad>'], names: { eos: '<eos>' } });
    await savePretrained(dir, { model: testModel(CONFIGS.llama!, 1), tokenizer, generation: null });
    await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [96, 4000] }));
    await assert.rejects(
      loadPretrained(dir),
      /generation_config\.json eos_token_id 4000 is outside the model's vocabulary/,
    );
  });
});

describe('chat templates from a folder run under limits', () => {
  const render = (src: string): string =>
    new ChatTemplate(src, {}, 'folder').render([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true });

  test('nested long loops stop at the limit; a huge range is refused at once; a real template renders', () => {
    let start = performance.now();
    assert.throws(
      () => render('{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}'),
      /chat template of folder failed: it ran past/,
    );
    assert.ok(performance.now() - start < MAX_TEMPLATE_MS + 1000);
    start = performance.now();
    assert.throws(() => render('{% for i in range(1000000000) %}x{% endfor %}'), /range\(\) of 1000000000 items/);
    assert.ok(performance.now() - start < 500);
    assert.throws(() => render('{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}'), /chat template of folder/);
    assert.equal(
      render(
        '{% for m in messages %}{{ m.role }}: {{ m.content }}{% endfor %}{% for i in range(3) %}{{ i }}{% endfor %}',
      ),
      'user: hi012',
    );
  });
});

describe('fuzz (seeded, bounded): the readers refuse bad bytes with an error, never a crash or a hang', () => {
  test('safetensors files: random bytes and corrupted valid files', () => {
    const rng = new Rng(21);
    const valid = new Uint8Array(
      Buffer.concat(
        serializeSafetensors([
          ['a', { shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) }],
          ['b', { shape: [4], data: new Float32Array([7, 8, 9, 10]) }],
        ]),
      ),
    );
    const tally = { tried: 0, error: 0, parsed: 0 };
    for (let i = 0; i < 500; i++) {
      let bytes: Uint8Array;
      if (i % 2 === 0) {
        bytes = Uint8Array.from({ length: rng.int(200) }, () => rng.int(256));
        if (i % 4 === 0 && bytes.length >= 8)
          new DataView(bytes.buffer).setBigUint64(0, BigInt(rng.int(bytes.length)), true);
      } else {
        bytes = valid.slice(0, rng.next() < 0.2 ? rng.int(valid.length) : valid.length);
        for (let k = 0; k < 1 + rng.int(4); k++) if (bytes.length) bytes[rng.int(bytes.length)] = rng.int(256);
      }
      tally.tried++;
      const start = performance.now();
      try {
        parseSafetensors(bytes, 'fuzz');
        tally.parsed++;
      } catch (e) {
        assert.ok(e instanceof Error && e.message.length > 0, `input ${i}: ${String(e)}`);
        tally.error++;
      }
      assert.ok(performance.now() - start < 200, `input ${i} was slow`);
    }
    console.log(`safetensors fuzz: ${JSON.stringify(tally)}`);
  });

  test('config.json objects with random field values', () => {
    const rng = new Rng(22);
    const values = [0, -1, 1.5, 1e9, 2 ** 53, Number.MAX_SAFE_INTEGER, 'x', null, true, [], {}, [1, 1e9], 96, 97];
    const tally = { tried: 0, error: 0, parsed: 0 };
    for (let i = 0; i < 500; i++) {
      const base = { ...(i % 2 === 0 ? CONFIGS.llama : CONFIGS.gpt2) } as Record<string, unknown>;
      const keys = Object.keys(base);
      for (let k = 0; k < 1 + rng.int(3); k++) base[keys[rng.int(keys.length)]!] = values[rng.int(values.length)];
      tally.tried++;
      try {
        const cfg = parseHfConfig(base, 'fuzz');
        assert.ok(cfg.layers <= 1024 && cfg.vocabSize <= 4_194_304 && cfg.eosIds.every((e) => e < cfg.vocabSize));
        tally.parsed++;
      } catch (e) {
        assert.ok(e instanceof Error && /fuzz/.test(e.message), `input ${i}: ${String(e)}`);
        tally.error++;
      }
    }
    console.log(`config.json fuzz: ${JSON.stringify(tally)}`);
  });
});
