/**
 * Runs the matrix of `hacrl bench paper`, skipping runs whose result file exists (so a stopped bench continues where it
 * was), then writes the Markdown tables and the HTML report of every method (means over seeds). One run at a time in this process, or
 * with `jobs` > 1 that many child processes at once (each run is still one process; see `spawnRun`).
 * Learning rates come from a sweep on a validation split drawn apart from the test problems; the test split is
 * never looked at before every rate is fixed.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { performance } from 'node:perf_hooks';
import { buildGroupReport } from '../report/groups.js';
import { rowsPerAgent, type MetricRow } from '../report/run-data.js';
import { findLatestCheckpoint } from '../run/run-folder.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import type { Dataset } from '../tasks/problem.js';
import { trainRl } from '../train/rl-trainer.js';
import { writeFileAtomic, writeJsonAtomic } from '../util/atomic-write.js';
import { mean } from '../util/stats.js';
import { ensurePair, type ZooAgent } from '../zoo/build.js';
import { pairRecipe, ZOO, type PairName } from '../zoo/recipes.js';
import { measureCheckpoint } from './measure.js';
import { CHOSEN_VARIANT, planRuns, sweptMethods, type BenchPlan, type PlannedRun } from './paper-matrix.js';
import { renderTables, type RunResult, type TableContext } from './paper-table.js';
import { zooRunConfig } from './run-config.js';

/** Seed of the held-out draws (validation and test share one stream, so they are disjoint). */
export const HELD_OUT_SEED = 99;

/** Where and how the bench runs. */
export interface PaperBenchOptions {
  plan: BenchPlan;
  /** Output folder: runs/, results/, results.md, report.html. */
  out: string;
  zooDir: string;
  /** Header lines of results.md (command, commit, machine). */
  header: string[];
  log: (line: string) => void;
  /** Runs at once; default 1 (in this process). Above 1 each run is a child process started by `spawnRun`. */
  jobs?: number;
  /** Starts one run by id in a child process (which calls `runOneOfPlan`); resolves when the child has ended. */
  spawnRun?: (id: string) => Promise<void>;
  /** Only the sweep phase: writes validation.md (per method, rate and agent) instead of the tables and report. */
  sweepOnly?: boolean;
}

/**
 * The held-out splits of a pair: validation and test from one draw (disjoint), and two out-of-distribution splits:
 * 'ood' (one more digit per operand, where every agent scores about 0%) and 'ood-mild' (an operand with a leading
 * zero: same length, never drawn in training).
 */
export async function heldOut(plan: Pick<BenchPlan, 'validationN' | 'testN'>, pair: PairName) {
  const d = pairRecipe(pair).data;
  const inDist = await loadDataSpec(`${d.task}:test:${plan.validationN + plan.testN}:${HELD_OUT_SEED}`);
  const ood = await loadDataSpec(`${d.task}:ood:${plan.testN}:${HELD_OUT_SEED}`);
  const oodMild = await loadDataSpec(`${d.task}:ood-mild:${plan.testN}:${HELD_OUT_SEED}`);
  const split = (name: string, problems: Dataset['problems']): Dataset => ({ name, problems });
  return {
    validation: split('validation', inDist.problems.slice(0, plan.validationN)),
    test: split('test', inDist.problems.slice(plan.validationN)),
    ood: split('ood', ood.problems),
    oodMild: split('ood-mild', oodMild.problems),
  };
}

/** The learning rate a test run uses: the best candidate of its method's sweep (ties: the smaller rate). */
export function chosenLr(results: readonly RunResult[], plan: BenchPlan, run: PlannedRun): number {
  const from = run.method.lrFrom ?? run.method.name;
  const scores = plan.lrCandidates.map((lr) => {
    const r = results.find(
      (x) => x.phase === 'sweep' && x.pair === run.pair && x.method === from && x.agent === run.agent && x.lr === lr,
    );
    if (r === undefined) throw new Error(`no sweep result for ${run.pair}/${from} at lr ${lr}: the sweep runs first`);
    const accs = Object.values(r.correct).map((s) => mean(s.validation!));
    return { lr, acc: mean(accs) };
  });
  return scores.reduce((best, s) => (s.acc > best.acc ? s : best)).lr;
}

