/**
 * `hacrl bench mas`: on each environment, five arms measured by greedy success on the same held-out instances — the
 * single agent (planner alone) warm-started on its own solver rows, untrained and trained with GRPO; the multi-agent
 * workflow warm-started on every role's solver rows, untrained and trained with AT-GRPO with a shared policy and with
 * per-role policies (both roles starting from the same weights). Both warm starts have the same size, steps and rows;
 * the trained arms get the same rollout budget per step, instances × roles (the single agent plays twice the
 * instances, as it has one role where the workflow has two); the responses they actually generate differ, since an
 * episode ends when solved, and are reported. Each trained arm is paired with the others per seed and instance, and
 * every arm's row shows its warm start's held-out success. With `ablations`, four variants of AT-GRPO shared (grouping
 * by agent only, by turn only, no-tree sampling, the group filter flipped) are paired with it.
 *
 * A warm start with a band stops at the first chunk of steps whose greedy success on calibration instances is inside
 * it (src/agents/warm-start-band.ts); its steps and calibration success are reported beside its held-out success.
 * Warm starts are cached in `<workDir>/warm-starts`, keyed by everything that decides their weights; every finished
 * arm's per-instance successes are kept in its run folder, keyed by its resolved run config, so an interrupted bench
 * (or one asked for more seeds) trains only what is missing.
 */
import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { engine } from '../backend/engine.js';
import { cpuFlags } from '../backend/cpu-features.js';
import type { Kernels } from '../backend/kernels.js';
import { parseWith } from '../util/json-file.js';
import { mean, seedPairedDifference, wilson, type Difference, type Estimate } from '../util/stats.js';
import { buildWorkflow } from '../workflows/registry.js';
import { parseWorkflowConfig } from '../workflows/workflow-config.js';
import {
  ARMS,
  TRAINED,
  UNTRAINED,
  VERSUS,
  ablationSection,
  cachedArm,
  seedArms,
  trainArm,
  type Arm,
} from './mas-arms.js';
import {
  ABLATIONS,
  BenchMasSchema,
  benchAgent,
  type Ablation,
  type BenchMasOptions,
  type BenchMasSettings,
} from './mas-options.js';
import { benchWarmStarts, type BenchWarmStarts, type WarmStartKind, type WarmStartReport } from './mas-warm-starts.js';

/**
 * One environment's result: per arm, successes pooled over seeds with the 95% Wilson interval (the untrained
 * workflow is one greedy evaluation, so its interval is over the held-out instances alone), and per seed; per trained
 * arm, its paired difference (same instances, per seed; t interval over seeds) against the untrained workflow and
 * against the single agent.
 */
export interface BenchMasResult {
  workflow: string;
  /** The RL seeds run, in the order of every arm's perSeed. */
  seeds: number[];
  /** Responses generated per training step by each trained arm, the mean over all steps and seeds. */
  responsesPerStep: Record<string, number>;
  /**
   * Per arm (the five, then the ablations when run; only the two untrained ones without seeds): pooled and per-seed
   * success, and the held-out success of the warm start it began from (the single agent's or the workflow's), so the
   * headroom is in sight.
   */
  arms: Record<(typeof UNTRAINED)[number], ArmResult> & Partial<Record<Arm | Ablation, ArmResult>>;
  /** Per trained arm: its difference from each other arm named (success-rate points as fractions). */
  paired: Record<string, Partial<Record<Arm, Difference & { seeds: number }>>>;
  /** Per ablation run: its difference from at-grpo-shared on the same instances and seeds. */
  ablations: Partial<Record<Ablation, Difference & { seeds: number }>>;
  /** What the group-filter-flipped ablation used: the low-mean ratio (0: off). */
  flippedLowMeanRatio?: number;
  /** The two warm starts: where each stopped, on calibration and on the held-out instances. */
  warmStarts: Record<WarmStartKind, WarmStartReport>;
}

/** One arm's success. */
export interface ArmResult {
  pooled: Estimate;
  perSeed: number[];
  /** Held-out greedy success of the arm's warm start (the same instances). */
  warmStart: number;
}

