// Validation during training: greedy accuracy, and avg@k / pass@k of k sampled answers, on a model whose every answer
// is a known coin flip.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ResolvedAgent } from '../src/config/rl-config.js';
import type { Problem } from '../src/tasks/problem.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import type { Tokenizer } from '../src/tokenizer/tokenizer.js';
import { formatValidation, validateAgent } from '../src/train/validation.js';
import { testModel, CONFIGS } from './tiny-models.js';

// A character tokenizer whose digits read back as boxed answers (`7` → `\boxed{7}`): with a zero head every token is
// equally likely, so one sampled token is a correct answer with probability exactly 1/V.
const chars = new CharTokenizer({
  alphabet: '0123456789+QA: \n',
  specialTokens: ['<eos>', '<pad>'],
  names: { eos: '<eos>', pad: '<pad>' },
});
const tokenizer: Tokenizer = {
  vocabSize: chars.vocabSize,
  eosId: chars.eosId,
  bosId: chars.bosId,
  padId: chars.padId,
  specialTokens: chars.specialTokens,
  chatTemplate: null,
  encode: (text) => chars.encode(text),
  decode: (ids, o) => chars.decode(ids, o).replace(/[0-9]/g, (d) => `\\boxed{${d}}`),
  applyChatTemplate: () => {
    throw new Error('no chat template');
  },
  save: () => Promise.reject(new Error('not saved')),
};
const V = tokenizer.vocabSize;
const model = testModel({ ...CONFIGS.llama!, vocab_size: V }, 5);
model.head.data.fill(0);
const agent = { name: 'uniform', model, tokenizer };
const settings = { maxNewTokens: 1, template: '{question}', system: undefined, temperature: 1, topP: 1, topK: 0 };
const problems: Problem[] = Array.from({ length: 40 }, (_, i) => ({
  id: `p${i}`,
  prompt: `${i % 10}+0`,
  answer: String(i % 10),
  solution: '',
  task: 'plain',
  difficulty: {},
}));
const sets = [{ name: 'digits', problems }];

test('k = 0: greedy accuracy only; k = 8: avg@8 and pass@8 beside it, near their exact values', async () => {
  const greedyOnly = await validateAgent(agent, settings as ResolvedAgent, sets, {
    problems: 0,
    samplesPerProblem: 0,
    seed: 1,
  });
  // Ties go to the first token, <eos>: an empty answer, never right.
  assert.deepEqual(greedyOnly, { 'val/digits/greedy': 0 });

  const k = 8;
  const m = await validateAgent(agent, settings as ResolvedAgent, sets, { problems: 0, samplesPerProblem: k, seed: 1 });
  assert.deepEqual(Object.keys(m), ['val/digits/greedy', 'val/digits/avg@8', 'val/digits/pass@8']);
  const avg = m['val/digits/avg@8'];
  const pass = m['val/digits/pass@8'];
  // 320 samples, each right with p = 1/V: avg@8 within 4 standard deviations of p; pass@8 near 1 − (1 − p)^8.
  const p = 1 / V;
  assert.ok(Math.abs(avg - p) < 4 * Math.sqrt((p * (1 - p)) / (problems.length * k)), `avg@8 ${avg}, p ${p}`);
  const passExact = 1 - (1 - p) ** k;
  assert.ok(Math.abs(pass - passExact) < 4 * Math.sqrt((passExact * (1 - passExact)) / problems.length), `${pass}`);
  assert.ok(pass >= avg && pass <= Math.min(1, k * avg) + 1e-12, 'avg@k ≤ pass@k ≤ k·avg@k');

  const again = await validateAgent(agent, settings as ResolvedAgent, sets, {
    problems: 10,
    samplesPerProblem: k,
    seed: 1,
  });
  const firstTen = await validateAgent(
    agent,
    settings as ResolvedAgent,
    [{ name: 'digits', problems: problems.slice(0, 10) }],
    {
      problems: 0,
      samplesPerProblem: k,
      seed: 1,
    },
  );
  assert.deepEqual(again, firstTen, 'eval.problems keeps the first problems, and the seed fixes the samples');
  assert.equal(
    formatValidation({ 'val/digits/greedy': 0.5, 'val/digits/avg@8': 0.125, 'val/digits/pass@8': 0.75 }),
    'val digits 50.0% (avg@8 12.5%, pass@8 75.0%)',
  );
  // Set by set, a set named by a file path (slashes in its name) included.
  assert.equal(
    formatValidation({ 'val/a:test/greedy': 0.25, 'val/data/b.jsonl/greedy': 1, 'val/data/b.jsonl/pass@2': 1 }),
    'val a:test 25.0%  data/b.jsonl 100.0% (pass@2 100.0%)',
  );
});
