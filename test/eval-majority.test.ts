// avg@k, pass@k and maj@k checked for their values: a hand-wired model answers every prompt with "\boxed{7}" or
// "\boxed{3}" (7 with probability 0.6), so each sample's correctness says which answer it gave, and the three rates
// can be counted from the per-problem samples the report returns.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { evaluate } from '../src/eval/evaluate.js';
import { parseHfConfig } from '../src/model/hf-config.js';
import type { Transformer } from '../src/model/transformer.js';
import { initModel } from '../src/model/weights.js';
import type { Problem } from '../src/tasks/problem.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';

const ALPHABET = 'QA: \nq0123456789\\boxed{}';
const tokenizer = new CharTokenizer({ alphabet: ALPHABET, specialTokens: ['<eos>'], names: { eos: '<eos>' } });

/**
 * A bigram model: attention and MLP write nothing (o_proj and down_proj zero), so the residual stream is the one-hot
 * embedding of the current token and lm_head alone picks the next one. After the prompt's last character (" " of
 * "A: ") it writes "\boxed{", then 7 or 3 (logits 40 and 40 − ln 1.5: probabilities 0.6 and 0.4, everything else
 * about e^-40), then "}" and EOS.
 */
function bigramModel(): Transformer {
  const id = (c: string): number => tokenizer.encode(c)[0]!;
  const vocab = tokenizer.vocabSize;
  const hidden = 32;
  const model = initModel(
    parseHfConfig({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      vocab_size: vocab,
      hidden_size: hidden,
      num_hidden_layers: 1,
      num_attention_heads: 2,
      num_key_value_heads: 2,
      intermediate_size: 32,
      max_position_embeddings: 64,
      rms_norm_eps: 1e-6,
      tie_word_embeddings: false,
      hidden_act: 'silu',
    }),
    0,
  );
  const p = (name: string): Float32Array => model.params.get(name)!.data;
  p('model.layers.0.self_attn.o_proj.weight').fill(0);
  p('model.layers.0.mlp.down_proj.weight').fill(0);
  const embed = p('model.embed_tokens.weight').fill(0);
  for (let t = 0; t < vocab; t++) embed[t * hidden + t] = 1;
  // RMSNorm scales a one-hot row to √hidden.
  const head = p('lm_head.weight').fill(0);
  const next = (from: string, to: number, logit: number): void =>
    void (head[to * hidden + id(from)] = logit / Math.sqrt(hidden));
  const chain = [' ', '\\', 'b', 'o', 'x', 'e', 'd', '{'];
  for (let i = 0; i + 1 < chain.length; i++) next(chain[i]!, id(chain[i + 1]!), 40);
  next('{', id('7'), 40);
  next('{', id('3'), 40 - Math.log(1.5));
  next('7', id('}'), 40);
  next('3', id('}'), 40);
  next('}', tokenizer.eosId, 40);
  return model;
}

test('maj@k, pass@k and avg@k equal the counts over each problem’s k samples (two-answer model, k = 5)', async () => {
  const problems: Problem[] = Array.from({ length: 16 }, (_, i) => ({
    id: `p${i}`,
    prompt: `q${i}`,
    answer: i % 2 === 0 ? '7' : '3',
    solution: '',
    task: 'plain',
    difficulty: {},
  }));
  const k = 5;
  const report = await evaluate(bigramModel(), engine(), tokenizer, problems, {
    k,
    maxNewTokens: 16,
    seed: 3,
    prompt: { template: '{question}' },
  });
  assert.equal(report.problems.length, problems.length);
  for (const [i, r] of report.problems.entries()) {
    // The model writes nothing but the two answers: greedy takes 7 (the likelier), every sample one of the two.
    assert.equal(r.greedy.response, '\\boxed{7}');
    assert.equal(r.greedy.correct, problems[i]!.answer === '7');
    assert.equal(r.samples.length, k);
  }
  const right = report.problems.map((r) => r.samples.filter(Boolean).length);
  // With two possible answers a problem's majority is right exactly when at least 3 of its 5 samples are.
  const majority = right.filter((c) => c >= 3).length;
  const any = right.filter((c) => c >= 1).length;
  const n = problems.length;
  // The samples must make the three rates differ from each other and from 0 and 1, or they would check little.
  assert.ok(majority > 0 && majority < any && any <= n, `majority right ${majority}, any right ${any} of ${n}`);
  assert.ok(
    right.some((c) => c > 0 && c < k),
    'some problem has right and wrong samples',
  );
  assert.equal(report.majAtK!.value, majority / n);
  assert.equal(report.majAtK!.n, n);
  assert.equal(report.passAtK!.value, any / n);
  assert.ok(Math.abs(report.avgAtK!.value - right.reduce((a, b) => a + b, 0) / (k * n)) < 1e-12);
  assert.equal(report.greedy.value, 0.5);
});
