/**
 * `hacrl bench staleness`: HACPO against naive sharing as the partners' rollouts age. For each method (hacpo, naive),
 * staleness k and seed, the zoo's size pair trains with partners k steps stale (staleness-pair.ts) and each agent's
 * greedy accuracy on the held-out in-distribution problems of `bench paper` is measured after the last step; the
 * tables pair the runs by seed and problem. Each finished run leaves a result file, so a stopped bench continues.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { reproducibleMode } from '../backend/select.js';
import { closeDefaultPool } from '../rewards/worker-pool.js';
import { findLatestCheckpoint } from '../run/run-folder.js';
import { writeFileAtomic, writeJsonAtomic } from '../util/atomic-write.js';
import { refuseOverlap } from '../util/output-paths.js';
import { accuracyOverSeeds, formatDifference, mean, seedPairedDifference, type Difference } from '../util/stats.js';
import { defaultZooDir, ensurePair, type ZooAgent } from '../zoo/build.js';
import { pairRecipe, ZOO, type PairName } from '../zoo/recipes.js';
import { measureCheckpoint } from './measure.js';
import { methodOf } from './paper-matrix.js';
import { heldOut, stepMeans } from './paper-run.js';
import { commit } from './paper.js';
import { zooRunConfig } from './run-config.js';
import { trainStalePair } from './staleness-pair.js';

/** The methods compared: HACPO, and naive sharing (partners' rollouts used as if they were the learner's own). */
export const STALENESS_METHODS = ['hacpo', 'naive'] as const;

/** Sizes of the staleness bench. */
export interface StalenessPlan {
  mode: 'full' | 'test';
  pair: PairName;
  /** Partner staleness k in steps, the first one the reference of the "against k = first" differences. */
  lags: number[];
  seeds: number[];
  /** RL steps per run, prompts per step (B) and responses per prompt (G). */
  steps: number;
  prompts: number;
  groupSize: number;
  /** The learning rate of every run (bench paper's sweep chose 1e-4 for both methods on the size pair at 20 steps). */
  lr: number;
  /** bench paper's held-out draw: the first validationN problems are its validation split, the next testN its test. */
  validationN: number;
  testN: number;
}

/**
 * The full plan (the size pair, k 0, 2, 4, seeds 1–5, 20 steps of bench paper --fast's B 16 × G 8, so that 16 of
 * the 20 steps see partner data at k = 4; its 2,000 test problems) or the test-sized one (tiny pair, 1 seed, 2 steps).
 */
export function stalenessPlan(mode: StalenessPlan['mode']): StalenessPlan {
  if (mode === 'test')
    return {
      mode,
      pair: 'tiny',
      lags: [0, 2, 4],
      seeds: [1],
      steps: 2,
      prompts: 2,
      groupSize: 2,
      lr: 1e-3,
      validationN: 4,
      testN: 6,
    };
  return {
    mode,
    pair: 'size',
    lags: [0, 2, 4],
    seeds: [1, 2, 3, 4, 5],
    steps: 20,
    prompts: 16,
    groupSize: 8,
    lr: 1e-4,
    validationN: 300,
    testN: 2000,
  };
}

/** One run of the matrix. */
export interface StaleRun {
  /** `<method>-k<lag>-s<seed>`. */
  id: string;
  method: (typeof STALENESS_METHODS)[number];
  lag: number;
  seed: number;
}

/** Every run, seed by seed (a stopped bench has whole seeds to pair first). */
export function staleRuns(plan: StalenessPlan): StaleRun[] {
  return plan.seeds.flatMap((seed) =>
    plan.lags.flatMap((lag) =>
      STALENESS_METHODS.map((method) => ({ id: `${method}-k${lag}-s${seed}`, method, lag, seed })),
    ),
  );
}

/** What a finished run leaves in `results/<id>.json`. */
export interface StaleResult extends StaleRun {
  /** Per agent: 1/0 per held-out test problem, in the split's order. */
  correct: Record<string, number[]>;
  /** Per agent: means over steps of the mechanisms' statistics (MECHANISMS). */
  mechanisms: Record<string, Record<string, number>>;
  /** Wall-clock seconds (training and measuring). */
  seconds: number;
}

/**
 * The statistics averaged over steps per agent: the foreign in-band fraction and the foreign ratio's mean, smallest
 * and largest (Eq. 11), foreign samples trained on, the learner's P̂ and the baseline's fallback groups; and from the
 * stale exchange (k ≥ 1) the partner steps taken per step, their age and the P̂ of the partner version taken.
 */
