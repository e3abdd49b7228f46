// `hacrl bench mas` never deletes what it did not create, and a bad --json fails before the bench runs, not after;
// the full size's families, their per-family warm starts and the band every warm start stops in, and token budgets
// that hold every solver answer.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { SOKOBAN_BENCH } from '../src/envs/sokoban.js';
import { BENCH_FAST, BENCH_FULL } from '../src/experiments/mas-sizes.js';
import { BenchMasSchema, benchAgent } from '../src/experiments/mas-options.js';
import { buildWorkflow } from '../src/workflows/registry.js';
import { startEpisode } from '../src/workflows/workflow.js';
import { hacrl } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-bench-mas-dir-'));
after(() => rm(root, { recursive: true, force: true }));

describe('bench mas and its folders', () => {
  test('a work folder holding files the bench did not write is refused, and left as it was', async () => {
    const work = join(root, 'work');
    await mkdir(join(work, 'plan-path', 'seed-0'), { recursive: true });
    await writeFile(join(work, 'plan-path', 'precious.txt'), 'mine');
    const r = hacrl(['bench', 'mas', '--tiny', '--seeds', '1', '--only', 'plan-path', '--work-dir', work]);
    assert.notEqual(r.status, 0);
    assert.match(
      r.stderr,
      /bench mas: .*plan-path holds files that bench mas did not write .*choose another --work-dir/,
    );
    assert.equal(await readFile(join(work, 'plan-path', 'precious.txt'), 'utf8'), 'mine');
    assert.ok(existsSync(join(work, 'plan-path', 'seed-0')));
  });

  test('a finished arm is read back, not trained again; more seeds train only the new ones', async () => {
    const work = join(root, 'resume');
    let stdout = '';
    const run = (seeds: string, ...more: string[]) => {
      const r = hacrl(['bench', 'mas', '--tiny', '--seeds', seeds, '--only', 'plan-path', '--work-dir', work, ...more]);
      assert.equal(r.status, 0, r.stderr);
      stdout = r.stdout;
      return r.stdout.split('\n').filter((l) => / seed \d+ /.test(l));
    };
    const first = run('1');
    // What decides the rounding comes first: the CPU, the kernels and the thread count.
    assert.match(stdout.split('\n')[0]!, /^bench mas: .+ \(.+\); (native|typescript) kernels, .+; HACRL_THREADS=\S+$/);
    // Both warm starts miss the band twice (--tiny's attempts); the table says so, and so does the cached copy.
    const tries =
      /\| plan-path \| (workflow|single) \| 2 \| 20\.0–40\.0 \| .* below \(attempt [12] of 2: below [\d.]+%, below [\d.]+%\)/g;
    assert.equal(stdout.match(tries)?.length, 2, stdout);
    assert.equal(first.length, 3, 'three trained arms');
    assert.ok(first.every((l) => !l.endsWith('(cached)')));
    const second = run('2');
    assert.equal(stdout.match(new RegExp(`${tries.source} \\(cached\\)`, 'g'))?.length, 2, stdout);
    assert.deepEqual(
      second.filter((l) => l.includes(' seed 0 ')),
      first.map((l) => `${l} (cached)`),
    );
    assert.equal(second.filter((l) => l.includes(' seed 1 ') && !l.endsWith('(cached)')).length, 3);
    // --first-seed takes seeds from there on: seed 1 alone, read back, and its table names it.
    const alone = run('1', '--first-seed', '1');
    assert.deepEqual(
      alone,
      second.filter((l) => l.includes(' seed 1 ')).map((l) => `${l} (cached)`),
    );
    assert.match(stdout, /\| per seed \(1\) \|/);
    // A result stored under another key (another config or build) is trained again, to the same result.
    const file = join(work, 'plan-path', 'seed-0', 'at-grpo-shared', 'arm-result.json');
    const stored = JSON.parse(await readFile(file, 'utf8')) as { key: string };
    await writeFile(file, JSON.stringify({ ...stored, key: stored.key.replace('"steps":1', '"steps":2') }));
    const third = run('1');
    const shared = first.find((l) => l.includes('at-grpo-shared'))!;
    assert.ok(third.includes(shared), 'retrained, same result');
    assert.ok(third.filter((l) => l !== shared).every((l) => l.endsWith('(cached)')));
  });

  test('--work-dir naming a file, or a path under one, is refused clearly before the bench runs', async () => {
    const file = join(root, 'a-file');
    await writeFile(file, 'not a folder');
    for (const [dir, why] of [
      [file, 'is a file, not a folder'],
      [join(file, 'below'), 'lies under a file, not a folder'],
    ] as const) {
      const r = hacrl(['bench', 'mas', '--tiny', '--seeds', '1', '--only', 'plan-path', '--work-dir', dir]);
      assert.notEqual(r.status, 0);
      assert.ok(r.stderr.includes(`bench mas: --work-dir ${dir} ${why}; give a folder`), r.stderr);
      assert.doesNotMatch(r.stderr, /ENOTDIR/);
      assert.equal(r.stdout, '', 'nothing ran');
    }
  });

  test('--json naming a folder fails before the bench runs', async () => {
    const r = hacrl(['bench', 'mas', '--tiny', '--seeds', '1', '--work-dir', join(root, 'w2'), '--json', root]);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /--json .*: .*\(EISDIR\)/);
    assert.equal(r.stdout, '', 'nothing ran');
  });

  test('--only names environments of the size, comma-separated', () => {
    const r = hacrl(['bench', 'mas', '--tiny', '--only', 'plan-path,chess', '--work-dir', join(root, 'w3')]);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /--only chess: not one of this size's environments \(plan-path, math-tool\)/);
  });

  test('--ablations with a list names ablations, before any work', () => {
    const work = join(root, 'w4');
    const r = hacrl(['bench', 'mas', '--tiny', '--ablations', 'no-tree,grouping', '--work-dir', work]);
    assert.notEqual(r.status, 0);
    assert.match(
      r.stderr,
      /--ablations grouping: not one of grouping-agent, grouping-turn, no-tree, group-filter-flipped/,
    );
    assert.equal(existsSync(work), false);
  });

  test("the full size's five families; coding's own warm start replaces only the fields it names", () => {
    const o = BenchMasSchema.parse({ ...BENCH_FULL, workDir: 'x' });
    assert.deepEqual(
      o.workflows.map((w) => w['name']),
      ['plan-path', 'sudoku', 'sokoban', 'coding', 'math-tool'],
    );
    assert.deepEqual(o.workflows[2]!['env'], { ...SOKOBAN_BENCH, moves: 'letters' }, 'Sokoban moves as letters');
    const coding = benchAgent(o, 'coding');
    const planPath = benchAgent(o, 'plan-path');
    const math = benchAgent(o, 'math-tool');
    assert.deepEqual(
      [coding.warmStart.steps, coding.warmStart.rows, coding.warmStart.detour, coding.warmStart.detourLastTurn],
      [1500, 24_000, 0.5, undefined],
    );
    assert.deepEqual(o.workflows[3]!['agents'], ['coder', 'tester'], 'the coder first');
    assert.deepEqual(
      [planPath.warmStart.steps, planPath.warmStart.rows, planPath.warmStart.detour],
      [3000, 48_000, 0.5],
    );
    assert.deepEqual(math.warmStart, planPath.warmStart, "math-tool's is the bench's");
    // Every family's warm start stops in the same band, checked on 100 calibration instances every 100 steps, tried
    // up to 3 times.
    const band = { low: 0.2, high: 0.4, every: 100, refine: 4, instances: 100, attempts: 3 };
    for (const w of o.workflows) assert.deepEqual(benchAgent(o, w['name'] as string).warmStart.band, band);
    assert.deepEqual(coding.agent, planPath.agent, 'the same agent');
    assert.equal(coding.agent.hidden, 64);
    const bad = BenchMasSchema.parse({
      ...BENCH_FULL,
      workDir: 'x',
      perWorkflow: { coding: { warmStart: { steps: -1 } } },
    });
    assert.throws(() => benchAgent(bad, 'coding'), /perWorkflow\.coding\.warmStart/);
  });

  test("full and --fast: every role's token budget holds its solver answers (the bench's agents spell a character a token)", () => {
    for (const size of [BENCH_FULL, BENCH_FAST])
      for (const config of size.workflows) {
        const wf = buildWorkflow(config);
        for (let seed = 0; seed < 40; seed++)
          for (const role of wf.roles) {
            const answer = role.expert(startEpisode(wf, seed));
            // One token more for the end of the answer.
            if (answer !== null)
              assert.ok(answer.length < role.sampling.maxNewTokens, `${wf.name} ${role.name} seed ${seed}: ${answer}`);
          }
      }
    const sokoban = buildWorkflow(BENCH_FULL.workflows[2]!);
    const program = sokoban.roles[0]!.expert(startEpisode(sokoban, 0))!;
    assert.match(program, /^console\.log\(solve\(`#/, "the full size's Sokoban tool writes a program");
    const sudoku = buildWorkflow(BENCH_FULL.workflows[1]!);
    const givens = sudoku.roles[0]!.expert(startEpisode(sudoku, 0))!;
    assert.match(givens, /^console\.log\(solve\(`[1-4.]{4}\n/, "the full size's Sudoku tool writes a program");
  });
});
