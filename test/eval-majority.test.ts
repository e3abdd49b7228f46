// avg@k, pass@k and maj@k checked for their values: a hand-wired model answers every prompt with "\boxed{7}" or
// "\boxed{3}" (7 with probability 0.6), so each sample's correctness says which answer it gave, and the three rates
// can be counted from the per-problem samples the report returns.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { evaluate } from '../src/eval/evaluate.js';
import type { Problem } from '../src/tasks/problem.js';
import { bigramModel, tokenizer } from './two-answer-model.js';

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
