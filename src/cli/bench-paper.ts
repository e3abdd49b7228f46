import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { closeDefaultPool } from '../rewards/worker-pool.js';
import { benchPlan, type BenchPlan } from '../bench/paper-matrix.js';
import { runPaperBench } from '../bench/paper-run.js';
import { defaultZooDir } from '../zoo/build.js';

/** Options of `hacrl bench paper`. */
export interface BenchPaperCliOptions {
  /** One pair (size), 3 seeds, 10 steps. */
  fast?: boolean;
  /** Test-sized: the tiny pair, 2 seeds, 1 step, a handful of problems (seconds; for CI). */
  test?: boolean;
  /** Output folder; default runs/bench-paper-<mode>. */
  out?: string;
  /** Zoo folder; default $HACRL_ZOO_DIR or runs/zoo. */
  zooDir?: string;
}

/** The commit the bench runs at, or 'unknown' outside a git checkout. */
function commit(): string {
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
  const plan = benchPlan(mode);
  const out = o.out ?? `runs/bench-paper-${mode}`;
  const cpu = cpus();
  const header = [
    `## hacrl bench paper${mode === 'full' ? '' : ` --${mode}`}`,
    '',
    `Command: \`hacrl bench paper${mode === 'full' ? '' : ` --${mode}`} --out ${out}\`; commit ${commit()}; ` +
      `${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}; 1-minute load ${loadavg()[0]!.toFixed(1)} at the start.`,
    `Pairs ${plan.pairs.join(', ')}; seeds ${plan.seeds.join(', ')}; ${plan.steps} steps of B = ${plan.prompts} prompts ` +
      `× G = ${plan.groupSize}; learning rates swept over ${plan.lrCandidates.join(', ')} on ${plan.validationN} ` +
      `validation problems (seed 0 runs); ${plan.testN} test problems per split.`,
  ];
  try {
    const { markdown, report } = await runPaperBench({
      plan,
      out,
      zooDir: o.zooDir ?? defaultZooDir(),
      header,
      log: (line) => console.log(line),
    });
    console.log(`tables: ${markdown}\nreport: ${report}`);
  } finally {
    await closeDefaultPool();
  }
}