/** Statistics averaged over steps as they are logged: the in-band fraction of the form that trains, of the per-token
 * form (Eq. 11) and of the per-character form (hacpo.ratioNormalization), and P̂. */
const MEANS = ['foreign_in_band_frac', 'foreign_in_band_frac_token', 'foreign_in_band_frac_char', 'p_hat'] as const;

/**
 * Means over steps of a run's logged statistics per agent, from its metrics.jsonl: each finite value of a metric that
 * `name` maps to a name (null: left out) counts towards that name's mean; `names` are always present (NaN when none
 * was logged).
 */
export async function stepMeans(
  runDir: string,
  names: readonly string[],
  name: (metric: string) => string | null,
): Promise<Record<string, Record<string, number>>> {
  const rows = (await readFile(join(runDir, 'metrics.jsonl'), 'utf8'))
    .split('\n')
    .filter((l) => l.trim() !== '')
    .flatMap((l) => rowsPerAgent(JSON.parse(l) as MetricRow));
  const out: Record<string, Record<string, number[]>> = {};
  for (const r of rows) {
    if (r.agent === undefined) continue; // run-level fields (memory)
    const a = (out[String(r.agent)] ??= Object.fromEntries(names.map((k) => [k, [] as number[]])));
    for (const [k, v] of Object.entries(r)) {
      const to = typeof v === 'number' && Number.isFinite(v) ? name(k) : null;
      if (to !== null) (a[to] ??= []).push(v as number);
    }
  }
  return Object.fromEntries(
    Object.entries(out).map(([agent, m]) => [
      agent,
      Object.fromEntries(Object.entries(m).map(([k, v]) => [k, v.length > 0 ? mean(v) : NaN])),
    ]),
  );
}

/** Means over steps of the mechanisms' statistics per agent, from a run's metrics.jsonl. */
const mechanisms = (runDir: string) =>
  stepMeans(runDir, [...MEANS, 'omega'], (k) =>
    (MEANS as readonly string[]).includes(k) ? k : k.startsWith('omega_') ? 'omega' : null,
  );

/** Trains (unless base) and measures one planned run. */
async function execute(
  run: PlannedRun,
  lr: number | null,
  agents: ZooAgent[],
  o: PaperBenchOptions,
  splits: Awaited<ReturnType<typeof heldOut>>,
): Promise<RunResult> {
  const started = performance.now();
  const data = pairRecipe(run.pair).data;
  const measured = run.phase === 'sweep' ? [splits.validation] : [splits.test, splits.ood, splits.oodMild];
  const trained = run.agent === null ? agents : agents.filter((a) => a.name === run.agent);
  const correct: RunResult['correct'] = {};
  let mech: RunResult['mechanisms'] = {};
  let dirs = trained.map((a) => ({ name: a.name, dir: a.dir }));
  if (run.method.kind !== 'base') {
    const runDir = join(o.out, 'runs', run.id);
    // A run stopped part-way restarts from scratch: only finished runs (with a result file) are kept.
    await rm(runDir, { recursive: true, force: true });
    const cfg = zooRunConfig({
      agents: trained,
      data,
      steps: o.plan.steps,
      prompts: o.plan.prompts,
      ...(run.method.name === 'gspo-x2' ? {} : { groupSize: o.plan.groupSize }),
      lr: lr!,
      seed: run.seed,
      runDir,
      method: run.method.config,
    });
    await trainRl(cfg, { resume: false, progress: () => undefined });
    const last = await findLatestCheckpoint(runDir);
    if (last === null) throw new Error(`${run.id}: the run wrote no checkpoint`);
    dirs = trained.map((a) => ({ name: a.name, dir: join(last.dir, 'agents', a.name) }));
    if (run.method.kind === 'pair') mech = await mechanisms(runDir);
  }
  for (const a of dirs) {
    const m = await measureCheckpoint(a.dir, measured, data);
    correct[a.name] = Object.fromEntries(measured.map((s, i) => [s.name, m[i]!.correct]));
  }
  return {
    id: run.id,
    phase: run.phase,
    pair: run.pair,
    method: run.method.name,
    agent: run.agent,
    seed: run.seed,
    lr,
    correct,
    mechanisms: mech,
    seconds: (performance.now() - started) / 1e3,
  };
}

