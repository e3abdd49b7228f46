// `hacrl sft` and `hacrl eval` end to end on a very small agent.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { meanInterval, wilson } from '../src/eval/evaluate.js';
import { savePretrained } from '../src/model/pretrained.js';
import { hacrl, TINY_AGENT_FLAGS } from './cli.js';
import { bigramModel, tokenizer } from './two-answer-model.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-sft-'));
after(() => rm(root, { recursive: true, force: true }));

describe('confidence intervals', () => {
  test('Wilson interval matches hand-worked values and stays inside [0, 1]', () => {
    const w = wilson(8, 10);
    assert.ok(Math.abs(w.low - 0.4902) < 1e-4 && Math.abs(w.high - 0.9433) < 1e-4, JSON.stringify(w));
    const zero = wilson(0, 50);
    assert.equal(zero.low, 0);
    assert.ok(zero.high > 0.05 && zero.high < 0.08);
  });
  test('mean of per-problem fractions with a normal interval', () => {
    const m = meanInterval([0, 0.5, 1, 0.5]);
    assert.equal(m.value, 0.5);
    assert.ok(Math.abs(m.high - m.value - 1.96 * Math.sqrt(1 / 6 / 4)) < 1e-3);
  });
});

describe('hacrl sft and hacrl eval', () => {
  const dir = join(root, 'agent');
  test('sft trains, evaluates and saves a complete checkpoint folder', () => {
    const r = hacrl([
      'sft',
      '--out',
      dir,
      '--steps',
      '12',
      '--eval-every',
      '6',
      '--eval-n',
      '12',
      '--train-n',
      '300',
      ...TINY_AGENT_FLAGS,
      '--max-new-tokens',
      '24',
    ]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /sft: greedy accuracy \d+\.\d% \(95% CI \d+\.\d–\d+\.\d%, n=12\) on easy test/);
    // Twelve steps are too few for accuracy, but not for the loss: its last three steps are clearly below its first.
    const { history } = JSON.parse(readFileSync(join(dir, 'hacrl_sft.json'), 'utf8')) as {
      history: { loss: number }[];
    };
    assert.equal(history.length, 12);
    const mean = (xs: { loss: number }[]): number => xs.reduce((a, x) => a + x.loss, 0) / xs.length;
    const [first, last] = [mean(history.slice(0, 3)), mean(history.slice(-3))];
    assert.ok(last < first - 0.05, `sft loss: first steps ${first}, last steps ${last}`);
    return readdir(dir).then((files) => {
      for (const f of [
        'config.json',
        'model.safetensors',
        'tokenizer.json',
        'generation_config.json',
        'hacrl_sft.json',
      ])
        assert.ok(files.includes(f), `${f} written`);
    });
  });

  test('eval reports greedy and sampled accuracy with intervals, as a table and as JSON', async () => {
    const table = hacrl([
      'eval',
      '--model',
      dir,
      '--data',
      'easy:test:10',
      '--k',
      '2',
      '--max-new-tokens',
      '24',
      '--template',
      '{question}',
    ]);
    assert.equal(table.status, 0, table.stderr);
    assert.match(
      table.stdout,
      /easy:test {2}n=10 {2}greedy \d+\.\d% \[\d+\.\d, \d+\.\d\] {2}avg@2 .* pass@2 .* maj@2 /,
    );
    const out = join(root, 'eval.json');
    const json = hacrl([
      'eval',
      '--model',
      dir,
      '--data',
      'easy:test:10',
      '--max-new-tokens',
      '24',
      '--template',
      '{question}',
      '--json',
      '--output',
      out,
    ]);
    assert.equal(json.status, 0, json.stderr);
    const r = JSON.parse(json.stdout.trim().split('\n').pop()!) as {
      results: { greedy: { value: number; low: number; high: number; n: number } }[];
    };
    const g = r.results[0]!.greedy;
    assert.ok(g.n === 10 && g.low <= g.value && g.value <= g.high);
    const full = JSON.parse(await readFile(out, 'utf8')) as { problems: unknown[] }[];
    assert.equal(full[0]!.problems.length, 10);
  });

  test('eval scores what the model answers against the golds: greedy, avg@k and maj@k flip with the golds', async () => {
    // The hand-wired agent answers 7 greedily and 7 or 3 when sampled: with 5 of 8 golds 7, greedy accuracy is 5/8;
    // with every gold swapped it is 3/8, and each sampled answer (the same samples: same prompts and seed) is right
    // under exactly one of the two gold sets, so avg@k and maj@k of the two add up to 1.
    const agent = join(root, 'two-answer');
    await savePretrained(agent, { model: bigramModel(), tokenizer, generation: null });
    const golds = ['7', '3', '7', '7', '3', '7', '3', '7'];
    const run = async (name: string, gs: string[]) => {
      const data = join(root, name);
      await writeFile(data, gs.map((g, i) => `${JSON.stringify({ prompt: `q${i}`, answer: g })}\n`).join(''));
      const r = hacrl([
        'eval',
        '--model',
        agent,
        '--data',
        data,
        '--template',
        '{question}',
        '--k',
        '5',
        '--max-new-tokens',
        '16',
        '--json',
      ]);
      assert.equal(r.status, 0, r.stderr);
      type E = { value: number; n: number };
      return (JSON.parse(r.stdout.trim().split('\n').pop()!) as { results: Record<string, E>[] }).results[0]!;
    };
    const right = await run('golds.jsonl', golds);
    const swapped = await run(
      'swapped.jsonl',
      golds.map((g) => (g === '7' ? '3' : '7')),
    );
    assert.deepEqual([right.greedy!.value, swapped.greedy!.value, right.greedy!.n], [5 / 8, 3 / 8, 8]);
    for (const rate of ['avg_at_k', 'maj_at_k'])
      assert.ok(Math.abs(right[rate]!.value + swapped[rate]!.value - 1) < 1e-12, `${rate}: ${right[rate]!.value}`);
    assert.ok(right.maj_at_k!.value > 0 && right.maj_at_k!.value < 1, 'the samples split the problems');
  });

  test('bad options and data are refused with what to change', async () => {
    // The agent learned prompts under sft's '{question}' template; eval's default (the paper's "Let's think step by
    // step … \boxed{}" suffix) has characters its alphabet lacks, which used to be dropped from every prompt unseen.
    const garbled = hacrl(['eval', '--model', dir, '--data', 'easy:test:2', '--max-new-tokens', '4']);
    assert.notEqual(garbled.status, 0);
    assert.match(
      garbled.stderr,
      /character "L" \(U\+004C\) at offset \d+ is not in the vocabulary of the tokenizer of .*agent, which has no unk token \(text near it: "Q: What is .*\? Let's think step by step/,
    );
    const r = hacrl(['eval', '--model', dir, '--data', 'nosuch:test']);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /"nosuch" is not a preset or task \(known: easy, easy-mix, arith/);
    // A data row with a character the agent never saw ("·") is refused, quoting the row's prompt.
    const data = join(root, 'dot.jsonl');
    await writeFile(
      data,
      `${JSON.stringify({ prompt: 'What is 6+1?', answer: 7 })}\n${JSON.stringify({ prompt: 'What is 6·7?', answer: 42 })}\n`,
    );
    const row = hacrl(['eval', '--model', dir, '--data', data, '--template', '{question}', '--max-new-tokens', '4']);
    assert.notEqual(row.status, 0);
    assert.match(
      row.stderr,
      /character "·" \(U\+00B7\) at offset 12 is not in .*\(text near it: "Q: What is 6·7\?\\nA: "\)/,
    );
    const s = hacrl(['sft', '--out', join(root, 'x'), '--lr', '-1']);
    assert.notEqual(s.status, 0);
    assert.match(s.stderr, /sft options is invalid:[\s\S]*lr/);
  });
});
