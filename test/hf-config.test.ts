import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseGenerationConfig, readGenerationConfig, writeGenerationConfig } from '../src/model/generation-config.js';
import {
  parseHfConfig,
  readHfConfig,
  toHfConfig,
  writeHfConfig,
  type TransformerConfig,
} from '../src/model/hf-config.js';
import { ropeInvFreq, ropeTables } from '../src/model/rope.js';
import { hfWeightNames, parameterCount } from '../src/model/weight-names.js';

// Fixtures live in the source tree; tests run from dist/test.
const fixtures = fileURLToPath(new URL('../../test/fixtures/configs/', import.meta.url));
const root = await mkdtemp(join(tmpdir(), 'hacrl-cfg-'));
after(() => rm(root, { recursive: true, force: true }));

async function fixture(name: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(join(fixtures, `${name}.json`), 'utf8')) as Record<string, unknown>;
}
function without(o: Record<string, unknown>, ...keys: string[]): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).filter(([k]) => !keys.includes(k)));
}
/** The sizes, in a fixed order: vocab, hidden, layers, heads, kvHeads, headDim, intermediate. */
function dims(c: TransformerConfig): number[] {
  return [c.vocabSize, c.hidden, c.layers, c.heads, c.kvHeads, c.headDim, c.intermediate];
}
async function load(name: string): Promise<TransformerConfig> {
  return parseHfConfig(await fixture(name), name);
}

test('Qwen3-0.6B loads with its dimensions, q/k norm and explicit head_dim', async () => {
  const c = await load('qwen3-0.6b');
  assert.deepEqual(
    { ...c },
    {
      family: 'qwen3',
      vocabSize: 151936,
      hidden: 1024,
      layers: 28,
      heads: 16,
      kvHeads: 8,
      headDim: 128,
      intermediate: 3072,
      maxPositions: 40960,
      norm: { kind: 'rmsnorm', eps: 1e-6 },
      activation: 'silu',
      gatedMlp: true,
      position: { kind: 'rope', theta: 1_000_000, scaling: { type: 'none' } },
      qkvBias: false,
      outputBias: false,
      mlpBias: false,
      qkNorm: true,
      tiedEmbeddings: true,
      bosId: 151643,
      eosIds: [151645],
      torchDtype: 'bfloat16',
    },
  );
  assert.equal(parameterCount(c), 596_049_920);
});

test('Llama-3.2-1B loads with GQA and llama3 rope scaling', async () => {
  const c = await load('llama-3.2-1b');
  assert.equal(c.family, 'llama');
  assert.deepEqual(dims(c), [128256, 2048, 16, 32, 8, 64, 8192]);
  assert.deepEqual(c.norm, { kind: 'rmsnorm', eps: 1e-5 });
  assert.deepEqual(c.position, {
    kind: 'rope',
    theta: 500000,
    scaling: { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 },
  });
  assert.deepEqual(
    [c.qkvBias, c.outputBias, c.mlpBias, c.qkNorm, c.tiedEmbeddings],
    [false, false, false, false, true],
  );
  assert.deepEqual([c.bosId, c.eosIds, c.maxPositions], [128000, [128001], 131072]);
  assert.equal(parameterCount(c), 1_235_814_400);
});

test('GPT-2 loads with learned positions, LayerNorm, gelu_new and biases', async () => {
  const c = await load('gpt2');
  assert.equal(c.family, 'gpt2');
  assert.deepEqual([...dims(c), c.maxPositions], [50257, 768, 12, 12, 12, 64, 3072, 1024]);
  assert.deepEqual(c.norm, { kind: 'layernorm', eps: 1e-5 });
  assert.deepEqual(c.position, { kind: 'learned' });
  assert.equal(c.activation, 'gelu_new');
  assert.deepEqual([c.gatedMlp, c.qkvBias, c.outputBias, c.mlpBias, c.tiedEmbeddings], [false, true, true, true, true]);
  assert.equal(c.torchDtype, null);
  assert.equal(parameterCount(c), 124_439_808);
});

