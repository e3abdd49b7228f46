// `hacrl score` from the outside: text and id rows through the CLI, checked against the PyTorch reference.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { saveModel } from '../src/model/weights.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { CONFIGS, testModel } from './tiny-models.js';
import { requireTorch, runTorchReference } from './torch-reference.js';
import { hacrl } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-score-'));
after(() => rm(root, { recursive: true, force: true }));

const tokenizer = new CharTokenizer({
  alphabet: ' 0123456789+-*/=()abcdefghijklmnopqrstuvwxyz.?',
  specialTokens: ['<eos>', '<pad>'],
  names: { eos: '<eos>', pad: '<pad>' },
});

describe('hacrl score', async () => {
  const dir = join(root, 'model');
  const model = testModel(CONFIGS.qwen3!, 21);
  await saveModel(dir, model);
  await tokenizer.save(dir);
  const rows: ({ prompt: string; response: string } | { prompt_ids: number[]; response_ids: number[] })[] = [
    { prompt: 'what is 12+30?', response: ' 42.' },
    { prompt_ids: [5, 9, 13], response_ids: [20, 21, 22, 23, 24] },
    { prompt: 'abc', response: '' },
  ];
  const input = join(root, 'rows.jsonl');
  await writeFile(input, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');

  test('per-token log-probs match the PyTorch reference on the same rows', async () => {
    requireTorch();
    const output = join(root, 'scores.jsonl');
    const r = hacrl(['score', '--model', dir, '--input', input, '--output', output]);
    assert.equal(r.status, 0, r.stderr);
    const scored = (await readFile(output, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { token_logprobs: number[]; response_ids: number[]; sum_logprob: number });
    assert.equal(scored.length, rows.length);
    assert.deepEqual(scored[0]!.response_ids, tokenizer.encode(' 42.'));
    assert.deepEqual(scored[2]!.token_logprobs, []);

    const seqs = rows.map((row, i) => [
      ...('prompt' in row ? tokenizer.encode(row.prompt) : row.prompt_ids),
      ...scored[i]!.response_ids,
    ]);
    const promptLens = rows.map((row) =>
      'prompt' in row ? tokenizer.encode(row.prompt).length : row.prompt_ids.length,
    );
    const T = Math.max(...seqs.map((s) => s.length));
    const ids = seqs.map((s) => [...s, ...new Array<number>(T - s.length).fill(1)]);
    const zeros = ids.map((row) => row.map(() => 0));
    const minusOne = ids.map((row) => row.map(() => -1));
    const ref = await runTorchReference(
      dir,
      { ids, targets: minusOne, weights: zeros },
      join(root, 'in.json'),
      join(root, 'out.safetensors'),
    );
    const logits = ref.get('logits')!.data as Float32Array;
    const V = model.cfg.vocabSize;
    let worst = 0;
    for (const [b, s] of scored.entries())
      for (const [j, lp] of s.token_logprobs.entries()) {
        const row = logits.subarray((b * T + promptLens[b]! - 1 + j) * V, (b * T + promptLens[b]! + j) * V);
        const max = Math.max(...row);
        const lse = max + Math.log(row.reduce((acc, x) => acc + Math.exp(x - max), 0));
        worst = Math.max(worst, Math.abs(lp - (row[s.response_ids[j]!]! - lse)));
      }
    assert.ok(worst < 1e-4, `max |Δ log p| = ${worst}`);
    assert.ok(Math.abs(scored[1]!.sum_logprob - scored[1]!.token_logprobs.reduce((a, b) => a + b, 0)) < 1e-9);
  });

  test('a bad row is reported with its file and line; an id outside the vocabulary names the row', async () => {
    const bad = join(root, 'bad.jsonl');
    await writeFile(bad, `${JSON.stringify(rows[0])}\n{"prompt": 3}\n`);
    const r = hacrl(['score', '--model', dir, '--input', bad]);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, new RegExp(`${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}:2: `));
    await writeFile(bad, `{"prompt_ids": [1, 2], "response_ids": [500]}\n`);
    const r2 = hacrl(['score', '--model', dir, '--input', bad]);
    assert.notEqual(r2.status, 0);
    assert.match(r2.stderr, /row 1: token id 500 is outside the vocabulary/);
  });
});
