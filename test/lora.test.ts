// LoRA agents at the model layer: gradients of A and B against finite differences and against a LoRA written in
// PyTorch on the same weights, the PEFT folder (names, shapes, config keys) both ways with its refusals, merging
// (a plain checkpoint with the adapted model's logits, also through `hacrl lora merge`), the inference copies, and
// seeded dropout with its 1/(1 − p) scale.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { LoraAdapters, type LoraSettings } from '../src/model/lora.js';
import {
  adapt,
  ADAPTER_CONFIG,
  ADAPTER_WEIGHTS,
  mergeAdapters,
  readAdapterFiles,
  withoutAdapters,
  writeAdapterFiles,
} from '../src/model/peft.js';
import { mergeAdapterFolder } from '../src/model/merge.js';
import { loadPretrained, savePretrained } from '../src/model/pretrained.js';
import { SafetensorsReader, writeSafetensors } from '../src/model/safetensors.js';
import type { Transformer } from '../src/model/transformer.js';
import { saveModel } from '../src/model/weights.js';
import { Tape } from '../src/tensor/tape.js';
import { Tensor } from '../src/tensor/tensor.js';
import { Rng } from '../src/util/rng.js';
import { parseRunConfig } from '../src/config/load-config.js';
import { hacrl } from './cli.js';
import { mulberry32, near, randInt, relError, uniform } from './helpers.js';
import { saveTinyAgent } from './tiny-agents.js';
import { requireTorch, runTorchReference } from './torch-reference.js';
import { CONFIGS, testModel, VOCAB } from './tiny-models.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-lora-'));
after(() => rm(root, { recursive: true, force: true }));
const k = engine();

const BATCH = 2;
const SEQ = 6;
const SETTINGS: LoraSettings = { rank: 4, alpha: 8, dropout: 0, targets: 'all-linear' };

/** The tiny model of `family` with adapters whose B is random too (fresh B = 0 would leave A's gradient zero). */
function adapted(family: string, seed: number, settings: LoraSettings = SETTINGS): Transformer {
  const base = testModel(CONFIGS[family]!, seed);
  const adapters = LoraAdapters.init(base.cfg, settings, join(root, family, 'model'), seed);
  const rng = mulberry32(seed + 5);
  for (const [name, t] of adapters.params) if (name.includes('lora_B')) t.data.set(uniform(t.size, rng, -0.2, 0.2));
  return adapt(base, adapters);
}

/** Random ids, next-token targets and signed weights of a BATCH × SEQ batch. */
function inputs(seed: number) {
  const rng = mulberry32(seed);
  const ids = randInt(BATCH * SEQ, rng, 1, VOCAB);
  const targets = randInt(BATCH * SEQ, rng, 0, VOCAB);
  const weights = uniform(BATCH * SEQ, rng, -1, 1);
  return { ids, targets, weights, batch: { ids, batch: BATCH, seqLen: SEQ } };
}

/** Σ weights · log π(target), in float64 over the float32 log-probs (no tape). */
function loss(model: Transformer, x: ReturnType<typeof inputs>): number {
  const { logProb } = model.tokenLogProbs({ k, tape: null }, x.batch, x.targets);
  let s = 0;
  for (let i = 0; i < logProb.size; i++) s += x.weights[i]! * logProb.data[i]!;
  return s;
}

/** The adapters' gradients of `loss`, by parameter name. */
function gradients(model: Transformer, x: ReturnType<typeof inputs>): Map<string, Float32Array> {
  const tape = new Tape();
  const { logProb } = model.tokenLogProbs({ k, tape }, x.batch, x.targets);
  tape.backward(logProb, x.weights);
  return new Map([...model.trainable].map(([n, t]) => [n, t.grad!.slice()]));
}

/** Logits [B·T, V] of a forward pass with no tape (the adapters applied as two small products). */
function logits(model: Transformer, x: ReturnType<typeof inputs>): Float32Array {
  return model.logits(k, model.forward({ k, tape: null }, x.batch).data, BATCH * SEQ);
}