test('Qwen2.5-0.5B loads with q/k/v biases only', async () => {
  const c = await load('qwen2.5-0.5b');
  assert.equal(c.family, 'qwen2');
  assert.deepEqual(dims(c), [151936, 896, 24, 14, 2, 64, 4864]);
  assert.deepEqual([c.qkvBias, c.outputBias, c.mlpBias, c.qkNorm], [true, false, false, false]);
  assert.equal(parameterCount(c), 494_032_768);
});

test('toHfConfig writes a config that parses back to the same TransformerConfig, with the original fields', async () => {
  for (const name of ['qwen3-0.6b', 'llama-3.2-1b', 'gpt2', 'qwen2.5-0.5b']) {
    const original = await fixture(name);
    const cfg = parseHfConfig(original, name);
    const written = toHfConfig(cfg);
    assert.deepEqual(parseHfConfig(written, `${name} (written)`), cfg, name);
    assert.deepEqual(written['architectures'], original['architectures'], name);
    assert.equal(written['model_type'], original['model_type'], name);
    // Every field we write that the original also has carries the same value (sliding_window is unused while
    // use_sliding_window is false; GPT-2's n_inner null means 4 * n_embd).
    for (const [k, v] of Object.entries(written)) {
      if (k in original && k !== 'n_inner' && k !== 'sliding_window') assert.deepEqual(v, original[k], `${name}.${k}`);
    }
  }
  const dir = join(root, 'cfg');
  await mkdir(dir);
  const llama = await load('llama-3.2-1b');
  await writeHfConfig(dir, llama);
  assert.deepEqual(await readHfConfig(dir), { ...llama });
});

test('unsupported or inconsistent configs fail with clear errors', async () => {
  assert.throws(
    () => parseHfConfig({ architectures: ['MistralForCausalLM'], vocab_size: 10 }, 'm/config.json'),
    /m\/config\.json: unsupported architecture MistralForCausalLM; supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel/,
  );
  const qwen3 = await fixture('qwen3-0.6b');
  assert.throws(
    () => parseHfConfig({ ...qwen3, num_key_value_heads: 5 }, 'q'),
    /num_attention_heads 16 is not a multiple of num_key_value_heads 5/,
  );
  assert.throws(() => parseHfConfig({ ...qwen3, use_sliding_window: true }, 'q'), /sliding-window attention/);
  assert.throws(
    () => parseHfConfig({ ...qwen3, rope_scaling: { rope_type: 'yarn', factor: 4 } }, 'q'),
    /unsupported rope scaling type "yarn"/,
  );
  assert.throws(() => parseHfConfig({ ...qwen3, hidden_size: 'big' }, 'q'), /q is invalid:[\s\S]*hidden_size/);
  assert.throws(() => parseHfConfig({ ...qwen3, hidden_act: 'swish2' }, 'q'), /hidden_act/);
  const llama = await fixture('llama-3.2-1b');
  assert.throws(
    () => parseHfConfig({ ...llama, rope_scaling: { rope_type: 'llama3', factor: 8 } }, 'l'),
    /rope scaling "llama3" needs low_freq_factor/,
  );
  // Without architectures, model_type decides; defaults follow transformers (Qwen3 head_dim 128, Llama from width).
  assert.equal(parseHfConfig(without(qwen3, 'architectures', 'head_dim')).headDim, 128);
  assert.equal(parseHfConfig(without(llama, 'head_dim')).headDim, 64);
  // transformers 5 keeps theta and scaling in rope_parameters.
  const v5 = {
    ...without(llama, 'rope_scaling', 'rope_theta'),
    rope_parameters: { ...(llama['rope_scaling'] as object), rope_theta: 500000 },
  };
  const fromV5 = parseHfConfig(v5);
  assert.deepEqual(fromV5.position, parseHfConfig(llama).position);
  // eos may be a list.
  assert.deepEqual(
    parseHfConfig({ ...llama, eos_token_id: [128001, 128008, 128009] }).eosIds,
    [128001, 128008, 128009],
  );
  assert.deepEqual(toHfConfig(parseHfConfig({ ...llama, eos_token_id: [1, 2] }))['eos_token_id'], [1, 2]);
  // A normalized config the family's code cannot express is refused.
  const q2 = parseHfConfig(await fixture('qwen2.5-0.5b'));
  assert.throws(
    () => toHfConfig({ ...q2, qkvBias: false }),
    /cannot write a qwen2 config\.json: Qwen2ForCausalLM always has qkvBias = true/,
  );
  assert.throws(
    () => toHfConfig({ ...parseHfConfig(llama), outputBias: true }),
    /attention_bias covers q, k, v and o together/,
  );
  assert.throws(() => toHfConfig({ ...parseHfConfig(llama), position: { kind: 'learned' } }), /rotary positions/);
});

