// Sampling with the KV cache against full forward passes, determinism under a seed, padding, stops and truncation;
// identical prompts' shared prefill against each sequence's own.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { generate, sampleRows, sampleToken } from '../src/model/generate.js';
import { scoreResponses } from '../src/model/response-log-probs.js';
import { LoraAdapters } from '../src/model/lora.js';
import { adapt } from '../src/model/peft.js';
import { Transformer } from '../src/model/transformer.js';
import { PRECISIONS, type Precision } from '../src/tensor/bf16.js';
import { Rng } from '../src/util/rng.js';
import { testedBackends } from './backends.js';
import { mulberry32, uniform } from './helpers.js';
import { CONFIGS, testModel } from './tiny-models.js';

const k = engine();

/** Greedy continuation computed the slow way: a full forward pass over the whole sequence for every new token. */
function greedyWithoutCache(model: Transformer, prompt: number[], steps: number): number[] {
  const seq = [...prompt];
  for (let s = 0; s < steps; s++) {
    const hidden = model.forward({ k, tape: null }, { ids: Int32Array.from(seq), batch: 1, seqLen: seq.length });
    const last = hidden.data.subarray((seq.length - 1) * model.cfg.hidden);
    const logits = model.logits(k, last, 1);
    let best = 0;
    for (let i = 1; i < logits.length; i++) if (logits[i]! > logits[best]!) best = i;
    seq.push(best);
  }
  return seq.slice(prompt.length);
}

const prompts = [
  [5, 17, 3, 44, 9],
  [12, 8],
  [60, 61, 62, 63, 64, 65, 66, 67],
];

for (const family of ['qwen3', 'gpt2', 'llama']) {
  describe(`sampling (${family})`, () => {
    const model = testModel(CONFIGS[family]!, 11);

    test('greedy decoding with the KV cache equals full forward passes, for left-padded prompts in one batch', () => {
      const batched = generate(model, k, prompts, { temperature: 0, maxNewTokens: 6 });
      for (const [i, p] of prompts.entries())
        assert.deepEqual(batched[i]!.ids, greedyWithoutCache(model, p, 6), `prompt ${i}`);
    });

    test('returned log-probs are the model’s own (temperature 1) and match scoring the same tokens', () => {
      const gens = generate(model, k, prompts, { temperature: 0.7, maxNewTokens: 5, seed: 3 });
      const scored = scoreResponses(
        model,
        k,
        prompts.map((p, i) => ({ prompt: p, response: gens[i]!.ids })),
      );
      for (const [i, g] of gens.entries())
        for (const [j, lp] of g.logProbs.entries())
          assert.ok(Math.abs(lp - scored[i]![j]!) < 1e-4, `row ${i} token ${j}: ${lp} vs ${scored[i]![j]}`);
    });
  });
}