export const MECHANISMS = [
  'foreign_in_band_frac',
  'foreign_ratio_mean',
  'foreign_ratio_min',
  'foreign_ratio_max',
  'foreign_samples',
  'p_hat',
  'baseline_fallback_groups',
  'partner_steps',
  'partner_age_mean',
  'partner_p_hat',
] as const;

/** A metric's MECHANISMS name (a partner's `partner_<name>_x` as `partner_x`), or null. */
function mechanismName(metric: string): string | null {
  const m = /^partner_.+_(steps|age_mean|p_hat)$/.exec(metric);
  const name = m ? `partner_${m[1]}` : metric;
  return (MECHANISMS as readonly string[]).includes(name) ? name : null;
}

/** Where a run's result is written; its existence marks the run finished. */
const resultPath = (out: string, id: string) => join(out, 'results', `${id}.json`);

/** Trains and measures one run. */
async function execute(
  run: StaleRun,
  plan: StalenessPlan,
  out: string,
  agents: ZooAgent[],
  test: Awaited<ReturnType<typeof heldOut>>['test'],
): Promise<StaleResult> {
  const started = performance.now();
  const data = pairRecipe(plan.pair).data;
  const runDir = join(out, 'runs', run.id);
  // A run stopped part-way starts again from scratch: only finished runs (with a result file) are kept.
  await rm(runDir, { recursive: true, force: true });
  const cfg = zooRunConfig({
    agents,
    data,
    steps: plan.steps,
    prompts: plan.prompts,
    groupSize: plan.groupSize,
    lr: plan.lr,
    seed: run.seed,
    runDir,
    method: methodOf(run.method).config,
  });
  await trainStalePair(cfg, run.lag, () => undefined);
  const correct: StaleResult['correct'] = {};
  const mechanisms: StaleResult['mechanisms'] = {};
  for (const a of agents) {
    const dir = join(runDir, a.name);
    const last = await findLatestCheckpoint(dir);
    if (last === null) throw new Error(`${run.id}: agent ${a.name} wrote no checkpoint`);
    const [m] = await measureCheckpoint(join(last.dir, 'agents', a.name), [test], data);
    correct[a.name] = m!.correct;
    Object.assign(mechanisms, await stepMeans(dir, MECHANISMS, mechanismName));
  }
  return { ...run, correct, mechanisms, seconds: (performance.now() - started) / 1e3 };
}

/**
 * The finished results in `<out>/results` of runs of this plan; a damaged one is named and its run done again (over
 * it), a result of a seed outside the plan left out.
 */
async function readResults(out: string, plan: StalenessPlan, log: (line: string) => void): Promise<StaleResult[]> {
  const dir = join(out, 'results');
  if (!existsSync(dir)) return [];
  const runs = new Map(staleRuns(plan).map((r) => [`${r.id}.json`, r]));
  const results: StaleResult[] = [];
  for (const f of (await readdir(dir)).filter((x) => x.endsWith('.json')).sort()) {
    const run = runs.get(f);
    // Another seed's result (a bench of other --seeds in the same folder) is kept for that bench, not used here.
    if (run === undefined) continue;
    let r: Partial<StaleResult> | null = null;
    try {
      r = JSON.parse(await readFile(join(dir, f), 'utf8')) as Partial<StaleResult>;
    } catch {
      // not JSON: done again below
    }
    const answers = Object.values(r?.correct ?? {});
    const ok =
      r !== null &&
      r.id === run.id &&
      r.lag === run.lag &&
      r.method === run.method &&
      r.seed === run.seed &&
      answers.length === 2 &&
      answers.every((a) => Array.isArray(a) && a.length === plan.testN);
    if (ok) results.push(r as StaleResult);
    else log(`bench staleness: ${join(dir, f)} is not a finished run of this plan; its run is done again`);
  }
  return results;
}

/** Where and how the bench runs. */
export interface StalenessBenchOptions {
  plan: StalenessPlan;
  /** Output folder: runs/, results/, results.json, results.md. */
  out: string;
  zooDir: string;
  /** Header lines of results.md (command, commit, machine). */
  header: string[];
  log: (line: string) => void;
}