/** Where a run's result is written; its existence marks the run finished. */
const resultPath = (out: string, id: string) => join(out, 'results', `${id}.json`);

/** The learning rate a run trains with: its own (sweep), the sweep's choice (test), none (base). */
function resolvedLr(results: readonly RunResult[], plan: BenchPlan, run: PlannedRun): number | null {
  return run.method.kind === 'base' ? null : (run.lr ?? chosenLr(results, plan, run));
}

/** Calls `work` on every item, at most `jobs` at once; the first failure stops new starts and is thrown at the end. */
async function inParallel<T>(items: readonly T[], jobs: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: unknown = null;
  const lane = async () => {
    while (failure === null && next < items.length) {
      const item = items[next++]!;
      try {
        await work(item);
      } catch (e) {
        failure ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, items.length) }, lane));
  if (failure !== null) throw failure;
}

/**
 * Trains and measures the run `id` of the plan and writes its result file: the work of one child process of
 * `--jobs`. The zoo pair must be built (the parent builds it before starting children).
 */
export async function runOneOfPlan(o: PaperBenchOptions, id: string): Promise<void> {
  const planned = planRuns(o.plan, (pair) => ZOO[pair].agents.map((a) => a.name));
  const run = planned.find((r) => r.id === id);
  if (run === undefined) throw new Error(`no run "${id}" in the ${o.plan.mode} plan`);
  const agents = await ensurePair(ZOO[run.pair], o.zooDir, o.log);
  const lr = resolvedLr(await readResults(o.out, o.plan, planned, null), o.plan, run);
  const result = await execute(run, lr, agents, o, await heldOut(o.plan, run.pair));
  await writeJsonAtomic(resultPath(o.out, run.id), result);
}

/** The shape of a result file (NaN means are written as null by JSON). */
const RunResultSchema = z.object({
  id: z.string(),
  phase: z.enum(['sweep', 'test']),
  pair: z.string(),
  method: z.string(),
  agent: z.string().nullable(),
  seed: z.number().int(),
  lr: z.number().positive().nullable(),
  correct: z.record(z.string(), z.record(z.string(), z.array(z.union([z.literal(0), z.literal(1)])))),
  mechanisms: z.record(z.string(), z.record(z.string(), z.number().nullable())),
  seconds: z.number().nonnegative(),
});

/**
 * Why the result file `file` cannot be the result of a run of this plan, or null when it can: it must be JSON of the
 * result schema, its id its file name and a run of the plan, with that run's phase, pair, method, agent, seed and
 * (sweep) rate, and 0/1 per problem of each measured split for each agent it trained.
 */
function resultProblem(text: string, file: string, plan: BenchPlan, runs: readonly PlannedRun[]): string | null {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    return `not JSON (${(e as Error).message})`;
  }
  const parsed = RunResultSchema.safeParse(json);
  if (!parsed.success)
    return `not a result: ${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`;
  const r = parsed.data;
  if (`${r.id}.json` !== file) return `it holds the result of run "${r.id}"`;
  const run = runs.find((x) => x.id === r.id);
  if (run === undefined) return `no run "${r.id}" in the ${plan.mode} plan`;
  const want = { phase: run.phase, pair: run.pair, method: run.method.name, agent: run.agent, seed: run.seed };
  for (const [key, value] of Object.entries(want))
    if (r[key as keyof typeof want] !== value)
      return `its ${key} is ${String(r[key as keyof typeof want])}, not ${value}`;
  if (run.phase === 'sweep' && r.lr !== run.lr) return `its lr is ${r.lr}, not ${run.lr}`;
  if (Object.keys(r.correct).length === 0 || (run.agent !== null && !(run.agent in r.correct)))
    return `it has no answers of agent ${run.agent ?? '(any)'}`;
  const sizes: Record<string, number> =
    run.phase === 'sweep'
      ? { validation: plan.validationN }
      : { test: plan.testN, ood: plan.testN, 'ood-mild': plan.testN };
  for (const [agent, splits] of Object.entries(r.correct))
    for (const [split, n] of Object.entries(sizes))
      if (splits[split]?.length !== n)
        return `agent ${agent} has ${splits[split]?.length ?? 0} ${split} answers, not ${n}`;
  return null;
}

