// `hacrl bench paper` in its test-sized form (tiny pair, 2 seeds, 1 step): the whole matrix runs, a second start
// skips every finished run, and the tables' statistics match hand-worked values.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  BASELINE_CANDIDATES,
  benchPlan,
  CHOSEN_VARIANT,
  METHODS,
  methodOf,
  overridePlan,
  planRuns,
} from '../src/experiments/paper-matrix.js';
import { chosenLr, heldOut, validationTable } from '../src/experiments/paper-run.js';
import { pairedCell, renderTables, type RunResult } from '../src/experiments/paper-table.js';
import { seedMean } from '../src/util/stats.js';
import randomReward from '../src/experiments/random-reward.js';
import { hacrl } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-bench-paper-'));
after(() => rm(root, { recursive: true, force: true }));

const result = (o: Partial<RunResult>): RunResult => ({
  id: 'x',
  phase: 'test',
  pair: 'size',
  method: 'hacpo',
  agent: null,
  seed: 1,
  lr: 1e-4,
  correct: {},
  mechanisms: {},
  seconds: 0,
  ...o,
});

describe('bench paper: plan and statistics', () => {
  test('the matrix: sweep runs first (seed 0), base once per pair, solo methods once per agent', () => {
    const plan = benchPlan('fast');
    const runs = planRuns(plan, () => ['small', 'large']);
    const firstTest = runs.findIndex((r) => r.phase === 'test');
    assert.ok(runs.slice(0, firstTest).every((r) => r.phase === 'sweep' && r.seed === 0));
    assert.ok(runs.slice(firstTest).every((r) => r.phase === 'test' && plan.seeds.includes(r.seed)));
    // Swept: grpo, gspo, gspo-x2 per agent, naive, hacpo and the chosen baseline variant per pair → (3·2 + 3) · 3.
    assert.equal(firstTest, 9 * plan.lrCandidates.length);
    assert.equal(runs.filter((r) => r.method.name === 'base').length, 1);
    // Per seed: 3 solo methods × 2 agents + 12 pair methods (naive, hacpo, 7 ablations, the per-character ratio,
    // random reward, the chosen variant).
    assert.equal(runs.length - firstTest - 1, plan.seeds.length * (3 * 2 + 12));
    assert.equal(METHODS.at(-1)!.name, CHOSEN_VARIANT);
    assert.equal(new Set(runs.map((r) => r.id)).size, runs.length, 'ids are unique');
    assert.equal(methodOf('hacpo-alpha0').lrFrom, 'hacpo');
    assert.throws(() => methodOf('hacpo-alpha9'), /unknown method "hacpo-alpha9"/);
  });

  test('overrides: one pair, named methods (candidates too), steps and seeds; a borrowed rate needs its lender', () => {
    const fast = benchPlan('fast');
    const plan = overridePlan(fast, { only: 'state', methods: ['hacpo', 'hacpo-blend'], steps: 3, seeds: [4] }, [
      'state',
      'size',
    ]);
    assert.deepEqual(
      [plan.pairs, plan.methods.map((m) => m.name), plan.steps, plan.seeds],
      [['state'], ['hacpo', 'hacpo-blend'], 3, [4]],
    );
    assert.equal(fast.steps, 10, 'the mode plan is not changed');
    assert.deepEqual(methodOf('hacpo-blend').config, { algorithm: 'hacpo', hacpo: { baseline: 'blend' } });
    assert.ok(BASELINE_CANDIDATES.every((m) => m.lrFrom === undefined && m.kind === 'pair'));
    // hacpo, the two sweeps of hacpo-blend's rates × 3 rates: 6 sweep runs, then one test run each on seed 4.
    const runs = planRuns(plan, () => ['early', 'late']);
    assert.deepEqual(
      runs.map((r) => r.id).filter((id) => id.startsWith('test')),
      ['test-state-hacpo-s4', 'test-state-hacpo-blend-s4'],
    );
    assert.equal(runs.filter((r) => r.phase === 'sweep').length, 6);
    assert.throws(() => overridePlan(fast, { methods: ['hacpo-alpha0'] }, ['size']), /add hacpo to the list/);
    assert.throws(() => overridePlan(fast, { only: 'huge' }, ['size']), /unknown pair "huge"/);
    assert.throws(() => overridePlan(fast, { seeds: [0] }, ['size']), /seed 0 is the sweep/);
    assert.throws(() => overridePlan(fast, { methods: ['nope'] }, ['size']), /unknown method "nope"/);
    const sweep = (method: string, lr: number, a: number[], b: number[]): RunResult => ({
      id: `sweep-${method}-${lr}`,
      phase: 'sweep',
      pair: 'state',
      method,
      agent: null,
      seed: 0,
      lr,
      correct: { early: { validation: a }, late: { validation: b } },
      mechanisms: {},
      seconds: 1,
    });
    const md = validationTable(
      [sweep('hacpo', 1e-4, [1, 0, 0, 0], [1, 1, 0, 0]), sweep('hacpo', 1e-5, [0, 0], [1, 1])],
      ['# head'],
    );
    assert.deepEqual(md.split('\n').slice(4, 8), [
      '| state | hacpo | 0.00001 | early | 0.0 |',
      '| state | hacpo | 0.00001 | late | 100.0 |',
      '| state | hacpo | 0.0001 | early | 25.0 |',
      '| state | hacpo | 0.0001 | late | 50.0 |',
    ]);
  });

  test('validation and test problems are disjoint; the OOD splits hold 3-digit and leading-zero operands', async () => {
    const s = await heldOut(benchPlan('test'), 'tiny');
    const test = new Set(s.test.problems.map((p) => p.id));
    assert.ok(s.validation.problems.length > 0 && test.size > 0);
    assert.ok(s.validation.problems.every((p) => !test.has(p.id)));
    assert.equal(s.oodMild.problems.length, benchPlan('test').testN);
    assert.ok(s.ood.problems.every((p) => /^What is \d{3}[+-]\d{3}\?$/.test(p.prompt)));
    assert.ok(s.oodMild.problems.every((p) => /^What is (0\d[+-]\d\d|\d\d[+-]0\d)\?$/.test(p.prompt)));
  });

  test('the learning rate is the best validation accuracy of the method’s sweep (ties: the smaller)', () => {
    const plan = { ...benchPlan('test'), lrCandidates: [1e-5, 1e-4, 1e-3] };
    const sweep = (lr: number, acc: number[]) =>
      result({ phase: 'sweep', method: 'hacpo', lr, correct: { a: { validation: acc }, b: { validation: acc } } });
    const results = [sweep(1e-5, [0, 1]), sweep(1e-4, [1, 1]), sweep(1e-3, [1, 1])];
    const run = {
      id: '',
      phase: 'test' as const,
      pair: 'size' as const,
      method: methodOf('hacpo-alpha2'),
      agent: null,
      seed: 1,
      lr: null,
    };
    assert.equal(chosenLr(results, plan, run), 1e-4);
    assert.throws(() => chosenLr([], plan, run), /no sweep result for size\/hacpo/);
  });

  test('seed means use the t quantile; paired differences pair by seed and problem', () => {
    // values 0.2, 0.4, 0.6: mean 0.4, sd 0.2, half-width 4.303·0.2/√3.
    const m = seedMean([0.2, 0.4, 0.6], () => ({ low: 0, high: 1 }));
    assert.ok(Math.abs(m.mean - 0.4) < 1e-12 && Math.abs(m.high - 0.4 - (4.303 * 0.2) / Math.sqrt(3)) < 1e-12);
    const runs = [1, 2].flatMap((seed) => [
      result({ seed, method: 'hacpo', correct: { a: { test: seed === 1 ? [1, 1, 0, 0] : [1, 0, 0, 0] } } }),
      result({ seed, method: 'gspo', agent: 'a', correct: { a: { test: [1, 0, 0, 0] } } }),
    ]);
    const d = pairedCell(runs, 'size', 'a', 'test', 'gspo')!;
    // Per-seed differences 0.25 and 0: mean 0.125, sd 0.1768, half-width 12.706·0.1768/√2.
    assert.equal(d.seeds, 2);
    assert.ok(Math.abs(d.mean - 0.125) < 1e-12);
    assert.ok(Math.abs(d.high - d.mean - (12.706 * Math.sqrt(0.03125)) / Math.sqrt(2)) < 1e-9);
    assert.equal(pairedCell(runs, 'size', 'a', 'test', 'naive'), null);
  });

  test('the tables hold the seed means and paired differences of the per-problem results', () => {
    // HACPO: agent a right on [1,1,0,0] (seed 1) and [1,0,0,0] (seed 2) → 37.5; GSPO [1,0,0,0] both seeds → 25.0;
    // HACPO − GSPO per seed 0.25 and 0 → +12.5. Agent b only has HACPO runs: 75.0 and no difference.
    const results = [1, 2].flatMap((seed) => [
      result({
        id: `hacpo-${seed}`,
        seed,
        correct: { a: { test: seed === 1 ? [1, 1, 0, 0] : [1, 0, 0, 0] }, b: { test: [1, 1, 1, 0] } },
        mechanisms: { a: { p_hat: 0.25 + seed / 8 } },
      }),
      result({ seed, method: 'gspo', agent: 'a', correct: { a: { test: [1, 0, 0, 0] } } }),
      result({ phase: 'sweep', seed, method: 'gspo', agent: 'a', correct: { a: { test: [1, 1, 1, 1] } } }),
      // The variant: [1,1,1,0] and [1,1,0,0] → 62.5; − GSPO per seed 0.5 and 0.25 → +37.5; − HACPO 0.25 both.
      result({
        id: `v-${seed}`,
        seed,
        method: 'hacpo-per-question',
        correct: { a: { test: seed === 1 ? [1, 1, 1, 0] : [1, 1, 0, 0] } },
      }),
    ]);
    const md = renderTables(results, {
      pairs: [{ name: 'size', agents: ['a', 'b'] }],
      methods: [
        { name: 'hacpo', budget: 'B·G' },
        { name: 'gspo', budget: 'B·G' },
        { name: 'hacpo-per-question', budget: 'B·G' },
      ],
      splits: [{ key: 'test', label: 'test' }],
      sweep: [],
      header: ['# bench'],
      pairedBases: ['hacpo', 'hacpo-per-question'],
    });
    assert.match(
      md,
      /hacpo-per-question − gspo \| hacpo-per-question − gspo-x2 \| [^|]+ \| hacpo-per-question − hacpo \|/,
    );
    assert.match(md, /\| size \/ a \| test \| \+37\.5 \[[^\]]+\] \| — \| — \| \+25\.0 \[\+25\.0, \+25\.0\] \|/);
    // Sweep runs never enter a table (their 100% would show).
    assert.match(md, /\| size \/ a \| 37\.5 \[[^\]]+\] \| 25\.0 \[[^\]]+\] \|/);
    assert.match(md, /\| size \/ b \| 75\.0 \[[^\]]+\] \| — \|/);
    assert.match(md, /\| size \/ a \| test \| \+12\.5 \[[^\]]+\] \| — \| — \|/);
    assert.match(md, /\| size \/ b \| test \| — \| — \| — \|/);
    // One mechanisms row per pair, method and agent: P̂ 0.375 and 0.500 over the two seeds average to 0.4375.
    assert.match(md, /\| size \| hacpo \| a \| 2 \| — \| — \| — \| 0\.438 \| — \|/);
  });

  test('the random reward ignores the gold and is the same for the same sample', () => {
    const s = { prompt: '1+1', response: '\\boxed{2}', gold: '2' };
    assert.equal(randomReward(s), randomReward({ ...s, gold: '3' }));
    const rewards = Array.from({ length: 200 }, (_, i) => randomReward({ ...s, response: `\\boxed{${i}}` }));
    const ones = rewards.reduce((a, b) => a + b, 0);
    assert.ok(ones > 60 && ones < 140, `about half are 1: ${ones}`);
  });
});

