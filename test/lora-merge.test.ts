// `hacrl lora merge` as PEFT's merge saves it (issue 58, items 9 and 10): a bf16 base merges into bf16 weights of the
// base's size, in the base's single file or shards, with config.json and generation_config.json as they were; and
// adapter folders find their base when moved with it (recorded relative to the adapter folder) or by --base.
import assert from 'node:assert/strict';
import { cp, mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { CheckpointReader, INDEX_FILE, SINGLE_FILE, writeCheckpoint } from '../src/model/checkpoint.js';
import { ADAPTER_CONFIG, ADAPTER_WEIGHTS, adapterBase, BASE_HINT_KEY } from '../src/model/peft.js';
import { loadPretrained } from '../src/model/pretrained.js';
import { SafetensorsReader } from '../src/model/safetensors.js';
import type { Transformer } from '../src/model/transformer.js';
import { loadModel, tensorsForCheckpoint } from '../src/model/weights.js';
import { loadServedModels } from '../src/cli/serve.js';
import { hacrl } from './cli.js';
import { mulberry32, randInt, relError } from './helpers.js';
import { saveTinyAdapter, saveTinyAgent } from './tiny-agents.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-lora-merge-'));
after(() => rm(root, { recursive: true, force: true }));
const k = engine();

/** Logits of a fixed batch of 2 × 6 ids. */
function logits(model: Transformer): Float32Array {
  const ids = randInt(12, mulberry32(5), 0, 300);
  const batch = { ids, batch: 2, seqLen: 6 };
  return model.logits(k, model.forward({ k, tape: null }, batch).data, 12);
}

const json = async (path: string): Promise<Record<string, unknown>> =>
  JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;

/** The stored dtypes of a checkpoint folder's tensors. */
async function dtypes(dir: string): Promise<Set<string>> {
  const r = await CheckpointReader.open(dir);
  try {
    return new Set(r.names().map((n) => r.info(n).dtype));
  } finally {
    await r.close();
  }
}

/**
 * A Hub-shaped Qwen2 folder in `dir`: BF16 weights (sharded when `shardBytes`), config.json with the keys Qwen2.5
 * ships that hacrl does not read, written in its own layout, and a generation_config.json with repetition_penalty.
 */
async function saveHubShapedBf16(dir: string, shardBytes?: number): Promise<void> {
  await saveTinyAgent(dir, 'qwen2', 9);
  const model = await loadModel(dir);
  await writeCheckpoint(dir, tensorsForCheckpoint(model), { floatDtype: 'BF16', maxShardBytes: shardBytes });
  const config = await json(join(dir, 'config.json'));
  Object.assign(config, { torch_dtype: 'bfloat16', max_window_layers: 21, sliding_window: 131072 });
  Object.assign(config, { use_mrope: false, transformers_version: '4.43.1', bos_token_id: 0 });
  await writeFile(join(dir, 'config.json'), JSON.stringify(config, null, 4));
  const generation = { bos_token_id: 0, do_sample: true, eos_token_id: [2, 0], pad_token_id: 0 };
  Object.assign(generation, { repetition_penalty: 1.1, temperature: 0.7, top_p: 0.8, top_k: 20 });
  await writeFile(join(dir, 'generation_config.json'), JSON.stringify(generation, null, 2));
}

describe('hacrl lora merge keeps the base as it was', () => {
  const base = join(root, 'bf16-base');
  const adapter = join(root, 'bf16-adapter');
  before(async () => {
    await saveHubShapedBf16(base);
    await saveTinyAdapter(adapter, base, 4);
  });

  test('a bf16 base: bf16 weights of its size, its config files, the adapted logits', async () => {
    const out = join(root, 'merged-bf16');
    const r = hacrl(['lora', 'merge', '--adapter', adapter, '--out', out]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /qwen2, \d+ tensors \(BF16\), adapters merged into 14/);
    assert.deepEqual(await dtypes(out), new Set(['BF16']));
    const [size, baseSize] = [(await stat(join(out, SINGLE_FILE))).size, (await stat(join(base, SINGLE_FILE))).size];
    assert.ok(Math.abs(size - baseSize) < 256, `merged ${size} bytes, base ${baseSize}`);
    assert.equal(await readFile(join(out, 'config.json'), 'utf8'), await readFile(join(base, 'config.json'), 'utf8'));
    // The adapter folder has its own generation_config.json (written with the keys hacrl reads): laid over the
    // base's, every key of the base's is kept.
    assert.deepEqual(await json(join(out, 'generation_config.json')), await json(join(base, 'generation_config.json')));
    const want = logits((await loadPretrained(adapter)).model);
    const merged = (await loadPretrained(out)).model;
    assert.equal(merged.adapters, null);
    // The merged weights are rounded to bfloat16, as PEFT's merge into a bf16 base rounds them.
    const err = relError(logits(merged), want);
    assert.ok(err > 0 && err < 1e-2, `relative error ${err}`);
  });

  test('--dtype f32: float32 weights, config.json says so and keeps every other key, logits within 1e-5', async () => {
    const out = join(root, 'merged-f32');
    const r = hacrl(['lora', 'merge', '--adapter', adapter, '--out', out, '--dtype', 'f32']);
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(await dtypes(out), new Set(['F32']));
    assert.deepEqual(await json(join(out, 'config.json')), {
      ...(await json(join(base, 'config.json'))),
      torch_dtype: 'float32',
    });
    const err = relError(logits((await loadPretrained(out)).model), logits((await loadPretrained(adapter)).model));
    assert.ok(err < 1e-5, `relative error ${err}`);
  });

  test('a sharded base merges into the same shards and index', async () => {
    const sharded = join(root, 'sharded-base');
    await saveHubShapedBf16(sharded, 40_000);
    const out = join(root, 'merged-sharded');
    const r = hacrl(['lora', 'merge', '--adapter', adapter, '--base', sharded, '--out', out]);
    assert.equal(r.status, 0, r.stderr);
    const [index, baseIndex] = [await json(join(out, INDEX_FILE)), await json(join(sharded, INDEX_FILE))];
    assert.ok(Object.keys(baseIndex.weight_map as object).length > 0);
    assert.deepEqual(index, baseIndex);
    const err = relError(logits((await loadPretrained(out)).model), logits((await loadPretrained(adapter)).model));
    assert.ok(err < 1e-2, `relative error ${err}`);
  });
});

