/**
 * `hacrl demo` (what `npm run demo` runs): HACPO on the zoo's size pair, end to end — build the pair if the zoo lacks
 * it, measure both agents, train them together for a fixed number of steps, measure again on the same problems, and
 * write the HTML report. Bounded by steps and seeds only, so every run on one machine prints the same numbers.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pairedDifference, formatDifference, type Difference } from '../util/stats.js';
import { measureCheckpoint } from './measure.js';
import { zooRunConfig } from './run-config.js';
import type { Estimate } from '../eval/evaluate.js';
import { buildReport } from '../report/build.js';
import { closeDefaultPool } from '../rewards/worker-pool.js';
import { findLatestCheckpoint } from '../run/run-folder.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import type { ProgressDisplay } from '../train/progress.js';
import { trainRl } from '../train/rl-trainer.js';
import { writeFileAtomic, writeJsonAtomic } from '../util/atomic-write.js';
import { refuseOverlap } from '../util/output-paths.js';
import { cpuSecondsSince, defaultZooDir, ensurePair, pct } from '../zoo/build.js';
import { pairRecipe } from '../zoo/recipes.js';
import { engine } from '../backend/engine.js';

/** Options of `hacrl demo`. */
export interface DemoOptions {
  /** Zoo pair to train: size (default), state, model, or tiny (test-sized). */
  pair: string;
  /** HACPO steps; default 20. */
  steps: number;
  /** Prompts per step; default 16. */
  prompts: number;
  /** Responses per prompt and agent; default 8. */
  groupSize: number;
  /** Peak learning rate of both agents; default 1e-4. */
  lr: number;
  /** Held-out problems per split (in-distribution test and the mild out-of-distribution `ood-mild`); default 500. */
  evalN: number;
  /** Seed of the run (data order, sampling) and of the held-out draws; default 1. */
  seed: number;
  /** Run folder; default runs/demo. Replaced by every run. */
  runDir: string;
  /** Zoo folder; default $HACRL_ZOO_DIR or runs/zoo. */
  zooDir?: string;
}

/** One agent's accuracy on one split before and after, and the paired change. */
export interface DemoRow {
  agent: string;
  split: string;
  before: Estimate;
  after: Estimate;
  change: Difference;
}

/** What the demo measured (also written to RUN_DIR/demo.json). */
export interface DemoResult {
  pair: string;
  rows: DemoRow[];
  report: string;
  runDir: string;
}

/**
 * Runs the demo and prints progress, the before/after table and the report's path; the training's status goes to
 * `display` when given (the CLI passes a live line for a terminal), else to `log`.
 */
export async function runDemo(
  o: DemoOptions,
  log: (line: string) => void = console.log,
  display?: ProgressDisplay,
): Promise<DemoResult> {
  const pair = pairRecipe(o.pair);
  // Checked before the zoo build and the first evaluation, which take minutes.
  if (!(o.lr > 0 && Number.isFinite(o.lr))) throw new Error(`--lr must be a positive number, got ${o.lr}`);
  const zooDir = o.zooDir ?? defaultZooDir();
  // The run folder is deleted before the run (by design: each demo starts afresh), so it must not hold the zoo.
  await refuseOverlap({ flag: '--run-dir', path: o.runDir }, [{ flag: '--zoo-dir', path: zooDir }]);
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  try {
    const k = engine();
    log(`demo: HACPO on the zoo's ${pair.name} pair (${pair.description}); zoo folder ${zooDir}`);
    log(`demo: ${k.name} backend, ${k.blas}`);
    const agents = await ensurePair(pair, zooDir, log);
    const d = pair.data;
    const splits = await Promise.all([
      loadDataSpec(`${d.task}:test:${o.evalN}:${o.seed}`),
      // The mild shift (an operand written with a leading zero, same length): the 3-digit split leaves every zoo
      // agent at 0-0.2%, so it could not show a change.
      loadDataSpec(`${d.task}:ood-mild:${o.evalN}:${o.seed}`),
    ]);
    const labels = ['in-distribution', 'ood-mild'];
    log(
      `demo: measuring both agents on ${o.evalN} held-out problems of the training distribution (${splits[0]!.name}) ` +
        `and ${o.evalN} out-of-distribution ones with a leading zero (${splits[1]!.name})`,
    );
    const before = [];
    for (const a of agents) before.push(await measureCheckpoint(a.dir, splits, d));

    const cfg = zooRunConfig({
      agents,
      data: d,
      steps: o.steps,
      prompts: o.prompts,
      groupSize: o.groupSize,
      lr: o.lr,
      seed: o.seed,
      runDir: o.runDir,
      method: { algorithm: 'hacpo' },
    });
    await rm(o.runDir, { recursive: true, force: true });
    log(`demo: ${o.steps} HACPO steps, ${o.prompts} prompts × ${o.groupSize} responses per agent per step, lr ${o.lr}`);
    await trainRl(cfg, { resume: false, progress: display ?? ((line) => log(`  ${line}`)) });
    const last = await findLatestCheckpoint(o.runDir);
    if (last === null) throw new Error(`the demo run wrote no checkpoint into ${o.runDir}`);

    const rows: DemoRow[] = [];
    for (const [i, a] of agents.entries()) {
      const after = await measureCheckpoint(join(last.dir, 'agents', a.name), splits, d);
      for (const [j, label] of labels.entries())
        rows.push({
          agent: a.name,
          split: label,
          before: before[i]![j]!.estimate,
          after: after[j]!.estimate,
          change: pairedDifference(before[i]![j]!.correct, after[j]!.correct),
        });
    }
    const report = join(o.runDir, 'report.html');
    const result: DemoResult = { pair: pair.name, rows, report, runDir: o.runDir };
    // demo.json first: the report leads with it.
    await writeJsonAtomic(join(o.runDir, 'demo.json'), result);
    await writeFileAtomic(report, await buildReport([o.runDir]));

    log('');
    log(`greedy accuracy, 95% intervals (n = ${o.evalN} per split; change: paired difference in points)`);
    for (const r of rows)
      log(
        `  ${r.agent.padEnd(6)} ${r.split.padEnd(20)} before ${pct(r.before).padEnd(20)} after ` +
          `${pct(r.after).padEnd(20)} change ${formatDifference(r.change)}`,
      );
    log(`report: ${report}`);
    log(
      `demo: ${((performance.now() - started) / 1e3).toFixed(0)} s wall, ${cpuSecondsSince(cpuStart).toFixed(0)} CPU s ` +
        `(user + system; a quiet machine needs at most the CPU time)`,
    );
    return result;
  } finally {
    await closeDefaultPool();
  }
}
