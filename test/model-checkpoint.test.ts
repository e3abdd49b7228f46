/**
 * Checkpoint round trips of the four families: saveModel → loadModel restores every parameter bit for bit (single
 * file and sharded), and broken checkpoints (missing tensor, wrong shape, unknown architecture) fail naming the cause.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { INDEX_FILE, SINGLE_FILE, writeCheckpoint } from '../src/model/checkpoint.js';
import { ARCHITECTURES, parseHfConfig } from '../src/model/hf-config.js';
import type { Transformer } from '../src/model/transformer.js';
import { initModel, loadModel, saveModel, tensorsForCheckpoint } from '../src/model/weights.js';
import { mulberry32 } from './helpers.js';

const SMALL_LLAMA_LIKE = {
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  vocab_size: 50,
  // The published ids (128000, 151643, ...) do not fit a 50-token vocabulary, which a load refuses.
  bos_token_id: 1,
  eos_token_id: 2,
};

/** Per family, a published config (test/fixtures/configs) and the fields that shrink it to a few thousand parameters. */
const FAMILIES: Record<string, { file: string; shrink: Record<string, unknown> }> = {
  llama: { file: 'llama-3.2-1b.json', shrink: { ...SMALL_LLAMA_LIKE, head_dim: 8 } },
  // Untied, so lm_head.weight is saved and reloaded too.
  qwen2: { file: 'qwen2.5-0.5b.json', shrink: { ...SMALL_LLAMA_LIKE, tie_word_embeddings: false } },
  qwen3: { file: 'qwen3-0.6b.json', shrink: { ...SMALL_LLAMA_LIKE, head_dim: 16 } },
  gpt2: {
    file: 'gpt2.json',
    shrink: {
      n_embd: 32,
      n_head: 4,
      n_layer: 2,
      n_positions: 16,
      n_ctx: 16,
      vocab_size: 50,
      bos_token_id: 1,
      eos_token_id: 2,
    },
  },
};

/** The shrunk config.json object of a family. */
async function configJson(family: string): Promise<Record<string, unknown>> {
  const { file, shrink } = FAMILIES[family]!;
  const path = fileURLToPath(new URL(`../../test/fixtures/configs/${file}`, import.meta.url));
  return { ...(JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>), ...shrink };
}

/**
 * A model of the family with arbitrary float32 values in every parameter, including the awkward ones a lossy
 * conversion would change: −0, subnormals, the largest finite floats and values that need all 24 mantissa bits.
 */
async function randomModel(family: string, seed: number): Promise<Transformer> {
  const model = initModel(parseHfConfig(await configJson(family)), seed);
  const rng = mulberry32(seed);
  const special = [-0, 1e-45, -1.2e-40, 3.4028234663852886e38, -3.4028234663852886e38, 1 + 2 ** -23];
  for (const t of model.params.values())
    for (let i = 0; i < t.size; i++)
      t.data[i] = rng() < 0.05 ? special[i % special.length]! : (rng() - 0.5) * 2 ** (20 * rng() - 10);
  return model;
}

/** Asserts that both models hold the same parameter names with identical bytes. */
function assertBitIdentical(got: Transformer, want: Transformer): void {
  assert.deepEqual([...got.params.keys()].sort(), [...want.params.keys()].sort(), 'the same parameters');
  for (const [name, w] of want.params) {
    const g = got.p(name);
    assert.deepEqual(g.shape, w.shape, `${name}: shape`);
    const bytes = (a: Float32Array): Buffer => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
    assert.ok(bytes(g.data).equals(bytes(w.data)), `${name}: the reloaded bytes differ`);
  }
}

/** Loading `dir` fails with an error whose message matches every pattern. */
async function assertLoadFails(dir: string, ...patterns: RegExp[]): Promise<void> {
  await assert.rejects(loadModel(dir), (e: Error) => {
    for (const p of patterns) assert.match(e.message, p);
    return true;
  });
}