describe('an adapter folder finds its base when moved', () => {
  const site = join(root, 'site');
  const moved = join(root, 'moved');
  const lone = join(root, 'lone');
  before(async () => {
    await saveTinyAgent(join(site, 'models', 'base'), 'llama', 3);
    await saveTinyAdapter(join(site, 'runs', 'adapter'), join(site, 'models', 'base'), 5);
  });

  test('base_model_name_or_path stays the path PEFT reads; the base is also recorded relative to the adapter', async () => {
    const config = await json(join(site, 'runs', 'adapter', ADAPTER_CONFIG));
    assert.equal(config.base_model_name_or_path, join(site, 'models', 'base'));
    const r = await SafetensorsReader.open(join(site, 'runs', 'adapter', ADAPTER_WEIGHTS));
    const hint = r.metadata[BASE_HINT_KEY];
    await r.close();
    assert.equal(hint, join('..', '..', 'models', 'base'));
  });

  test('moved together with its base: loads through the relative record', async () => {
    const want = logits((await loadPretrained(join(site, 'runs', 'adapter'))).model);
    await rename(site, moved);
    assert.equal(await adapterBase(join(moved, 'runs', 'adapter')), join(moved, 'models', 'base'));
    assert.deepEqual(logits((await loadPretrained(join(moved, 'runs', 'adapter'))).model), want);
  });

  test('base_model_name_or_path edited to another base is followed before the relative record', async () => {
    const edited = join(root, 'edited');
    await cp(join(moved, 'runs', 'adapter'), join(edited, 'adapter'), { recursive: true });
    await cp(join(moved, 'models', 'base'), join(edited, 'other-base'), { recursive: true });
    const config = await json(join(edited, 'adapter', ADAPTER_CONFIG));
    await writeFile(
      join(edited, 'adapter', ADAPTER_CONFIG),
      JSON.stringify({ ...config, base_model_name_or_path: join(edited, 'other-base') }),
    );
    assert.equal(await adapterBase(join(edited, 'adapter')), join(edited, 'other-base'));
  });

  test('moved alone: refused naming --base; serve, eval, lora merge and export gguf load it with --base', async () => {
    await mkdir(lone);
    await cp(join(moved, 'runs', 'adapter'), join(lone, 'adapter'), { recursive: true });
    const adapter = join(lone, 'adapter');
    const base = join(moved, 'models', 'base');
    await assert.rejects(loadPretrained(adapter), /is not a checkpoint folder here.*--base DIR/);
    const want = logits((await loadPretrained(join(moved, 'runs', 'adapter'))).model);
    assert.deepEqual(logits((await loadPretrained(adapter, new Map(), { base })).model), want);
    const served = await loadServedModels(new Map([['a', adapter]]), 'fp32', base);
    assert.deepEqual(logits(served.get('a')!.model), want);
    const gguf = hacrl(['export', 'gguf', '--model', adapter, '--base', base, '--out', join(lone, 'a.gguf')]);
    assert.equal(gguf.status, 0, gguf.stderr);
    const merge = hacrl(['lora', 'merge', '--adapter', adapter, '--base', base, '--out', join(lone, 'merged')]);
    assert.equal(merge.status, 0, merge.stderr);
    const data = ['--data', 'easy:test:2', '--max-new-tokens', '2'];
    const evalNoBase = hacrl(['eval', '--model', adapter, ...data]);
    assert.notEqual(evalNoBase.status, 0);
    assert.match(evalNoBase.stderr, /--base DIR/);
    const evalBase = hacrl(['eval', '--model', adapter, '--base', base, ...data]);
    assert.equal(evalBase.status, 0, evalBase.stderr);
  });
});