/** Runs the bench (skipping finished runs), writes results.json and results.md; returns the Markdown's path. */
export async function runStalenessBench(o: StalenessBenchOptions): Promise<string> {
  const { plan } = o;
  const zoo = await ensurePair(ZOO[plan.pair], o.zooDir, o.log);
  const agents = zoo.map((a) => a.name);
  const runs = staleRuns(plan);
  const results = await readResults(o.out, plan, o.log);
  const done = new Set(results.map((r) => r.id));
  const todo = runs.filter((r) => !done.has(r.id));
  o.log(`bench staleness (${plan.mode}): ${runs.length} runs, ${runs.length - todo.length} already finished`);
  const { test } = await heldOut(plan, plan.pair);
  const started = performance.now();
  await mkdir(join(o.out, 'results'), { recursive: true });
  for (const [i, run] of todo.entries()) {
    const result = await execute(run, plan, o.out, zoo, test);
    await writeJsonAtomic(resultPath(o.out, run.id), result);
    results.push(result);
    const perRun = (performance.now() - started) / 1e3 / (i + 1);
    o.log(
      `[${runs.length - todo.length + i + 1}/${runs.length}] ${run.id} done in ${result.seconds.toFixed(0)} s; ` +
        `ETA ${Math.round(perRun * (todo.length - i - 1))} s`,
    );
  }
  const seconds = (performance.now() - started) / 1e3;
  const tables = stalenessTables(results, plan, agents);
  await writeJsonAtomic(join(o.out, 'results.json'), {
    header: o.header,
    plan,
    wallSeconds: seconds,
    ...tables.json,
    runs: results.map(({ correct, ...r }) => ({
      ...r,
      accuracy: Object.fromEntries(Object.entries(correct).map(([a, c]) => [a, mean(c)])),
    })),
  });
  const markdown = join(o.out, 'results.md');
  const spent = results.reduce((t, r) => t + r.seconds, 0);
  const timing =
    `Wall time: ${Math.round(spent)} s for the ${results.length} runs tabled (each run's own, summed); this ` +
    `invocation ${Math.round(seconds)} s for ${todo.length} runs.`;
  await writeFileAtomic(markdown, [...o.header, timing, '', tables.markdown].join('\n'));
  return markdown;
}

/** The runs of `method` at `lag`, by seed. */
const cellRuns = (results: readonly StaleResult[], method: string, lag: number) =>
  results.filter((r) => r.method === method && r.lag === lag).sort((a, b) => a.seed - b.seed);

/** `after − before` for `agent`, paired by seed (the seeds both have) and problem; null without a common seed. */
function paired(before: StaleResult[], after: StaleResult[], agent: string): (Difference & { seeds: number }) | null {
  const seeds = before.map((r) => r.seed).filter((s) => after.some((r) => r.seed === s));
  if (seeds.length === 0) return null;
  return seedPairedDifference(
    seeds.map((s) => ({
      before: before.find((r) => r.seed === s)!.correct[agent]!,
      after: after.find((r) => r.seed === s)!.correct[agent]!,
    })),
  );
}

const pts = (x: number) => (100 * x).toFixed(1);
const fmt = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(3));

/**
 * The tables: accuracy per agent, method and k (mean over seeds, 95% interval); hacpo − naive at each k and each
 * method's k against its first k (paired by seed and problem); the mechanisms per method and k (means over seeds).
 */