describe('LoRA adapters', () => {
  for (const family of ['qwen3', 'gpt2']) {
    test(`${family}: gradients of A and B match finite differences, and the base gets none`, () => {
      const model = adapted(family, 3);
      const x = inputs(11);
      const grads = gradients(model, x);
      for (const t of model.params.values()) assert.equal(t.grad, null, 'the frozen base has no gradient');
      const rng = mulberry32(4);
      const h = 1e-2;
      let checked = 0;
      for (const [name, t] of model.trainable) {
        if (!/layers\.1\.|h\.1\./.test(name)) continue; // the second block's adapters: every kind, few evaluations
        for (let n = 0; n < 2; n++) {
          const i = Math.floor(rng() * t.size);
          const keep = t.data[i]!;
          t.data[i] = keep + h;
          const up = loss(model, x);
          t.data[i] = keep - h;
          const down = loss(model, x);
          t.data[i] = keep;
          const fd = (up - down) / (2 * h);
          const g = grads.get(name)![i]!;
          assert.ok(Math.abs(g - fd) <= 2e-2 * Math.max(1e-2, Math.abs(fd)) + 2e-3, `${name}[${i}]: ${g} vs fd ${fd}`);
          checked++;
        }
      }
      assert.ok(checked >= 6, `checked ${checked} entries`);
    });
  }

  test('with dropout, gradients match finite differences of the same masks (the input path too)', () => {
    const model = adapted('qwen3', 7, { ...SETTINGS, dropout: 0.3 });
    const adapters = model.adapters!;
    const start = adapters.rng.state();
    const x = inputs(13);
    /** The training pass's loss: on a tape, so dropout applies, with the masks drawn from the same RNG state. */
    const masked = (): number => {
      adapters.rng = Rng.fromState(start);
      const tape = new Tape();
      const { logProb } = model.tokenLogProbs({ k, tape }, x.batch, x.targets);
      tape.clear();
      let s = 0;
      for (let i = 0; i < logProb.size; i++) s += x.weights[i]! * logProb.data[i]!;
      return s;
    };
    adapters.rng = Rng.fromState(start);
    const grads = gradients(model, x);
    const rng = mulberry32(8);
    const h = 1e-2;
    let checked = 0;
    for (const [name, t] of model.trainable) {
      if (!/layers\.0\./.test(name)) continue; // the first block: its A reaches the loss through every later mask
      const i = Math.floor(rng() * t.size);
      const keep = t.data[i]!;
      t.data[i] = keep + h;
      const up = masked();
      t.data[i] = keep - h;
      const down = masked();
      t.data[i] = keep;
      const fd = (up - down) / (2 * h);
      const g = grads.get(name)![i]!;
      assert.ok(Math.abs(g - fd) <= 2e-2 * Math.max(1e-2, Math.abs(fd)) + 2e-3, `${name}[${i}]: ${g} vs fd ${fd}`);
      checked++;
    }
    assert.ok(checked >= 10, `checked ${checked} entries`);
    assert.notEqual(masked(), loss(model, x), 'dropout changed the training pass');
  });

  test('dropout scales kept inputs by 1/(1 − p): exactly in the gradients, unbiased in the output over many masks', () => {
    const p = 0.25;
    const cfg = testModel(CONFIGS.qwen3!, 70).cfg;
    const rng = mulberry32(71);
    /** Adapters with dropout `dropout`, the same A, B and input for every `dropout`. */
    const make = (dropout: number) => {
      const adapters = LoraAdapters.init(cfg, { ...SETTINGS, dropout }, 'b', 72);
      const { module, inF, outF } = adapters.modules[0]!;
      const b = adapters.params.get(`${module}.lora_B.weight`)!;
      b.data.set(uniform(b.size, mulberry32(73), -0.5, 0.5));
      return { adapters, module, inF, outF, a: adapters.params.get(`${module}.lora_A.weight`)! };
    };
    const x = uniform(make(0).inF, rng, 0.5, 1.5);
    /** One training pass of one row through the adapter alone (y = 0), and its backward from Σ output. */
    const pass = (m: ReturnType<typeof make>) => {
      m.a.grad?.fill(0);
      const input = new Tensor(x.slice(), [1, m.inF], true);
      const tape = new Tape();
      const out = m.adapters.apply({ k, tape }, input, m.module, new Tensor(new Float32Array(m.outF), [1, m.outF]));
      const y = out.data.slice();
      tape.backward(out);
      return { y, aGrad: m.a.grad!.slice(), xGrad: input.grad!.slice() };
    };
    const plain = pass(make(0));
    const dropped = make(p);
    const once = pass(dropped);
    // A's gradient is dDownᵀ·input and x's is the masked dIn: per input element, the same factor — 0 or 1/(1 − p).
    const factors = Array.from(x, (_, i) => once.xGrad[i]! / plain.xGrad[i]!);
    const kept = factors.filter((f) => f !== 0);
    assert.ok(kept.length > 0 && kept.length < x.length, `${kept.length} of ${x.length} inputs kept`);
    for (const f of kept) near(f, 1 / (1 - p), 1e-5, 'a kept input of the x gradient');
    for (let j = 0; j < SETTINGS.rank; j++)
      for (let i = 0; i < x.length; i++) {
        const at = j * x.length + i;
        near(
          once.aGrad[at]!,
          factors[i]! * plain.aGrad[at]!,
          1e-5 * Math.abs(plain.aGrad[at]!) + 1e-9,
          `A[${j}, ${i}]`,
        );
      }
    // Averaged over masks, the output is the output without dropout (the unscaled one would be 1 − p = 0.75 of it).
    const passes = 2000;
    const sum = new Float64Array(plain.y.length);
    for (let n = 0; n < passes; n++) pass(dropped).y.forEach((v, o) => (sum[o] += v / passes));
    let dot = 0;
    let norm = 0;
    plain.y.forEach((v, o) => ((dot += v * sum[o]!), (norm += v * v)));
    assert.ok(norm > 1e-4, 'the adapter writes something');
    // Seeded masks: 0.992 measured; the unscaled output gives 0.744.
    near(dot / norm, 1, 0.05, 'mean output over masks against the output without dropout');
  });

  test('lora.dropout with activation checkpointing is refused (the masks would be drawn only when recomputing)', () => {
    assert.throws(
      () =>
        parseRunConfig({
          agents: [{ name: 'a', checkpoint: 'x', lora: { rank: 2, dropout: 0.1 } }],
          data: { train: 'easy:train:8' },
          optim: { activationCheckpointing: true },
        }),
      /lora\.dropout 0\.1 and optim\.activationCheckpointing is on: set lora\.dropout to 0/,
    );
  });

  for (const [i, family] of Object.keys(CONFIGS).entries()) {
    test(`${family}: logits and A/B gradients match a LoRA written in PyTorch on the same weights`, async () => {
      requireTorch();
      const dir = join(root, `torch-${family}`);
      const model = adapted(family, 20 + i);
      await saveModel(join(dir, 'model'), withoutAdapters(model));
      await writeAdapterFiles(join(dir, 'adapter'), model.adapters!);
      const x = inputs(30 + i);
      const nested = (a: ArrayLike<number>): number[][] =>
        Array.from({ length: BATCH }, (_, b) => Array.from({ length: SEQ }, (_, t) => a[b * SEQ + t]!));
      const want = await runTorchReference(
        join(dir, 'model'),
        { ids: nested(x.ids), targets: nested(x.targets), weights: nested(x.weights) },
        join(dir, 'input.json'),
        join(dir, 'torch.safetensors'),
        join(dir, 'adapter'),
      );
      const logitErr = relError(logits(model, x), want.get('logits')!.data as Float32Array);
      assert.ok(logitErr < 1e-4, `logits: relative error ${logitErr}`);
      const grads = gradients(model, x);
      assert.equal(grads.size, [...want.keys()].filter((n) => n.includes('.lora_')).length, 'the same adapters');
      for (const [name, g] of grads) {
        const w = want.get(`base_model.model.${name}`);
        assert.ok(w, `PyTorch has ${name}`);
        const err = relError(g, w.data as Float32Array, 1e-4);
        assert.ok(err < 1e-3, `${name}: relative error ${err}`);
      }
    });
  }

  test('the inference copies hold the merged weights: sampling logits equal the adapted forward pass', () => {
    for (const family of ['qwen3', 'gpt2']) {
      const model = adapted(family, 41);
      const x = inputs(42);
      const plain = logits(model, x);
      const merged = model.withInferenceWeights(() => logits(model, x));
      const err = relError(merged, plain);
      assert.ok(err < 1e-5, `${family}: relative error ${err}`);
      // The adapters matter: the base alone gives other logits.
      assert.ok(relError(logits(withoutAdapters(model), x), plain) > 1e-3, `${family}: adapters change logits`);
    }
  });

  test('dropout masks come from the adapters RNG: the same state gives the same training pass', () => {
    const settings = { ...SETTINGS, dropout: 0.5 };
    const a = adapted('qwen3', 50, settings);
    const b = adapted('qwen3', 50, settings);
    const x = inputs(51);
    const pass = (m: Transformer): Float32Array =>
      m.tokenLogProbs({ k, tape: new Tape() }, x.batch, x.targets).logProb.data.slice();
    const state = a.adapters!.rng.state();
    assert.deepEqual(b.adapters!.rng.state(), state);
    const first = pass(a);
    assert.notDeepEqual(a.adapters!.rng.state(), state, 'the masks drew from the RNG');
    assert.deepEqual(pass(b), first, 'same RNG state, same masks');
    assert.notDeepEqual(pass(a), first, 'the next pass draws new masks');
    b.adapters!.rng = Rng.fromState(a.adapters!.rng.state());
    assert.deepEqual(pass(a), pass(b), 'a restored state continues the same draws');
    // No tape (sampling, old log-probs): no dropout.
    const noTape = (m: Transformer) => m.tokenLogProbs({ k, tape: null }, x.batch, x.targets).logProb.data;
    assert.deepEqual(noTape(a), noTape(b));
  });

  test('fresh adapters are PEFT-initialised: A uniform in ±1/√in from the seed, B zero, the model unchanged', () => {
    const base = testModel(CONFIGS.qwen3!, 60);
    const a1 = LoraAdapters.init(base.cfg, SETTINGS, 'b', 9);
    const a2 = LoraAdapters.init(base.cfg, SETTINGS, 'b', 9);
    for (const [name, t] of a1.params) {
      assert.deepEqual(t.data, a2.params.get(name)!.data, 'deterministic from the seed');
      if (name.includes('lora_B'))
        assert.ok(
          t.data.every((v) => v === 0),
          name,
        );
      else {
        const bound = 1 / Math.sqrt(t.shape[1]!);
        assert.ok(t.data.every((v) => Math.abs(v) <= bound) && t.data.some((v) => Math.abs(v) > bound / 2), name);
      }
    }
    const x = inputs(61);
    assert.deepEqual(logits(adapt(base, a1), x), logits(base, x));
  });

  test('settings a model cannot take are refused saying what to change', () => {
    const cfg = testModel(CONFIGS.gpt2!, 1).cfg;
    assert.throws(
      () => LoraAdapters.init(cfg, { ...SETTINGS, targets: ['q_proj'] }, '', 0),
      /q_proj.*c_attn, c_proj, c_fc/,
    );
    assert.throws(() => LoraAdapters.init(cfg, { ...SETTINGS, rank: 65 }, '', 0), /rank 65 exceeds.*at most 64/);
  });
});