/**
 * The result files in `<out>/results` of runs of this plan, each checked (resultProblem). A damaged one is never used
 * or overwritten: with `log`, it is moved to `<out>/results/damaged/` and named (its run is then done again); without
 * (a child of --jobs, after the parent's check), it is an error.
 */
async function readResults(
  out: string,
  plan: BenchPlan,
  runs: readonly PlannedRun[],
  log: ((line: string) => void) | null,
): Promise<RunResult[]> {
  const dir = join(out, 'results');
  if (!existsSync(dir)) return [];
  const files = (await readdir(dir)).filter((f) => f.endsWith('.json')).sort();
  const results: RunResult[] = [];
  for (const f of files) {
    const path = join(dir, f);
    const text = await readFile(path, 'utf8');
    const problem = resultProblem(text, f, plan, runs);
    if (problem === null) {
      results.push(JSON.parse(text) as RunResult);
      continue;
    }
    if (log === null) throw new Error(`bench paper: ${path} is damaged (${problem})`);
    const aside = join(dir, 'damaged', `${f}.${Date.now()}`);
    await mkdir(join(dir, 'damaged'), { recursive: true });
    await rename(path, aside);
    log(`bench paper: ${path} is damaged (${problem}); moved to ${aside}, its run is done again`);
  }
  return results;
}

/** The result the child of --jobs wrote for `id`, checked like those read at the start. */
async function readChildResult(out: string, plan: BenchPlan, runs: readonly PlannedRun[], id: string) {
  const path = resultPath(out, id);
  const text = await readFile(path, 'utf8');
  const problem = resultProblem(text, `${id}.json`, plan, runs);
  if (problem !== null) throw new Error(`bench paper: ${path}, written by the run's process, is damaged (${problem})`);
  return JSON.parse(text) as RunResult;
}

/**
 * Runs the bench (skipping finished runs) and writes results.md and report.html, or with `sweepOnly` the sweep and
 * validation.md; returns the Markdown path and the report's (null with `sweepOnly` or when no run trains).
 */