/** The file marking a folder that bench mas made, so that a later bench may clear what it wrote there. */
const MADE_HERE = '.hacrl-bench-mas';
/** What bench mas wrote into the folder of one environment before warm starts were cached: it is cleared. */
const WRITTEN_BEFORE = /^warm-(workflow|single)$/;

/**
 * Makes `<workDir>/<workflow>` ready: created (with the marker) when missing or empty; when bench mas made it, its
 * seed folders stay (each arm checks its own cached result) and the uncached warm-start folders of older versions are
 * removed; a folder with other content that bench mas did not make is refused, since the bench never deletes what it
 * did not create.
 */
async function prepareWorkflowDir(dir: string): Promise<void> {
  const entries: string[] = await readdir(dir).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return [];
    throw e;
  });
  if (entries.length > 0 && !entries.includes(MADE_HERE))
    throw new Error(
      `bench mas: ${dir} holds files that bench mas did not write (it has no ${MADE_HERE}); choose another ` +
        '--work-dir, or move that folder away',
    );
  for (const e of entries) if (WRITTEN_BEFORE.test(e)) await rm(join(dir, e), { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, MADE_HERE), 'made by hacrl bench mas: it reuses or replaces its seed-* folders here\n');
}

/** Refuses, before any work, a work folder that is a file or lies under one (the bench would fail on it later). */
async function checkWorkDir(dir: string): Promise<void> {
  const notFolder = (why: string): Error =>
    new Error(`bench mas: --work-dir ${dir} ${why}; give a folder (one that does not exist yet is made)`);
  const s = await stat(dir).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return null;
    throw e.code === 'ENOTDIR' ? notFolder('lies under a file, not a folder') : e;
  });
  if (s !== null && !s.isDirectory()) throw notFolder('is a file, not a folder');
}

/** Logs what decides the results' rounding, as the caches' keys hold it: CPU and its features, kernels, BLAS, threads. */
function logMachine(k: Kernels, log: (line: string) => void): void {
  const flags = cpuFlags();
  const features = ['avx2', 'avx512f', 'avx512_bf16', 'amx_tile'].filter((f) => flags.has(f)).join(', ');
  log(
    `bench mas: ${cpus()[0]?.model ?? 'unknown CPU'} (${features || 'no AVX2'}); ${k.name} kernels, ${k.blas}; ` +
      `HACRL_THREADS=${process.env['HACRL_THREADS'] ?? 'unset'}`,
  );
}

/** Runs the benchmark; `log` receives progress lines. */
export async function runBenchMas(raw: BenchMasOptions, log: (line: string) => void): Promise<BenchMasResult[]> {
  const o = parseWith(BenchMasSchema, raw, 'bench mas options');
  await checkWorkDir(o.workDir);
  const k = engine();
  logMachine(k, log);
  const chosen = o.ablations;
  // In ABLATIONS' order whatever the list's, so tables and JSON read alike.
  const ablations = chosen === true ? ABLATIONS : chosen === false ? [] : ABLATIONS.filter((a) => chosen.includes(a));
  const out: BenchMasResult[] = [];
  for (const section of o.workflows) out.push(await benchWorkflow(o, section, ablations, k, log));
  return out;
}

/** Per arm and seed: 1/0 per held-out instance. */
type Successes = Record<Arm | Ablation, number[][]>;