/** PEFT's module paths of one block of a tiny model and their [in, out] widths, written from PEFT's saved format. */
const PEFT_MODULES: Record<string, [string, number, number][]> = {
  // qwen3 tiny: hidden 64, 4 heads × 32, 2 KV heads, intermediate 256.
  qwen3: [
    ['self_attn.q_proj', 64, 128],
    ['self_attn.k_proj', 64, 64],
    ['self_attn.v_proj', 64, 64],
    ['self_attn.o_proj', 128, 64],
    ['mlp.gate_proj', 64, 256],
    ['mlp.up_proj', 64, 256],
    ['mlp.down_proj', 256, 64],
  ],
  // gpt2 tiny: n_embd 64, n_inner 4·64; Conv1D modules get Linear-shaped A [r, in] and B [out, r].
  gpt2: [
    ['attn.c_attn', 64, 192],
    ['attn.c_proj', 64, 64],
    ['mlp.c_fc', 64, 256],
    ['mlp.c_proj', 256, 64],
  ],
};

describe('PEFT adapter folders', () => {
  for (const family of ['qwen3', 'gpt2']) {
    test(`${family}: saved with PEFT's names, shapes and config keys, and loaded back equal`, async () => {
      const dir = join(root, `peft-${family}`);
      await saveTinyAgent(join(dir, 'base'), family as 'qwen3' | 'gpt2', 3);
      const base = await loadPretrained(join(dir, 'base'));
      const adapters = LoraAdapters.init(base.model.cfg, SETTINGS, join(dir, 'base'), 5);
      for (const t of adapters.params.values()) t.data.set(uniform(t.size, mulberry32(t.size), -0.1, 0.1));
      const model = adapt(base.model, adapters);
      await savePretrained(join(dir, 'adapter'), { ...base, model });
      const prefix = family === 'gpt2' ? 'transformer.h' : 'model.layers';
      const want = new Map<string, number[]>();
      for (const layer of [0, 1])
        for (const [m, inF, outF] of PEFT_MODULES[family]!) {
          want.set(`base_model.model.${prefix}.${layer}.${m}.lora_A.weight`, [4, inF]);
          want.set(`base_model.model.${prefix}.${layer}.${m}.lora_B.weight`, [outF, 4]);
        }
      const r = await SafetensorsReader.open(join(dir, 'adapter', ADAPTER_WEIGHTS));
      const got = new Map(r.names().map((n) => [n, r.info(n).shape]));
      await r.close();
      assert.deepEqual(got, want);
      const config = JSON.parse(await readFile(join(dir, 'adapter', ADAPTER_CONFIG), 'utf8')) as Record<
        string,
        unknown
      >;
      assert.equal(config.peft_type, 'LORA');
      assert.equal(config.task_type, 'CAUSAL_LM');
      assert.equal(config.r, 4);
      assert.equal(config.lora_alpha, 8);
      assert.equal(config.lora_dropout, 0);
      assert.equal(config.bias, 'none');
      assert.equal(config.fan_in_fan_out, family === 'gpt2');
      assert.equal(config.base_model_name_or_path, join(dir, 'base'));
      assert.deepEqual(
        config.target_modules,
        PEFT_MODULES[family]!.map(([m]) => m.split('.').pop()!)
          .filter((m, i, a) => a.indexOf(m) === i)
          .sort(),
      );
      // Loading the adapter folder (as `hacrl eval` does) gives the same model.
      const back = await loadPretrained(join(dir, 'adapter'));
      assert.ok(back.model.adapters, 'loaded with adapters');
      for (const [name, t] of adapters.params) assert.deepEqual(back.model.trainable.get(name)!.data, t.data, name);
      const x = { ...inputs(70), ids: randInt(BATCH * SEQ, mulberry32(70), 0, 300) };
      x.batch = { ids: x.ids, batch: BATCH, seqLen: SEQ };
      assert.deepEqual(logits(back.model, x), logits(model, x));
    });
  }

  test('a merged checkpoint (library and `hacrl lora merge`) has the adapted model logits and no adapters', async () => {
    const dir = join(root, 'merge');
    await saveTinyAgent(join(dir, 'base'), 'llama', 7);
    const base = await loadPretrained(join(dir, 'base'));
    const adapters = LoraAdapters.init(
      base.model.cfg,
      { ...SETTINGS, targets: ['q_proj', 'down_proj'] },
      join(dir, 'base'),
      8,
    );
    for (const t of adapters.params.values()) t.data.set(uniform(t.size, mulberry32(t.size + 1), -0.2, 0.2));
    const model = adapt(base.model, adapters);
    await savePretrained(join(dir, 'adapter'), { ...base, model });
    const x = { ...inputs(71), ids: randInt(BATCH * SEQ, mulberry32(71), 0, 300) };
    x.batch = { ids: x.ids, batch: BATCH, seqLen: SEQ };
    const want = logits(model, x);
    assert.ok(relError(logits(base.model, x), want) > 1e-3, 'the adapters change the logits');
    await mergeAdapterFolder(join(dir, 'adapter'), join(dir, 'merged'));
    const r = hacrl([
      'lora',
      'merge',
      '--base',
      join(dir, 'base'),
      '--adapter',
      join(dir, 'adapter'),
      '--out',
      join(dir, 'cli'),
    ]);
    assert.equal(r.status, 0, r.stderr);
    for (const out of ['merged', 'cli']) {
      const merged = await loadPretrained(join(dir, out));
      assert.equal(merged.model.adapters, null, 'a plain checkpoint');
      const err = relError(logits(merged.model, x), want);
      assert.ok(err < 1e-5, `${out}: relative error ${err}`);
    }
    assert.ok(relError(logits(mergeAdapters(model), x), want) < 1e-5);
  });

  test("target_modules as full module names (PEFT saves 'all-linear' so) adapt exactly those modules", async () => {
    const dir = join(root, 'full-names');
    await saveTinyAgent(join(dir, 'base'), 'qwen3', 4);
    const base = await loadPretrained(join(dir, 'base'));
    const full = ['model.layers.0.self_attn.q_proj', 'model.layers.1.mlp.down_proj'];
    // PEFT's rule: a module whose name is a target or ends with '.' + a target.
    for (const [targets, want] of [
      [full, full],
      [['self_attn.q_proj'], ['model.layers.0.self_attn.q_proj', 'model.layers.1.self_attn.q_proj']],
    ] as const) {
      const adapters = LoraAdapters.init(base.model.cfg, { ...SETTINGS, targets }, join(dir, 'base'), 6);
      assert.deepEqual(
        adapters.modules.map((m) => m.module),
        want,
      );
    }
    const some = LoraAdapters.init(base.model.cfg, { ...SETTINGS, targets: full }, join(dir, 'base'), 6);
    for (const t of some.params.values()) t.data.set(uniform(t.size, mulberry32(t.size + 2), -0.2, 0.2));
    const model = adapt(base.model, some);
    await savePretrained(join(dir, 'adapter'), { ...base, model });
    // Short names would adapt both blocks: the saved config keeps the full names.
    const config = JSON.parse(await readFile(join(dir, 'adapter', ADAPTER_CONFIG), 'utf8')) as Record<string, unknown>;
    assert.deepEqual(config.target_modules, full);
    const back = await loadPretrained(join(dir, 'adapter'));
    assert.deepEqual([...back.model.trainable.keys()], [...some.params.keys()]);
    const x = { ...inputs(72), ids: randInt(BATCH * SEQ, mulberry32(72), 0, 300) };
    x.batch = { ids: x.ids, batch: BATCH, seqLen: SEQ };
    assert.deepEqual(logits(back.model, x), logits(model, x));
    assert.ok(relError(logits(base.model, x), logits(model, x)) > 1e-3, 'the adapters change the logits');
    assert.throws(
      () => LoraAdapters.init(base.model.cfg, { ...SETTINGS, targets: ['model.layers.2.self_attn.q_proj'] }, '', 0),
      /model\.layers\.2\.self_attn\.q_proj are not projections of a qwen3 model: use q_proj, .*full module names/,
    );
  });

  test('adapter folders that do not fit are refused with the reason', async () => {
    const dir = join(root, 'bad');
    await saveTinyAgent(join(dir, 'base'), 'qwen3', 2);
    const base = await loadPretrained(join(dir, 'base'));
    const good = LoraAdapters.init(base.model.cfg, SETTINGS, join(dir, 'base'), 1);
    const cfgPath = join(dir, 'a', ADAPTER_CONFIG);
    const weightsPath = join(dir, 'a', ADAPTER_WEIGHTS);
    const load = () => readAdapterFiles(join(dir, 'a'), base.model.cfg, join(dir, 'base'));
    const config = async (edit: (c: Record<string, unknown>) => void): Promise<void> => {
      await writeAdapterFiles(join(dir, 'a'), good);
      const c = JSON.parse(await readFile(cfgPath, 'utf8')) as Record<string, unknown>;
      edit(c);
      await writeFile(cfgPath, JSON.stringify(c));
    };
    await config((c) => (c.r = 8));
    await assert.rejects(load(), /lora_A\.weight" has shape \[4, 64\], r=8 on this base needs \[8, 64\]/);
    await config((c) => (c.target_modules = ['c_attn']));
    await assert.rejects(load(), /c_attn are not projections of a qwen3 model/);
    await config((c) => (c.use_dora = true));
    await assert.rejects(load(), /DoRA/);
    await config((c) => (c.peft_type = 'IA3'));
    await assert.rejects(load(), /only LoRA/);
    await config((c) => (c.r = 65));
    await assert.rejects(load(), /rank 65 exceeds/);
    await config((c) => (c.target_modules = '.*proj'));
    await assert.rejects(load(), /regular expressions are not supported/);
    // The base recorded relative to the adapter folder is found though base_model_name_or_path names nothing here.
    await config((c) => (c.base_model_name_or_path = join(dir, 'nowhere')));
    assert.ok((await loadPretrained(join(dir, 'a'))).model.adapters);
    const tensors = [...good.params].map(
      ([n, t]) => [`base_model.model.${n}`, { shape: [...t.shape], data: t.data }] as const,
    );
    await writeSafetensors(weightsPath, tensors);
    await assert.rejects(loadPretrained(join(dir, 'a')), /"[^"]*nowhere" is not a checkpoint folder here.*--base DIR/);
    await config(() => {});
    await writeSafetensors(weightsPath, tensors.slice(1));
    await assert.rejects(
      load(),
      /missing tensor "base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_A\.weight"/,
    );
    await writeSafetensors(weightsPath, [...tensors, ['base_model.model.lm_head.lora_A.weight', tensors[0]![1]]]);
    await assert.rejects(load(), /unexpected tensors base_model\.model\.lm_head\.lora_A\.weight/);
  });
});