describe('hacrl bench paper --test', () => {
  const out = join(root, 'bench');
  const zoo = join(root, 'zoo');
  test('runs the whole matrix, writes the tables and report, and a second start skips every finished run', async () => {
    // As many kernel threads as each child of --jobs 2 below gets, so the two must agree bit for bit.
    const threads = String(Math.max(1, Math.floor(availableParallelism() / 2)));
    const first = hacrl(['bench', 'paper', '--test', '--out', out, '--zoo-dir', zoo], { HACRL_THREADS: threads });
    assert.equal(first.status, 0, first.stderr);
    assert.match(first.stdout, /bench paper \(test\): (\d+) runs, 0 already finished/);
    assert.match(first.stdout, /ETA \d+ s/);
    const md = await readFile(join(out, 'results.md'), 'utf8');
    for (const m of METHODS) assert.ok(md.includes(`| ${m.name} |`) || md.includes(` ${m.name} `), m.name);
    assert.match(md, /\| tiny \/ small \| [\d.]+ \[[\d.]+, [\d.]+\] \|/);
    assert.match(md, /HACPO − gspo-x2/);
    assert.match(md, /\| tiny \| hacpo \| 0\.00\d+ \|/);
    assert.match(md, /out-of-distribution, mild: an operand with a leading zero \(n = 6\)/);
    const total = Number(/(\d+) runs, 0 already/.exec(first.stdout)![1]);
    const second = hacrl(['bench', 'paper', '--test', '--out', out, '--zoo-dir', zoo]);
    assert.equal(second.status, 0, second.stderr);
    assert.match(second.stdout, new RegExp(`${total} runs, ${total} already finished`));
    assert.doesNotMatch(second.stdout, /done in/);

    // --jobs 2: the same runs in child processes, two at a time, give the same results.
    const out2 = join(root, 'bench-jobs');
    const jobs = hacrl(['bench', 'paper', '--test', '--out', out2, '--zoo-dir', zoo, '--jobs', '2'], {
      HACRL_THREADS: undefined,
    });
    assert.equal(jobs.status, 0, jobs.stderr);
    assert.match(await readFile(join(out2, 'results.md'), 'utf8'), /--jobs 2` \(\d+ kernel threads? per run\)/);
    const files = await readdir(join(out, 'results'));
    assert.equal(files.length, total);
    for (const f of files) {
      const [a, b] = await Promise.all(
        [out, out2].map(async (d) => JSON.parse(await readFile(join(d, 'results', f), 'utf8'))),
      );
      assert.deepEqual([b.lr, b.correct, b.mechanisms], [a.lr, a.correct, a.mechanisms], f);
    }
  });

  test("damaged results (truncated, not a result, another run's) are named, moved aside and run again", async () => {
    const dir = join(out, 'results');
    const files = (await readdir(dir)).filter((f) => f.startsWith('test-')).sort();
    const [truncated, empty, other] = files.slice(0, 3) as [string, string, string];
    const kept = await readFile(join(dir, files[3]!), 'utf8');
    await writeFile(join(dir, truncated), (await readFile(join(dir, truncated), 'utf8')).slice(0, 40));
    await writeFile(join(dir, empty), '{}');
    await writeFile(join(dir, other), kept);
    const r = hacrl(['bench', 'paper', '--test', '--out', out, '--zoo-dir', zoo]);
    assert.equal(r.status, 0, r.stderr);
    for (const [f, why] of [
      [truncated, /not JSON/],
      [empty, /not a result: id/],
      [other, /it holds the result of run/],
    ] as const)
      assert.match(
        r.stdout,
        new RegExp(`${join(dir, f)} is damaged \\((${why.source}).*moved to ${join(dir, 'damaged')}`),
      );
    assert.equal(r.stdout.match(/done in/g)?.length, 3, 'the three runs are done again, no other');
    assert.equal((await readdir(join(dir, 'damaged'))).length, 3);
    for (const f of [truncated, empty, other])
      assert.equal((JSON.parse(await readFile(join(dir, f), 'utf8')) as RunResult).id, f.replace(/\.json$/, ''));
    assert.equal(await readFile(join(dir, files[3]!), 'utf8'), kept);
  });
});
