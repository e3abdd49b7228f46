// `hacrl score` from the outside: text and id rows through the CLI, checked against the PyTorch reference.
import assert from 'node:assert/strict';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { loadPretrained, loadPretrainedModel } from '../src/model/pretrained.js';
import { scoreResponses } from '../src/model/response-log-probs.js';
import { saveModel } from '../src/model/weights.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import { saveTinyAdapter, saveTinyAgent } from './tiny-agents.js';
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

  test('rows of ids score under a folder without tokenizer files, as under the same model with them; text is refused', async () => {
    const bare = join(root, 'bare');
    await mkdir(bare);
    for (const f of ['config.json', 'model.safetensors']) await copyFile(join(dir, f), join(bare, f));
    const idRows = join(root, 'ids.jsonl');
    await writeFile(idRows, `${JSON.stringify(rows[1])}\n`);
    const scores = (model: string): unknown => {
      const r = hacrl(['score', '--model', model, '--input', idRows]);
      assert.equal(r.status, 0, r.stderr);
      return JSON.parse(r.stdout);
    };
    assert.deepEqual(scores(bare), scores(dir));
    const r = hacrl(['score', '--model', bare, '--input', input]);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /row 1 is text \(\{prompt, response\}\), which needs a tokenizer, and .*bare has none/);
  });
});

describe('hacrl score on a PEFT adapter folder', () => {
  test('scores under the adapted model, as `hacrl eval` loads it, not under its base', async () => {
    const dir = join(root, 'lora');
    await saveTinyAgent(join(dir, 'base'), 'qwen3', 4);
    // The adapter folder has no tokenizer files of its own: text rows use its base's tokenizer.
    await saveTinyAdapter(join(dir, 'adapter'), join(dir, 'base'), 6, false);
    const rows = [
      { prompt: 'the answer is', response: ' 42.' },
      { prompt_ids: [5, 9, 13], response_ids: [20, 21, 22, 23] },
    ];
    const input = join(dir, 'rows.jsonl');
    await writeFile(input, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const score = (model: string): number[][] => {
      const r = hacrl(['score', '--model', model, '--input', input]);
      assert.equal(r.status, 0, r.stderr);
      return r.stdout
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { token_logprobs: number[] }).token_logprobs);
    };
    const adapted = score(join(dir, 'adapter'));
    const plain = score(join(dir, 'base'));
    assert.equal(adapted.length, rows.length);
    for (const [i, lp] of adapted.entries()) {
      assert.equal(lp.length, plain[i]!.length);
      assert.ok(
        lp.some((x, j) => Math.abs(x - plain[i]![j]!) > 1e-4),
        `row ${i + 1}: the adapters change the log-probs`,
      );
    }
    // What eval's and serve's loader gives for the same folder, scored in this process.
    const loaded = await loadPretrained(join(dir, 'adapter'));
    assert.ok(loaded.model.adapters, 'loaded with its adapters');
    const items = [
      { prompt: loaded.tokenizer.encode(rows[0]!.prompt!), response: loaded.tokenizer.encode(rows[0]!.response!) },
      { prompt: rows[1]!.prompt_ids!, response: rows[1]!.response_ids! },
    ];
    assert.deepEqual(adapted, scoreResponses(loaded.model, engine(), items));
    // The tokenizer-free loader that id rows use puts the same adapters on the same base.
    const bare = await loadPretrainedModel(join(dir, 'adapter'));
    assert.deepEqual([adapted[1]], scoreResponses(bare, engine(), [items[1]!]));
  });
});
