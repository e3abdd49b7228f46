import { execFileSync, spawn } from 'node:child_process';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { reproducibleMode } from '../backend/select.js';
import { closeDefaultPool } from '../rewards/worker-pool.js';
import { benchPlan, overridePlan, type BenchPlan, type PlanOverrides } from './paper-matrix.js';
import { runOneOfPlan, runPaperBench } from './paper-run.js';
import { defaultZooDir } from '../zoo/build.js';
import { ZOO, type PairName } from '../zoo/recipes.js';
import { refuseOverlap } from '../util/output-paths.js';

/** Options of `hacrl bench paper`. */
export interface BenchPaperCliOptions extends PlanOverrides {
  /** Only the learning-rate sweep (validation split): writes validation.md, never measures the test splits. */
  sweepOnly?: boolean;
  /** One pair (size), 3 seeds, 10 steps. */
  fast?: boolean;
  /** Test-sized: the tiny pair, 2 seeds, 1 step, a handful of problems (seconds; for CI). */
  test?: boolean;
  /** Output folder; default runs/bench-paper-<mode>. */
  out?: string;
  /** Zoo folder; default $HACRL_ZOO_DIR or runs/zoo. */
  zooDir?: string;
  /**
   * Runs at once, each a child process with (cores / jobs) kernel threads; default 1 (one run at a time, in this
   * process). The bench's small agents run faster on one thread than on two, so `--jobs 2` on 2 cores nearly halves
   * the wall time; with the fast kernels results then come from 1-thread kernels, whose sums may differ in the last
   * bits from 2 threads (the reproducible mode's do not).
   */
  jobs?: number;
  /** Internal: run only this run id and write its result (what each child of --jobs does). */
  runOne?: string;
}

/** Starts `hacrl bench paper … --run-one ID` in a child process with `threads` kernel threads. */
function spawnChild(flags: string[], threads: number) {
  return (id: string) =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(process.execPath, [process.argv[1]!, 'bench', 'paper', ...flags, '--run-one', id], {
        stdio: ['ignore', 'ignore', 'inherit'],
        env: { ...process.env, HACRL_THREADS: String(threads) },
      });
      child.on('error', reject);
      child.on('exit', (code, signal) =>
        code === 0 ? resolve() : reject(new Error(`bench run ${id} failed (${signal ?? `exit ${code}`})`)),
      );
    });
}

/** The commit the bench runs at, or 'unknown' outside a git checkout. */
export function commit(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: 'pipe' }).trim();
  } catch {
    return 'unknown';
  }
}

/** `hacrl bench paper`: the miniature Table 1 with ablations, resumable, with progress and an ETA. */
export async function runBenchPaper(o: BenchPaperCliOptions): Promise<void> {
  if (o.fast && o.test) throw new Error('choose one of --fast and --test');
  const mode: BenchPlan['mode'] = o.test ? 'test' : o.fast ? 'fast' : 'full';
  const plan = overridePlan(benchPlan(mode), o, Object.keys(ZOO) as PairName[]);
  // A run's id names its pair, method, seed and rate but not its steps: a finished run of other steps must not be
  // taken for one of these.
  if (o.steps !== undefined && o.out === undefined) throw new Error('--steps changes every run: give --out too');
  const out = o.out ?? `runs/bench-paper-${mode}`;
  const zooDir = o.zooDir ?? defaultZooDir();
  // An existing --out is how a bench resumes, so only an overlap with the zoo it reads is refused.
  await refuseOverlap({ flag: '--out', path: out }, [{ flag: '--zoo-dir', path: zooDir }]);
  const jobs = o.jobs ?? 1;
  if (o.runOne !== undefined) {
    await runOneOfPlan({ plan, out, zooDir, header: [], log: () => undefined }, o.runOne).finally(closeDefaultPool);
    return;
  }
  const threads = Math.max(1, Math.floor(availableParallelism() / jobs));
  const modeFlag = [
    ...(mode === 'full' ? [] : [`--${mode}`]),
    ...(o.only === undefined ? [] : ['--only', o.only]),
    ...(o.methods === undefined ? [] : ['--methods', o.methods.join(',')]),
    ...(o.steps === undefined ? [] : ['--steps', String(o.steps)]),
    ...(o.seeds === undefined ? [] : ['--seeds', o.seeds.join(',')]),
  ];
  const cpu = cpus();
  const header = [
    `## hacrl bench paper${mode === 'full' ? '' : ` --${mode}`}`,
    '',
    `Command: \`hacrl bench paper ${[...modeFlag, ...(o.sweepOnly ? ['--sweep-only'] : [])].join(' ')} --out ${out}` +
      `${jobs > 1 ? ` --jobs ${jobs}\` (${threads} kernel thread${threads > 1 ? 's' : ''} per run)` : '`'}; ` +
      `commit ${commit()}; ` +
      `${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}; 1-minute load ${loadavg()[0]!.toFixed(1)} at the start; ` +
      `${reproducibleMode().on ? 'reproducible kernels (the same numbers on any CPU)' : 'fast kernels (--fast-kernels)'}.`,
    `Pairs ${plan.pairs.join(', ')}; seeds ${plan.seeds.join(', ')}; ${plan.steps} steps of B = ${plan.prompts} prompts ` +
      `× G = ${plan.groupSize}; learning rates swept over ${plan.lrCandidates.join(', ')} on ${plan.validationN} ` +
      `validation problems (seed 0 runs); ${plan.testN} test problems per split.`,
  ];
  try {
    const { markdown, report } = await runPaperBench({
      plan,
      out,
      zooDir,
      header,
      log: (line) => console.log(line),
      jobs,
      spawnRun: spawnChild([...modeFlag, '--out', out, '--zoo-dir', zooDir], threads),
      sweepOnly: o.sweepOnly,
    });
    console.log(`${o.sweepOnly ? 'validation' : 'tables'}: ${markdown}${report === null ? '' : `\nreport: ${report}`}`);
  } finally {
    await closeDefaultPool();
  }
}