export async function runPaperBench(o: PaperBenchOptions): Promise<{ markdown: string; report: string | null }> {
  const { plan } = o;
  const zoo = new Map<PairName, ZooAgent[]>();
  for (const pair of plan.pairs) zoo.set(pair, await ensurePair(ZOO[pair], o.zooDir, o.log));
  const planned = planRuns(plan, (pair) => zoo.get(pair)!.map((a) => a.name));
  const runs = o.sweepOnly ? planned.filter((r) => r.phase === 'sweep') : planned;
  const results = await readResults(o.out, plan, planned, o.log);
  const done = new Set(results.map((r) => r.id));
  const todo = runs.filter((r) => !done.has(r.id));
  o.log(`bench paper (${plan.mode}): ${runs.length} runs, ${runs.length - todo.length} already finished`);
  const splits = new Map<PairName, Awaited<ReturnType<typeof heldOut>>>();
  const started = performance.now();
  await mkdir(join(o.out, 'results'), { recursive: true });
  const jobs = o.jobs ?? 1;
  if (jobs > 1 && o.spawnRun === undefined) throw new Error('jobs > 1 needs spawnRun');
  let finished = 0;
  const one = async (run: PlannedRun) => {
    let result: RunResult;
    if (jobs > 1) {
      await o.spawnRun!(run.id);
      result = await readChildResult(o.out, plan, runs, run.id);
    } else {
      if (!splits.has(run.pair)) splits.set(run.pair, await heldOut(plan, run.pair));
      result = await execute(run, resolvedLr(results, plan, run), zoo.get(run.pair)!, o, splits.get(run.pair)!);
      await writeJsonAtomic(resultPath(o.out, run.id), result);
    }
    results.push(result);
    finished += 1;
    const perRun = (performance.now() - started) / 1e3 / finished;
    o.log(
      `[${runs.length - todo.length + finished}/${runs.length}] ${run.id}` +
        `${result.lr === null ? '' : ` lr ${result.lr}`} done in ${result.seconds.toFixed(0)} s; ` +
        `ETA ${Math.round(perRun * (todo.length - finished))} s`,
    );
  };
  // Every sweep run ends before the first test run starts: test runs take their rate from the sweep.
  for (const phase of ['sweep', 'test'] as const)
    await inParallel(
      todo.filter((r) => r.phase === phase),
      jobs,
      one,
    );
  if (o.sweepOnly) {
    const markdown = join(o.out, 'validation.md');
    await writeFileAtomic(markdown, validationTable(results, o.header));
    return { markdown, report: null };
  }

  const sweep: TableContext['sweep'] = [];
  for (const pair of plan.pairs)
    for (const m of sweptMethods(plan.methods))
      for (const agent of m.kind === 'solo' ? zoo.get(pair)!.map((a) => a.name) : [null]) {
        const probe: PlannedRun = { id: '', phase: 'test', pair, method: m, agent, seed: 0, lr: null };
        const tried = Object.fromEntries(
          results
            .filter((r) => r.phase === 'sweep' && r.pair === pair && r.method === m.name && r.agent === agent)
            .map((r) => [String(r.lr), mean(Object.values(r.correct).map((s) => mean(s.validation!)))]),
        );
        sweep.push({ pair, method: m.name, agent, chosen: chosenLr(results, plan, probe), tried });
      }
  const markdown = join(o.out, 'results.md');
  await writeFileAtomic(
    markdown,
    renderTables(results, {
      pairs: plan.pairs.map((p) => ({ name: p, agents: zoo.get(p)!.map((a) => a.name) })),
      methods: plan.methods.map((m) => ({ name: m.name, budget: m.budget })),
      splits: [
        { key: 'test', label: `in-distribution (n = ${plan.testN})` },
        { key: 'ood', label: `out-of-distribution: one more digit per operand (n = ${plan.testN})` },
        { key: 'ood-mild', label: `out-of-distribution, mild: an operand with a leading zero (n = ${plan.testN})` },
      ],
      sweep,
      header: o.header,
      pairedBases: ['hacpo', ...plan.methods.filter((m) => m.name === CHOSEN_VARIANT).map((m) => m.name)],
    }),
  );
  // Every method, one line per pair, method and agent: the mean over seeds.
  const groups = new Map<string, string[]>();
  for (const r of runs.filter((x) => x.phase === 'test' && x.method.kind !== 'base')) {
    const label = `${r.pair} · ${r.method.name}`;
    groups.set(label, [...(groups.get(label) ?? []), join(o.out, 'runs', r.id)]);
  }
  // `--methods base` trains nothing: there are no runs to report.
  if (groups.size === 0) return { markdown, report: null };
  const report = join(o.out, 'report.html');
  await writeFileAtomic(report, await buildGroupReport([...groups].map(([label, dirs]) => ({ label, dirs }))));
  return { markdown, report };
}

/** The sweep's validation accuracy per pair, method, rate and agent (%, n = the validation split), as Markdown. */
export function validationTable(results: readonly RunResult[], header: readonly string[]): string {
  const lines = [
    ...header,
    '',
    '| pair | method | lr | agent | validation accuracy |',
    '| --- | --- | --- | --- | --- |',
  ];
  const sweep = results
    .filter((r) => r.phase === 'sweep')
    .sort((a, b) => `${a.pair} ${a.method}`.localeCompare(`${b.pair} ${b.method}`) || a.lr! - b.lr!);
  for (const r of sweep)
    for (const [agent, splits] of Object.entries(r.correct))
      lines.push(`| ${r.pair} | ${r.method} | ${r.lr} | ${agent} | ${(100 * mean(splits.validation!)).toFixed(1)} |`);
  return lines.join('\n') + '\n';
}