describe('sampling controls', () => {
  const model = testModel(CONFIGS.qwen3!, 5);

  test('same seed, same tokens; another seed, other tokens', () => {
    const a = generate(model, k, prompts, { temperature: 1, maxNewTokens: 12, seed: 42 });
    const b = generate(model, k, prompts, { temperature: 1, maxNewTokens: 12, seed: 42 });
    const c = generate(model, k, prompts, { temperature: 1, maxNewTokens: 12, seed: 43 });
    assert.deepEqual(
      a.map((g) => g.ids),
      b.map((g) => g.ids),
    );
    assert.notDeepEqual(
      a.map((g) => g.ids),
      c.map((g) => g.ids),
    );
  });

  test('stop tokens end each sequence on its own; the rest run to the length limit', () => {
    const free = generate(model, k, prompts, { temperature: 0, maxNewTokens: 8 });
    const stopAt = free[0]!.ids[2]!;
    const gens = generate(model, k, prompts, { temperature: 0, maxNewTokens: 8, stopTokens: [stopAt] });
    const first = free[0]!.ids.indexOf(stopAt);
    assert.deepEqual(gens[0]!.ids, free[0]!.ids.slice(0, first + 1));
    assert.equal(gens[0]!.finishReason, 'stop_token');
    for (const [i, g] of gens.entries()) {
      const at = free[i]!.ids.indexOf(stopAt);
      assert.deepEqual(g.ids, at < 0 ? free[i]!.ids : free[i]!.ids.slice(0, at + 1), `sequence ${i}`);
      assert.equal(g.finishReason, at < 0 ? 'length' : 'stop_token');
    }
  });

  test('stop strings cut the text before the match', () => {
    const decode = (ids: number[]): string => ids.map((i) => String.fromCharCode(97 + (i % 26))).join('');
    const free = generate(model, k, [prompts[0]!], { temperature: 0, maxNewTokens: 10, decode });
    const stop = free[0]!.text.slice(3, 5);
    const g = generate(model, k, [prompts[0]!], { temperature: 0, maxNewTokens: 10, decode, stopStrings: [stop] })[0]!;
    assert.equal(g.finishReason, 'stop_string');
    assert.equal(g.text, free[0]!.text.slice(0, free[0]!.text.indexOf(stop)));
  });

  test('top-k 1 and a tiny top-p are greedy; top-k never picks outside the k best', () => {
    const greedy = generate(model, k, prompts, { temperature: 0, maxNewTokens: 6 }).map((g) => g.ids);
    assert.deepEqual(
      generate(model, k, prompts, { temperature: 1, topK: 1, maxNewTokens: 6, seed: 9 }).map((g) => g.ids),
      greedy,
    );
    assert.deepEqual(
      generate(model, k, prompts, { temperature: 1, topP: 1e-6, maxNewTokens: 6, seed: 9 }).map((g) => g.ids),
      greedy,
    );
    const row = Float32Array.of(0.1, 3, -1, 2.5, 0, 2.9);
    const rng = new Rng(1);
    const seen = new Set<number>();
    for (let i = 0; i < 400; i++) seen.add(sampleToken(row, { temperature: 2, topK: 3, topP: 1 }, rng));
    assert.deepEqual([...seen].sort(), [1, 3, 5]);
  });

  test('top-k and top-p pick what sorting the whole vocabulary picks, seed for seed', () => {
    // The reference: every index sorted by logit (ties by index), truncated, then one draw over the kept weights.
    const bySort = (row: Float32Array, o: { temperature: number; topK: number; topP: number }, u: number): number => {
      let order = Array.from(row, (_, i) => i).sort((a, b) => row[b]! - row[a]! || a - b);
      if (o.topK > 0) order = order.slice(0, o.topK);
      const w = order.map((i) => Math.exp((row[i]! - row[order[0]!]!) / o.temperature));
      const all = w.reduce((a, b) => a + b, 0);
      let keep = w.length;
      for (let j = 0, acc = 0; o.topP < 1 && j < w.length; j++)
        if ((acc += w[j]! / all) >= o.topP) {
          keep = j + 1;
          break;
        }
      let x = u * w.slice(0, keep).reduce((a, b) => a + b, 0);
      for (let j = 0; j < keep; j++) if ((x -= w[j]!) < 0) return order[j]!;
      return order[keep - 1]!;
    };
    const rng = new Rng(5);
    // 3000 logits with repeated values (ties) and a spread wide enough that top-p keeps from a few to hundreds.
    const row = Float32Array.from({ length: 3000 }, () => Math.round(rng.next() * 40) / 4);
    const settings = [
      { temperature: 1, topK: 40, topP: 1 },
      { temperature: 0.7, topK: 0, topP: 0.9 },
      { temperature: 3, topK: 0, topP: 0.95 },
      { temperature: 1, topK: 200, topP: 0.5 },
    ];
    for (const o of settings)
      for (let seed = 0; seed < 50; seed++) {
        const u = new Rng(seed).next();
        assert.equal(sampleToken(row, o, new Rng(seed)), bySort(row, o, u), `${JSON.stringify(o)} seed ${seed}`);
      }
  });

  test('sampling frequencies follow the softmax at the temperature', () => {
    const row = Float32Array.of(0, Math.log(3));
    const rng = new Rng(7);
    let ones = 0;
    const n = 20000;
    for (let i = 0; i < n; i++) ones += sampleToken(row, { temperature: 1, topK: 0, topP: 1 }, rng);
    assert.ok(Math.abs(ones / n - 0.75) < 0.015, `P(token 1) = ${ones / n}, expected 0.75`);
    // The batched path (native softmax, one scan per row) at temperature 2: P(1) = 3^½ / (1 + 3^½).
    const rows = new Float32Array(2 * 1000);
    for (let r = 0; r < 1000; r++) rows.set(row, 2 * r);
    let batchedOnes = 0;
    for (let i = 0; i < 20; i++)
      batchedOnes += sampleRows(
        k,
        rows,
        2,
        new Array<boolean>(1000).fill(true),
        { temperature: 2, topK: 0, topP: 1 },
        rng,
      ).reduce((a, b) => a + b, 0);
    const want = Math.sqrt(3) / (1 + Math.sqrt(3));
    assert.ok(Math.abs(batchedOnes / n - want) < 0.015, `batched P(token 1) = ${batchedOnes / n}, expected ${want}`);
  });

  test('bad settings are refused with what to change', () => {
    assert.throws(() => generate(model, k, prompts, { temperature: -1 }), /temperature must be ≥ 0/);
    assert.throws(() => generate(model, k, prompts, { topP: 0 }), /topP must be in \(0, 1\]/);
    assert.throws(() => generate(model, k, prompts, { stopStrings: ['x'] }), /stopStrings need a decode function/);
    assert.throws(() => generate(model, k, [[]]), /every prompt needs at least one token/);
  });
});