/** A pattern matching `s` literally. */
function literal(s: string): RegExp {
  return new RegExp(s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
}

/** The checkpoint's tensors as saveModel writes them, by name. */
type Tensors = ReturnType<typeof tensorsForCheckpoint>;

const root = await mkdtemp(join(tmpdir(), 'hacrl-ckpt-'));
after(() => rm(root, { recursive: true, force: true }));

/** Saves a random model of `family` into `root/name`, then rewrites its weights as `edit` returns them. */
async function saveEdited(
  name: string,
  family: string,
  seed: number,
  edit: (t: Tensors) => Tensors,
): Promise<{ dir: string; model: Transformer }> {
  const dir = join(root, name);
  const model = await randomModel(family, seed);
  await saveModel(dir, model);
  await writeCheckpoint(dir, edit(tensorsForCheckpoint(model)));
  return { dir, model };
}

describe('model checkpoints', () => {
  for (const [i, family] of Object.keys(FAMILIES).entries()) {
    test(`${family}: save then load is bit-identical`, async () => {
      const model = await randomModel(family, 1 + i);
      const dir = join(root, `${family}-single`);
      await saveModel(dir, model);
      assert.deepEqual((await readdir(dir)).sort(), ['config.json', SINGLE_FILE]);
      const loaded = await loadModel(dir);
      assert.deepEqual(loaded.cfg, model.cfg, 'config.json round-trips the config');
      assertBitIdentical(loaded, model);
    });

    test(`${family}: sharded save then load is bit-identical`, async () => {
      const model = await randomModel(family, 11 + i);
      const dir = join(root, `${family}-sharded`);
      // Start from a single-file save: the sharded save must remove it, or loaders would prefer the stale file.
      await saveModel(dir, model);
      await saveModel(dir, model, { maxShardBytes: 16 * 1024 });
      const files = await readdir(dir);
      const shards = files.filter((f) => /^model-\d{5}-of-\d{5}\.safetensors$/.test(f));
      assert.ok(shards.length >= 3, `several shards written (${files.join(', ')})`);
      assert.ok(
        files.includes(INDEX_FILE) && !files.includes(SINGLE_FILE),
        `index and no single file (${files.join(', ')})`,
      );
      assertBitIdentical(await loadModel(dir), model);
    });
  }

  test('gpt2: a checkpoint without the "transformer." prefix (openai-community/gpt2) loads identically', async () => {
    const { dir, model } = await saveEdited('gpt2-bare-names', 'gpt2', 21, (ts) =>
      ts.map(([name, t]) => [name.replace(/^transformer\./, ''), t]),
    );
    assertBitIdentical(await loadModel(dir), model);
  });

  test('a missing tensor is named in the error', async () => {
    const gone = 'model.layers.1.self_attn.k_norm.weight';
    const { dir } = await saveEdited('missing', 'qwen3', 31, (ts) => ts.filter(([name]) => name !== gone));
    await assertLoadFails(dir, literal(`missing tensor "${gone}"`));
  });

  test('a tensor of the wrong shape is named in the error, with both shapes', async () => {
    const bad = 'model.layers.0.self_attn.v_proj.weight';
    // v_proj is [kvHeads·headDim, hidden] = [16, 32]; store one row too many.
    const { dir } = await saveEdited('wrong-shape', 'llama', 41, (ts) =>
      ts.map(([name, t]) => [name, name === bad ? { shape: [17, 32], data: new Float32Array(17 * 32) } : t]),
    );
    await assertLoadFails(dir, literal(`"${bad}"`), literal('[17, 32]'), literal('[16, 32]'));
  });

  test('an unsupported architecture is rejected, listing the supported ones', async () => {
    const dir = join(root, 'mistral');
    await saveModel(dir, await randomModel('llama', 51));
    const json = { ...(await configJson('llama')), architectures: ['MistralForCausalLM'], model_type: 'mistral' };
    await writeFile(join(dir, 'config.json'), JSON.stringify(json));
    await assertLoadFails(dir, /MistralForCausalLM/, ...Object.values(ARCHITECTURES).map(literal));
  });
});