/** One environment, workflow section `section`: its warm starts, then every arm of every seed. */
async function benchWorkflow(
  o: BenchMasSettings,
  section: Record<string, unknown>,
  ablations: readonly Ablation[],
  k: Kernels,
  log: (line: string) => void,
): Promise<BenchMasResult> {
  const wf = buildWorkflow(section);
  const { agent, warmStart } = benchAgent(o, wf.name);
  const successes = Object.fromEntries([...ARMS, ...ablations].map((a) => [a, [] as number[][]])) as Successes;
  const responses: Record<string, number[]> = {};
  const sections = { workflow: section, single: { ...section, sampling: 'single', roles: {} } };
  await prepareWorkflowDir(join(o.workDir, wf.name));
  // Two warm starts per environment, same size, rows and rule: the workflow's (solver rows of every role) starts
  // both AT-GRPO arms, the single agent's (its own rows: no other role's turns in its prompts) starts single-grpo;
  // with a band each stops on its own calibration success, so both arms start in the same band. Seeds vary RL only
  // (instances, sampling). Greedy on the same held-out instances, the untrained results are the same for every seed.
  const warm = await benchWarmStarts(sections, { workDir: o.workDir, heldOut: o.heldOut, agent, warmStart }, k, log);
  const seeds = Array.from({ length: o.seeds }, (_, i) => o.firstSeed + i);
  for (const seed of seeds) {
    const dir = join(o.workDir, wf.name, `seed-${seed}`);
    await mkdir(dir, { recursive: true });
    successes['workflow-untrained'].push(warm.untrained.workflow);
    successes['single-untrained'].push(warm.untrained.single);
    for (const arm of seedArms(o, sections, warm.starts, ablations, seed, dir)) {
      const { vector, responsesPerStep, cached } = await cachedArm(arm.cfg, arm.agents, wf.name, k, o.keep, () =>
        trainArm(arm.cfg, arm.workflow, arm.agents, wf.name, k),
      );
      successes[arm.name].push(vector);
      (responses[arm.name] ??= []).push(responsesPerStep);
      log(
        `${wf.name} seed ${seed} ${arm.name}: held-out success ${mean(vector).toFixed(3)}${cached ? ' (cached)' : ''}`,
      );
    }
  }
  return benchResult(wf.name, section, seeds, ablations, successes, responses, warm);
}

/**
 * One environment's result from every arm's successes per seed (`successes`) and responses per step (`responses`):
 * pooled and per-seed success, the trained arms' paired differences and the ablations' against at-grpo-shared.
 */
function benchResult(
  workflow: string,
  section: Record<string, unknown>,
  seeds: number[],
  ablations: readonly Ablation[],
  successes: Successes,
  responses: Record<string, number[]>,
  warm: BenchWarmStarts,
): BenchMasResult {
  const { untrained } = warm;
  const arms = Object.fromEntries(
    (seeds.length === 0 ? UNTRAINED : [...ARMS, ...ablations]).map((a) => {
      // An untrained arm is one evaluation repeated per seed: its interval is over the instances once.
      const all = a.endsWith('-untrained')
        ? untrained[a.startsWith('single-') ? 'single' : 'workflow']
        : successes[a].flat();
      return [
        a,
        {
          pooled: wilson(
            all.reduce((x, y) => x + y, 0),
            all.length,
          ),
          perSeed: successes[a].map(mean),
          warmStart: mean(a.startsWith('single-') ? untrained.single : untrained.workflow),
        },
      ];
    }),
  ) as BenchMasResult['arms'];
  const versus = (arm: Arm | Ablation, other: Arm) =>
    seedPairedDifference(successes[arm].map((after, i) => ({ before: successes[other][i]!, after })));
  const paired = Object.fromEntries(
    (seeds.length === 0 ? [] : TRAINED).map((a) => [
      a,
      Object.fromEntries(VERSUS.filter((b) => b !== a).map((b) => [b, versus(a, b)])),
    ]),
  );
  const responsesPerStep = Object.fromEntries(Object.entries(responses).map(([a, v]) => [a, Math.round(mean(v))]));
  const flipped = ablations.includes('group-filter-flipped')
    ? parseWorkflowConfig(ablationSection('group-filter-flipped', section)).groupFilter.lowMeanRatio
    : undefined;
  return {
    workflow,
    seeds,
    responsesPerStep,
    arms,
    paired,
    ablations: Object.fromEntries(seeds.length === 0 ? [] : ablations.map((a) => [a, versus(a, 'at-grpo-shared')])),
    ...(flipped === undefined ? {} : { flippedLowMeanRatio: flipped }),
    warmStarts: warm.reports,
  };
}