test('ropeInvFreq applies Llama 3 scaling band by band', async () => {
  const llama = await load('llama-3.2-1b');
  const inv = ropeInvFreq(llama);
  assert.equal(inv.length, 32);
  // Reference values from transformers' _compute_llama3_parameters formula, evaluated independently in float64.
  const want: [number, number][] = [
    [0, 1],
    [10, 0.016560440080994446], // short wavelength: unchanged
    [15, 0.001290547928209264], // between the bands: interpolated
    [17, 9.70828780262767e-5],
    [18, 1.9461638184831125e-5], // long wavelength: divided by 32
    [31, 9.418306725434909e-8],
  ];
  for (const [i, v] of want) assert.ok(Math.abs(inv[i]! - v) <= 1e-12 * v, `invFreq[${i}] = ${inv[i]}, want ${v}`);
  const plain = ropeInvFreq({ ...llama, position: { kind: 'rope', theta: 500000, scaling: { type: 'none' } } });
  assert.ok(Math.abs(plain[31]! - 3.0138581521391708e-6) < 1e-18);
  const linear = ropeInvFreq({
    ...llama,
    position: { kind: 'rope', theta: 500000, scaling: { type: 'linear', factor: 4 } },
  });
  assert.equal(linear[5], plain[5]! / 4);
  const qwen = ropeInvFreq(await load('qwen3-0.6b'));
  assert.equal(qwen.length, 64);
  assert.ok(Math.abs(qwen[32]! - 1e-3) < 1e-15, 'theta^(-64/128) = 1e6^-0.5');
  const gpt2 = parseHfConfig(await fixture('gpt2'));
  assert.throws(() => ropeInvFreq(gpt2), /learned positions/);
});

test('ropeTables hold cos/sin of pos * invFreq as [maxPos, headDim/2]', async () => {
  const cfg = await load('qwen3-0.6b');
  const { cos, sin } = ropeTables(cfg, 50);
  assert.equal(cos.length, 50 * 64);
  assert.equal(sin.length, 50 * 64);
  for (let i = 0; i < 64; i++) {
    assert.equal(cos[i], 1);
    assert.equal(sin[i], 0);
  }
  const inv = ropeInvFreq(cfg);
  for (const [p, i] of [
    [1, 0],
    [7, 3],
    [49, 20],
    [49, 63],
  ] as const) {
    assert.ok(Math.abs(cos[p * 64 + i]! - Math.cos(p * inv[i]!)) < 1e-6, `cos[${p},${i}]`);
    assert.ok(Math.abs(sin[p * 64 + i]! - Math.sin(p * inv[i]!)) < 1e-6, `sin[${p},${i}]`);
  }
  assert.equal(cos[64 + 0], Math.fround(Math.cos(1)));
});