export function stalenessTables(
  results: readonly StaleResult[],
  plan: StalenessPlan,
  agents: readonly string[],
): { markdown: string; json: Record<string, unknown> } {
  const accuracy: Record<string, unknown>[] = [];
  const differences: Record<string, unknown>[] = [];
  const lines: string[] = [
    `### Greedy accuracy after step ${plan.steps}, in-distribution (n = ${plan.testN}; mean over seeds, 95% interval)`,
    '',
    `| agent | ${plan.lags.flatMap((k) => STALENESS_METHODS.map((m) => `${m} k=${k}`)).join(' | ')} |`,
    `| --- | ${plan.lags.flatMap(() => STALENESS_METHODS.map(() => '---')).join(' | ')} |`,
  ];
  for (const agent of agents) {
    const cells = plan.lags.flatMap((lag) =>
      STALENESS_METHODS.map((method) => {
        const per = cellRuns(results, method, lag).map((r) => r.correct[agent]!);
        if (per.length === 0) return '—';
        const m = accuracyOverSeeds(per);
        accuracy.push({ agent, method, lag, ...m });
        return `${pts(m.mean)} [${pts(m.low)}, ${pts(m.high)}] (${m.seeds})`;
      }),
    );
    lines.push(`| ${agent} | ${cells.join(' | ')} |`);
  }
  const reference = plan.lags[0]!;
  const later = plan.lags.slice(1);
  const cols = [
    ...plan.lags.map((k) => ({ label: `hacpo − naive, k=${k}`, key: { what: 'hacpo-naive', lag: k } })),
    ...STALENESS_METHODS.flatMap((m) =>
      later.map((k) => ({ label: `${m} k=${k} − k=${reference}`, key: { what: `${m}-lag`, lag: k } })),
    ),
  ];
  const diff = (what: string, lag: number, agent: string) =>
    what === 'hacpo-naive'
      ? paired(cellRuns(results, 'naive', lag), cellRuns(results, 'hacpo', lag), agent)
      : paired(cellRuns(results, what.slice(0, -4), reference), cellRuns(results, what.slice(0, -4), lag), agent);
  lines.push(
    '',
    '### Paired differences (points; same problems and seeds; t interval over seeds, or over problems with one seed)',
    '',
    `| agent | ${cols.map((c) => c.label).join(' | ')} |`,
    `| --- | ${cols.map(() => '---').join(' | ')} |`,
  );
  for (const agent of agents) {
    const cells = cols.map((c) => {
      const d = diff(c.key.what, c.key.lag, agent);
      if (d === null) return '—';
      differences.push({ agent, ...c.key, ...d });
      return `${formatDifference(d)} (${d.seeds})`;
    });
    lines.push(`| ${agent} | ${cells.join(' | ')} |`);
  }
  lines.push(
    '',
    '### Mechanisms (means over steps, then over seeds)',
    '',
    `| method | k | agent | ${MECHANISMS.join(' | ')} |`,
    `| --- | --- | --- | ${MECHANISMS.map(() => '---').join(' | ')} |`,
  );
  const mechanisms: Record<string, unknown>[] = [];
  for (const method of STALENESS_METHODS)
    for (const lag of plan.lags)
      for (const agent of agents) {
        const runs = cellRuns(results, method, lag);
        if (runs.length === 0) continue;
        const means = Object.fromEntries(
          MECHANISMS.map((k) => {
            const v = runs.map((r) => r.mechanisms[agent]?.[k]).filter((x): x is number => Number.isFinite(x));
            return [k, v.length > 0 ? mean(v) : NaN];
          }),
        );
        mechanisms.push({ method, lag, agent, ...means });
        lines.push(`| ${method} | ${lag} | ${agent} | ${MECHANISMS.map((k) => fmt(means[k])).join(' | ')} |`);
      }
  return { markdown: lines.join('\n') + '\n', json: { accuracy, differences, mechanisms } };
}

/** Options of `hacrl bench staleness`. */
export interface BenchStalenessCliOptions {
  /** Test-sized: the tiny pair, 1 seed, 2 steps (seconds). */
  test?: boolean;
  /** Seeds instead of the plan's (default 1–5). */
  seeds?: number[];
  /** Output folder; default runs/bench-staleness (runs/bench-staleness-test with --test). */
  out?: string;
  /** Zoo folder; default $HACRL_ZOO_DIR or runs/zoo. */
  zooDir?: string;
}

/** `hacrl bench staleness`: the matrix, resumable, with progress and an ETA. */
export async function runBenchStaleness(o: BenchStalenessCliOptions): Promise<void> {
  const plan = stalenessPlan(o.test ? 'test' : 'full');
  if (o.seeds !== undefined) {
    if (o.seeds.length === 0 || o.seeds.some((s) => !(Number.isInteger(s) && s >= 1)))
      throw new Error(`--seeds must be positive integers, got ${o.seeds.join(',')}`);
    plan.seeds = o.seeds;
  }
  const out = o.out ?? (o.test ? 'runs/bench-staleness-test' : 'runs/bench-staleness');
  const zooDir = o.zooDir ?? defaultZooDir();
  await refuseOverlap({ flag: '--out', path: out }, [{ flag: '--zoo-dir', path: zooDir }]);
  const cpu = cpus();
  const flags = [...(o.test ? ['--test'] : []), ...(o.seeds ? ['--seeds', o.seeds.join(',')] : [])];
  const header = [
    `## hacrl bench staleness${o.test ? ' --test' : ''}`,
    '',
    `Command: \`hacrl bench staleness ${[...flags, '--out', out].join(' ')}\`; commit ${commit()}; ` +
      `${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}; 1-minute load ${loadavg()[0]!.toFixed(1)} at the start; ` +
      `${reproducibleMode().on ? 'reproducible kernels (the same numbers on any CPU)' : 'fast kernels (--fast-kernels)'}.`,
    `Pair ${plan.pair}; methods ${STALENESS_METHODS.join(', ')}; staleness k ${plan.lags.join(', ')} steps; seeds ` +
      `${plan.seeds.join(', ')}; ${plan.steps} steps of B = ${plan.prompts} prompts × G = ${plan.groupSize}; lr ` +
      `${plan.lr}; ${plan.testN} held-out test problems (bench paper's in-distribution split).`,
  ];
  try {
    const markdown = await runStalenessBench({ plan, out, zooDir, header, log: (line) => console.log(line) });
    console.log(`tables: ${markdown}`);
  } finally {
    await closeDefaultPool();
  }
}