/** The tiny model of `family` at `precision`, with LoRA adapters whose B is random when `lora`. */
function sharingModel(family: string, precision: Precision, lora: boolean): Transformer {
  const base = testModel(CONFIGS[family]!, 13);
  const model = new Transformer(base.cfg, base.params, null, precision);
  if (!lora) return model;
  const adapters = LoraAdapters.init(model.cfg, { rank: 4, alpha: 8, dropout: 0, targets: 'all-linear' }, 'b', 3);
  const rng = mulberry32(17);
  for (const [name, t] of adapters.params) if (name.includes('lora_B')) t.data.set(uniform(t.size, rng, -0.2, 0.2));
  return adapt(model, adapters);
}

/** Groups of identical prompts: short ones (whose shared prefill is a product of few rows) and longer ones. */
const groups = {
  'four groups of two lengths': [
    [5, 17, 3, 44, 9],
    [12, 8],
    [60, 61, 62, 63, 64, 65, 66, 67],
    [12, 8],
  ].flatMap((p) => Array<number[]>(3).fill(p)),
  'two groups of three tokens': [
    [5, 17, 3],
    [12, 8, 9],
  ].flatMap((p) => Array<number[]>(4).fill(p)),
  'one group of 24 tokens': Array<number[]>(4).fill(Array.from({ length: 24 }, (_, i) => (i * 7) % 90)),
};

describe('shared prompt prefill', () => {
  for (const k of testedBackends('shared prompt prefill'))
    for (const family of Object.keys(CONFIGS))
      test(`samples and log-probs equal each sequence's own prefill, bit for bit (${family}, ${k.name})`, () => {
        for (const precision of PRECISIONS)
          for (const lora of [false, true]) {
            const model = sharingModel(family, precision, lora);
            const prefillRows: number[] = [];
            const forward = model.forward.bind(model);
            model.forward = (ctx, b, cache) => (prefillRows.push(b.batch), forward(ctx, b, cache));
            for (const [name, prompts] of Object.entries(groups))
              for (const temperature of [0, 1]) {
                const o = { temperature, maxNewTokens: 5, seed: 7 };
                const own = generate(model, k, prompts, { ...o, sharePrefill: false });
                const shared = generate(model, k, prompts, o);
                const where = `${precision}${lora ? ' LoRA' : ''}, ${name}, temperature ${temperature}`;
                for (const [i, g] of shared.entries()) {
                  assert.deepEqual(g.ids, own[i]!.ids, `${where}: sequence ${i}'s tokens`);
                  assert.deepEqual(bits(g.logProbs), bits(own[i]!.logProbs), `${where}: sequence ${i}'s log-probs`);
                }
                const [ownRows, sharedRows] = prefillRows.splice(0);
                assert.equal(ownRows, prompts.length, `${where}: the unshared prefill has a row per sequence`);
                assert.ok(sharedRows! < prompts.length, `${where}: the shared prefill has ${sharedRows} rows`);
              }
          }
      });
});

/** The float32 bits of each value. */
function bits(xs: readonly number[]): number[] {
  return Array.from(new Uint32Array(Float32Array.from(xs).buffer));
}