test('weight names follow each family, with GPT-2 Conv1D weights transposed', async () => {
  const qwen3 = hfWeightNames(await load('qwen3-0.6b'));
  const byName = new Map(qwen3.map((w) => [w.name, w]));
  assert.equal(qwen3[0]!.name, 'model.embed_tokens.weight');
  assert.deepEqual(byName.get('model.layers.0.self_attn.q_proj.weight')!.shape, [2048, 1024]);
  assert.deepEqual(byName.get('model.layers.0.self_attn.k_proj.weight')!.shape, [1024, 1024]);
  assert.deepEqual(byName.get('model.layers.0.self_attn.o_proj.weight')!.shape, [1024, 2048]);
  assert.deepEqual(byName.get('model.layers.27.self_attn.k_norm.weight')!.shape, [128]);
  assert.deepEqual(byName.get('model.layers.3.mlp.down_proj.weight')!.shape, [1024, 3072]);
  assert.equal(byName.get('model.layers.3.mlp.down_proj.weight')!.layer, 3);
  assert.ok(!byName.has('lm_head.weight'), 'tied: no lm_head');
  assert.ok(!byName.has('model.layers.0.self_attn.q_proj.bias'));
  assert.equal(qwen3.length, 1 + 28 * 11 + 1);

  const untied = hfWeightNames({ ...(await load('qwen3-0.6b')), tiedEmbeddings: false });
  assert.deepEqual(untied.at(-1), {
    name: 'lm_head.weight',
    shape: [151936, 1024],
    transposed: false,
    layer: null,
    aliases: [],
  });

  const qwen2 = new Set(hfWeightNames(await load('qwen2.5-0.5b')).map((w) => w.name));
  assert.ok(qwen2.has('model.layers.0.self_attn.v_proj.bias'));
  assert.ok(!qwen2.has('model.layers.0.self_attn.o_proj.bias'));
  assert.ok(!qwen2.has('model.layers.0.self_attn.q_norm.weight'));

  const gpt2 = new Map(hfWeightNames(await load('gpt2')).map((w) => [w.name, w]));
  assert.deepEqual(gpt2.get('transformer.h.0.attn.c_attn.weight'), {
    name: 'transformer.h.0.attn.c_attn.weight',
    shape: [768, 2304],
    transposed: true,
    layer: 0,
    aliases: ['h.0.attn.c_attn.weight'],
  });
  assert.deepEqual(gpt2.get('transformer.h.11.mlp.c_proj.weight')!.shape, [3072, 768]);
  assert.equal(gpt2.get('transformer.h.11.ln_2.bias')!.transposed, false);
  assert.deepEqual(gpt2.get('transformer.wpe.weight')!.shape, [1024, 768]);
  assert.ok(gpt2.has('transformer.ln_f.bias') && !gpt2.has('lm_head.weight'));
});

test('generation_config.json reads and writes eos as a number or a list', async () => {
  const dir = join(root, 'gen');
  await mkdir(dir);
  assert.equal(await readGenerationConfig(dir), null);
  await writeFile(
    join(dir, 'generation_config.json'),
    JSON.stringify({
      bos_token_id: 128000,
      do_sample: true,
      eos_token_id: [128001, 128008, 128009],
      temperature: 0.6,
      top_p: 0.9,
      transformers_version: '4.45.0',
    }),
  );
  const g = await readGenerationConfig(dir);
  assert.deepEqual(g, { bosId: 128000, eosIds: [128001, 128008, 128009], doSample: true, temperature: 0.6, topP: 0.9 });
  await writeGenerationConfig(dir, { ...g!, topK: 20, maxNewTokens: 256, eosIds: [7] });
  const written = JSON.parse(await readFile(join(dir, 'generation_config.json'), 'utf8')) as Record<string, unknown>;
  assert.equal(written['eos_token_id'], 7);
  assert.equal(written['top_k'], 20);
  assert.equal(written['max_new_tokens'], 256);
  assert.deepEqual(parseGenerationConfig(written), {
    bosId: 128000,
    eosIds: [7],
    doSample: true,
    temperature: 0.6,
    topP: 0.9,
    topK: 20,
    maxNewTokens: 256,
  });
  assert.deepEqual(parseGenerationConfig({ eos_token_id: null, temperature: null }), { eosIds: [] });
  assert.throws(() => parseGenerationConfig({ top_p: 1.5 }, 'g.json'), /g\.json is invalid:[\s\S]*top_p/);
});
