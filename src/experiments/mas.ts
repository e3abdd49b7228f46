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
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { ADVANTAGE_ESTIMATOR_NAMES } from '../algorithms/advantages.js';
import type { Kernels } from '../backend/kernels.js';
import { engine } from '../backend/engine.js';
import { cpuFlags } from '../backend/cpu-features.js';
import { parseRunConfig } from '../config/load-config.js';
import type { RunConfig } from '../config/rl-config.js';
import {
  formatDifference,
  formatPoints,
  mean,
  seedPairedDifference,
  wilson,
  type Difference,
  type Estimate,
} from '../util/stats.js';
import { loadPretrained, savePretrained } from '../model/pretrained.js';
import { findLatestCheckpoint } from '../run/run-folder.js';
import { AgentSpecSchema, type AgentSpec } from '../model/agent-spec.js';
import { trainRl } from '../train/rl-trainer.js';
import { WarmStartSchema, workflowAgent, type WarmStart } from '../agents/workflow-agent.js';
import type { AttemptedBandOutcome, BandOutcome } from '../agents/warm-start-band.js';
import { agentKey } from '../run/metric-names.js';
import { playHeldOut, successRate } from '../workflows/play.js';
import { parseWith } from '../util/json-file.js';
import { Rng } from '../util/rng.js';
import { modelPolicy } from '../workflows/model-policy.js';
import { buildWorkflow } from '../workflows/registry.js';
import { DEFAULT_GROUP_FILTER } from '../workflows/group-filter.js';
import { parseWorkflowConfig } from '../workflows/workflow-config.js';
import type { Workflow } from '../workflows/workflow.js';

/**
 * The ablation arms (`--ablations`): AT-GRPO shared with one thing changed — workflow.grouping 'agent' (turns pooled)
 * or 'turn' (roles pooled), sampling 'no-tree', or the group filter flipped (off when the environment's section has it
 * on, else the spec's 0.5): each is paired with at-grpo-shared.
 */
export const ABLATIONS = ['grouping-agent', 'grouping-turn', 'no-tree', 'group-filter-flipped'] as const;
/** An ablation arm's name. */
export type Ablation = (typeof ABLATIONS)[number];
/** Whether `name` is one of ABLATIONS. */
export const isAblation = (name: string): name is Ablation => (ABLATIONS as readonly string[]).includes(name);

/** Options of `hacrl bench mas`. */
export const BenchMasSchema = z
  .object({
    /** Workflow sections, one per environment; default Plan-Path 5×5 and Sudoku 4×4 with few blanks. */
    workflows: z.array(z.record(z.string(), z.unknown())).min(1),
    /**
     * Seeds (each: its own training instances, sampling and mini-batch order); 0 builds (or reads) the warm starts and
     * plays them on the held-out instances, no RL — where a warm start lands on this machine; default 3, at most 100.
     */
    seeds: z.number().int().min(0, '--seeds is at least 0').max(100, '--seeds is at most 100').default(3),
    /**
     * The first RL seed: the bench trains seeds firstSeed … firstSeed + seeds − 1, so processes sharing one work folder
     * can each take other seeds (after one has built the warm starts) and a later run reads them all back; default 0.
     */
    firstSeed: z
      .number()
      .int()
      .min(0, '--first-seed is at least 0')
      .max(10_000, '--first-seed is at most 10000')
      .default(0),
    /** RL steps of every trained arm; default 10, at most 100000. */
    steps: z.number().int().positive().max(100_000, '--steps is at most 100000'),
    /** Instances per step of the workflow arms (the single agent plays twice as many); default 4, at most 2048. */
    instancesPerStep: z.number().int().positive().max(2048, 'instancesPerStep is at most 2048').default(4),
    /** Held-out instances per seed (greedy, one episode each); default 50, at most 10000. */
    heldOut: z.number().int().positive().max(10_000, 'heldOut is at most 10000').default(50),
    /** Learning rate of the RL arms; default 1e-3. */
    lr: z.number().positive().default(1e-3),
    /** Advantage scaling of the RL arms (optim.advantage); default 'group-std', the spec's (r − mean)/(std + 1e-6). */
    advantage: z.enum(ADVANTAGE_ESTIMATOR_NAMES).default('group-std'),
    agent: AgentSpecSchema.prefault({}),
    warmStart: WarmStartSchema.prefault({}),
    /**
     * Per workflow name: fields of `agent` and `warmStart` that replace the bench's for that environment (a family
     * whose warm start was sized on its own calibration instances); default none.
     */
    perWorkflow: z
      .record(
        z.string(),
        z
          .object({
            agent: z.record(z.string(), z.unknown()).default({}),
            warmStart: z.record(z.string(), z.unknown()).default({}),
          })
          .strict(),
      )
      .default({}),
    /**
     * Also train ablations of AT-GRPO (shared policy, each paired with at-grpo-shared on the same instances): true for
     * all of ABLATIONS (grouping by agent only, by turn only, no-tree sampling, the group filter flipped), or a list of
     * them; default false (none).
     */
    ablations: z.union([z.boolean(), z.array(z.enum(ABLATIONS)).min(1)]).default(false),
    /**
     * Working folder (agents and runs); at the end each run's metrics.jsonl and resolved config stay, and the warm
     * starts in `warm-starts/` (the cache).
     */
    workDir: z.string().min(1),
    /** Keep every run's checkpoints and samples too (warm starts stay in `<workDir>/warm-starts`); default false. */
    keep: z.boolean().default(false),
  })
  .strict();
/** Options as passed. */
export type BenchMasOptions = z.input<typeof BenchMasSchema>;

/** The arms, in the order the table lists them. */
export const ARMS = [
  'single-untrained',
  'single-grpo',
  'workflow-untrained',
  'at-grpo-shared',
  'at-grpo-per-role',
] as const;
/** An arm's name. */
export type Arm = (typeof ARMS)[number];

/** The workflow section of ablation `a` of AT-GRPO shared, whose section is `shared`. */
function ablationSection(a: Ablation, shared: Record<string, unknown>): Record<string, unknown> {
  if (a === 'grouping-agent') return { ...shared, grouping: 'agent' };
  if (a === 'grouping-turn') return { ...shared, grouping: 'turn' };
  if (a === 'no-tree') return { ...shared, sampling: 'no-tree' };
  const filterOn = parseWorkflowConfig(shared).groupFilter.lowMeanRatio > 0;
  return { ...shared, groupFilter: { lowMeanRatio: filterOn ? 0 : DEFAULT_GROUP_FILTER.lowMeanRatio } };
}

/** The trained arms, each compared with the arms of VERSUS. */
const TRAINED = ['single-grpo', 'at-grpo-shared', 'at-grpo-per-role'] as const;
/** The untrained arms: the two warm starts, played greedily (all a bench with no seeds has). */
const UNTRAINED = ['single-untrained', 'workflow-untrained'] as const;
const VERSUS = ['single-untrained', 'workflow-untrained', 'single-grpo'] as const;

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
  warmStarts: Record<'workflow' | 'single', WarmStartReport>;
}

/** Where a warm start landed. */
export interface WarmStartReport {
  /** SFT steps trained. */
  steps: number;
  /** The band it was to stop in (fractions), or null for a fixed step count. */
  band: { low: number; high: number } | null;
  /** Greedy success on the calibration instances where it stopped (null without a band). */
  calibration: number | null;
  /** 'in-band', 'above' or 'below' the band (warm-start-band.ts), or 'fixed' without one. */
  outcome: BandOutcome['outcome'] | 'fixed';
  /** Calibration success after every chunk (empty without a band). */
  curve: BandOutcome['curve'];
  /** The kept try of `band.attempts`, from 1 (absent in warm starts cached before attempts existed: 1). */
  attempt?: number;
  /** Every try's stop, in order (absent without a band, or cached before attempts existed). */
  attempts?: AttemptedBandOutcome['attempts'];
  /** Greedy success on the held-out instances (the untrained arm's). */
  heldOut: number;
  /** True when it was read from the cache instead of trained. */
  cached: boolean;
}

/** One arm's success. */
export interface ArmResult {
  pooled: Estimate;
  perSeed: number[];
  /** Held-out greedy success of the arm's warm start (the same instances). */
  warmStart: number;
}

/** 1/0 per held-out instance, in instance order. */
const successVector = (episodes: readonly { seed: number; success: boolean }[]): number[] =>
  [...episodes].sort((a, b) => a.seed - b.seed).map((e) => (e.success ? 1 : 0));

/**
 * What this experiment reads from a finished run's metrics.jsonl: the final held-out greedy success of the first
 * agent on `workflow`, and the responses generated per step summed over `agents`, averaged over the steps (row 0 is
 * the base models' validation and has no samples).
 */
async function runMetrics(
  runDir: string,
  agents: readonly string[],
  workflow: string,
): Promise<{ last: number; responsesPerStep: number }> {
  const rows = (await readFile(join(runDir, 'metrics.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const perStep = rows
    .filter((r) => (r['step'] as number) >= 1)
    .map((r) => agents.reduce((n, a) => n + ((r[agentKey(a, 'samples')] as number | undefined) ?? 0), 0));
  return {
    last: rows.at(-1)![agentKey(agents[0]!, `val/${workflow}/greedy`)] as number,
    responsesPerStep: mean(perStep),
  };
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

/** The agent and warm start of environment `workflow`: the bench's, with the fields `perWorkflow` names replaced. */
export function benchAgent(
  o: Pick<z.output<typeof BenchMasSchema>, 'agent' | 'warmStart' | 'perWorkflow'>,
  workflow: string,
): { agent: AgentSpec; warmStart: WarmStart } {
  const own = o.perWorkflow[workflow];
  return {
    agent: parseWith(AgentSpecSchema, { ...o.agent, ...own?.agent }, `perWorkflow.${workflow}.agent`),
    warmStart: parseWith(WarmStartSchema, { ...o.warmStart, ...own?.warmStart }, `perWorkflow.${workflow}.warmStart`),
  };
}

/** What of the kernels decides a result's rounding: backend, BLAS library and thread count (`HACRL_THREADS`). */
const kernelsKey = (k: Kernels) => ({
  name: k.name,
  blas: k.blas,
  threads: process.env['HACRL_THREADS'] ?? String(availableParallelism()),
});

/**
 * Per workflow (default 1): bumped whenever warm-start training or that workflow's solver rows change in a way that
 * changes the weights of an unchanged key. math-tool 2: its tool rows compute the answer instead of printing it.
 * coding 2: a coder detoured before the last turn writes one of the task's mutants (was another task's reference).
 */
const WARM_CACHE_FORMAT: Readonly<Record<string, number>> = { 'math-tool': 2, coding: 2 };

/**
 * The warm start of `w` (built from workflow section `section`; `label` names its folder), from
 * `<workDir>/warm-starts` when a warm start with the same key is there, else trained and stored: the key holds the
 * resolved workflow section, agent, warm start (its band rule included), seed and the kernels' backend, BLAS library
 * and thread count (their rounding decides the weights). Returns its folder and where it stopped.
 */
async function cachedWarmStart(
  workDir: string,
  label: 'workflow' | 'single',
  section: Record<string, unknown>,
  w: Workflow<unknown>,
  agent: AgentSpec,
  warm: WarmStart,
  k: Kernels,
  log: (line: string) => void,
): Promise<{ dir: string; stop: Omit<WarmStartReport, 'heldOut'> }> {
  const key = JSON.stringify({
    format: WARM_CACHE_FORMAT[w.name] ?? 1,
    workflow: parseWorkflowConfig(section),
    agent,
    warm,
    seed: 0,
    kernels: kernelsKey(k),
  });
  const hash = createHash('sha256').update(key).digest('hex').slice(0, 16);
  const dir = join(workDir, 'warm-starts', `${w.name}-${label}-${hash}`);
  const meta = join(dir, 'warm-start.json');
  if (existsSync(meta)) {
    const stored = JSON.parse(await readFile(meta, 'utf8')) as { key: string; stop: Omit<WarmStartReport, 'heldOut'> };
    if (stored.key === key) {
      log(`${w.name}: warm start from the cache (${dir})`);
      return { dir, stop: { ...stored.stop, cached: true } };
    }
  }
  const built = await workflowAgent(w, agent, warm, 0, k, log);
  const stop: Omit<WarmStartReport, 'heldOut'> = {
    steps: built.band?.steps ?? warm.steps,
    band: warm.band ? { low: warm.band.low, high: warm.band.high } : null,
    calibration: built.band?.calibration ?? null,
    outcome: built.band?.outcome ?? 'fixed',
    curve: built.band?.curve ?? [],
    ...(built.band ? { attempt: built.band.attempt, attempts: built.band.attempts } : {}),
    cached: false,
  };
  // Written beside the final folder and renamed into place, so an interrupted build never looks cached.
  const partial = `${dir}.partial`;
  await rm(partial, { recursive: true, force: true });
  await savePretrained(partial, { ...built, generation: null });
  await writeFile(join(partial, 'warm-start.json'), JSON.stringify({ key, stop }, null, 2) + '\n');
  await rm(dir, { recursive: true, force: true });
  await rename(partial, dir);
  return { dir, stop };
}

/** One trained arm's held-out result: 1/0 per instance, and the responses it generated per step. */
interface ArmRun {
  vector: number[];
  responsesPerStep: number;
}

/**
 * Trains one arm (run config `cfg` with workflow section `section`, policies `agents`) and plays its final policies again on the held-out instances,
 * for per-instance pairing; the run's own validation played the same greedy episodes, so the two rates must agree.
 */
async function trainArm(
  cfg: RunConfig,
  section: Record<string, unknown>,
  agents: readonly string[],
  workflow: string,
  k: Kernels,
): Promise<ArmRun> {
  await trainRl(cfg, { resume: false, progress: () => {} });
  const { last, responsesPerStep } = await runMetrics(cfg.runDir, agents, workflow);
  const ckpt = await findLatestCheckpoint(cfg.runDir);
  if (ckpt === null) throw new Error(`${cfg.runDir}: the run wrote no checkpoint`);
  const trained = Object.fromEntries(
    await Promise.all(
      agents.map(async (a) => {
        const p = await loadPretrained(join(ckpt.dir, 'agents', a));
        return [a, modelPolicy(p.model, p.tokenizer, k, new Rng(1))] as const;
      }),
    ),
  );
  const armWf = buildWorkflow(section);
  const played = await playHeldOut(
    armWf,
    Object.fromEntries(armWf.roles.map((r) => [r.policy, trained[r.policy]!])),
    cfg.eval.problems,
  );
  const vector = successVector(played.episodes);
  if (Math.abs(mean(vector) - last) > 1e-9)
    throw new Error(`${cfg.runDir}: held-out success ${mean(vector)} differs from the run's validation ${last}`);
  return { vector, responsesPerStep };
}

/** Bumped whenever training or evaluation changes in a way that changes the result of an unchanged run config. */
const ARM_CACHE_FORMAT = 1;
/** The file in an arm's run folder holding its result and the key it was computed under. */
const ARM_RESULT = 'arm-result.json';

/**
 * The result of the arm with run config `cfg`: read from its run folder when a finished run with the same key (the
 * resolved config, the kernels' backend, BLAS library and thread count) left it there, else trained by `train` (the
 * folder cleared first) and stored. Without `keep` only metrics.jsonl, the resolved config and the result stay.
 */
async function cachedArm(
  cfg: RunConfig,
  agents: readonly string[],
  workflow: string,
  k: Kernels,
  keep: boolean,
  train: () => Promise<ArmRun>,
): Promise<ArmRun & { cached: boolean }> {
  const key = JSON.stringify({ format: ARM_CACHE_FORMAT, config: cfg, agents, workflow, kernels: kernelsKey(k) });
  const file = join(cfg.runDir, ARM_RESULT);
  if (existsSync(file)) {
    const stored = JSON.parse(await readFile(file, 'utf8')) as { key: string } & ArmRun;
    if (stored.key === key) return { vector: stored.vector, responsesPerStep: stored.responsesPerStep, cached: true };
  }
  await rm(cfg.runDir, { recursive: true, force: true });
  const result = await train();
  // Each run's metrics (a few hundred kB) stay, so that a surprising arm can be traced step by step afterwards.
  if (!keep)
    for (const f of await readdir(cfg.runDir))
      if (f !== 'metrics.jsonl' && f !== 'config.resolved.json')
        await rm(join(cfg.runDir, f), { recursive: true, force: true });
  // Written last and atomically: a run killed before this line is trained again.
  await writeFile(`${file}.partial`, JSON.stringify({ key, ...result }) + '\n');
  await rename(`${file}.partial`, file);
  return { ...result, cached: false };
}

/** Runs the benchmark; `log` receives progress lines. */
export async function runBenchMas(raw: BenchMasOptions, log: (line: string) => void): Promise<BenchMasResult[]> {
  const o = parseWith(BenchMasSchema, raw, 'bench mas options');
  const k = engine();
  const flags = cpuFlags();
  const features = ['avx2', 'avx512f', 'avx512_bf16', 'amx_tile'].filter((f) => flags.has(f)).join(', ');
  // Results depend on the rounding, so the log names what decides it (as the caches' keys do).
  log(
    `bench mas: ${cpus()[0]?.model ?? 'unknown CPU'} (${features || 'no AVX2'}); ${k.name} kernels, ${k.blas}; ` +
      `HACRL_THREADS=${process.env['HACRL_THREADS'] ?? 'unset'}`,
  );
  const chosen = o.ablations;
  // In ABLATIONS' order whatever the list's, so tables and JSON read alike.
  const ablations = chosen === true ? ABLATIONS : chosen === false ? [] : ABLATIONS.filter((a) => chosen.includes(a));
  const out: BenchMasResult[] = [];
  for (const section of o.workflows) {
    const wf = buildWorkflow(section);
    const { agent: agentSpec, warmStart: warm } = benchAgent(o, wf.name);
    // Per arm and seed: 1/0 per held-out instance.
    const successes = Object.fromEntries([...ARMS, ...ablations].map((a) => [a, [] as number[][]])) as Record<
      Arm | Ablation,
      number[][]
    >;
    const responses: Record<string, number[]> = {};
    const singleSection = { ...section, sampling: 'single', roles: {} };
    await prepareWorkflowDir(join(o.workDir, wf.name));
    // Two warm starts per environment, same size, rows and rule: the workflow's (solver rows of every role) starts
    // both AT-GRPO arms, the single agent's (its own rows: no other role's turns in its prompts) starts single-grpo;
    // with a band each stops on its own calibration success, so both arms start in the same band. Seeds vary RL only
    // (instances, sampling). Greedy on the same held-out instances, the untrained results are the same for every seed.
    const starts = {} as Record<'workflow' | 'single', string>;
    const untrained = {} as Record<'workflow' | 'single', number[]>;
    const warmStarts = {} as Record<'workflow' | 'single', WarmStartReport>;
    for (const [which, w, wSection] of [
      ['workflow', wf, section],
      ['single', buildWorkflow(singleSection), singleSection],
    ] as const) {
      const { dir, stop } = await cachedWarmStart(o.workDir, which, wSection, w, agentSpec, warm, k, log);
      starts[which] = dir;
      const agent = await loadPretrained(dir);
      const played = await playHeldOut(
        w,
        Object.fromEntries(w.roles.map((r) => [r.policy, modelPolicy(agent.model, agent.tokenizer, k, new Rng(1))])),
        o.heldOut,
      );
      untrained[which] = successVector(played.episodes);
      warmStarts[which] = { ...stop, heldOut: successRate(played) };
      const calibration =
        stop.calibration === null ? '' : `, calibration ${stop.calibration.toFixed(3)} (${stop.outcome})`;
      log(
        `${wf.name} ${which}-untrained: ${stop.steps} warm-start steps${calibration}, held-out success ${successRate(played).toFixed(3)}`,
      );
    }
    const seeds = Array.from({ length: o.seeds }, (_, i) => o.firstSeed + i);
    for (const seed of seeds) {
      const dir = join(o.workDir, wf.name, `seed-${seed}`);
      await mkdir(dir, { recursive: true });
      successes['workflow-untrained'].push(untrained.workflow);
      successes['single-untrained'].push(untrained.single);
      const roles = wf.roles.map((r) => r.name);
      const shared = { ...section, roles: {} };
      const arms: [Arm | Ablation, Record<string, unknown>, string[], number, string][] = [
        ['single-grpo', singleSection, ['shared'], 2 * o.instancesPerStep, starts.single],
        ['at-grpo-shared', shared, ['shared'], o.instancesPerStep, starts.workflow],
        [
          'at-grpo-per-role',
          { ...section, roles: Object.fromEntries(roles.map((r) => [r, { policy: r }])) },
          roles,
          o.instancesPerStep,
          starts.workflow,
        ],
        ...ablations.map(
          (a) =>
            [a, ablationSection(a, shared), ['shared'], o.instancesPerStep, starts.workflow] as [
              Ablation,
              Record<string, unknown>,
              string[],
              number,
              string,
            ],
        ),
      ];
      for (const [arm, workflow, agents, instances, start] of arms) {
        const runDir = join(dir, arm);
        const cfg = parseRunConfig({
          algorithm: 'at-grpo',
          agents: agents.map((name) => ({ name, checkpoint: start })),
          workflow,
          rollout: { promptsPerStep: instances },
          optim: { lr: o.lr, advantage: o.advantage },
          steps: o.steps,
          seed,
          eval: { every: 0, problems: o.heldOut },
          checkpoint: { every: 0, keepLast: 1 },
          samplesPerStep: 2,
          runDir,
        });
        const { vector, responsesPerStep, cached } = await cachedArm(cfg, agents, wf.name, k, o.keep, () =>
          trainArm(cfg, workflow, agents, wf.name, k),
        );
        successes[arm].push(vector);
        (responses[arm] ??= []).push(responsesPerStep);
        log(`${wf.name} seed ${seed} ${arm}: held-out success ${mean(vector).toFixed(3)}${cached ? ' (cached)' : ''}`);
      }
    }
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
    out.push({
      workflow: wf.name,
      seeds,
      responsesPerStep,
      arms,
      paired,
      ablations: Object.fromEntries(seeds.length === 0 ? [] : ablations.map((a) => [a, versus(a, 'at-grpo-shared')])),
      ...(flipped === undefined ? {} : { flippedLowMeanRatio: flipped }),
      warmStarts,
    });
  }
  return out;
}

/** The AT-GRPO arms, whose lift over the workflow's warm start the verdict table judges. */
const AT_GRPO = ['at-grpo-shared', 'at-grpo-per-role'] as const;

/**
 * Whether AT-GRPO arm `arm` lifts the workflow, as the bench's goal asks: above the untrained workflow and above
 * single-agent GRPO (each paired interval entirely above zero), and how far its weakest seed ended from its warm start
 * (fraction; below zero when some seed pushed the start below itself). For a result with seeds.
 */
export function atGrpoVerdict(
  r: BenchMasResult,
  arm: (typeof AT_GRPO)[number],
): { aboveWorkflow: boolean; aboveSingle: boolean; weakestSeedGain: number } {
  const d = r.paired[arm]!;
  const { perSeed, warmStart } = r.arms[arm]!;
  return {
    aboveWorkflow: d['workflow-untrained']!.low > 0,
    aboveSingle: d['single-grpo']!.low > 0,
    weakestSeedGain: Math.min(...perSeed) - warmStart,
  };
}

/** A warm start's tries in the table's stop column: ' (attempt 2 of 3: below 3.0%, in-band 28.0%)', or '' for one. */
function tries(w: WarmStartReport): string {
  if (w.attempts === undefined || w.attempts.length < 2) return '';
  const each = w.attempts.map((a) => `${a.outcome} ${(100 * a.calibration).toFixed(1)}%`).join(', ');
  return ` (attempt ${w.attempt} of ${w.attempts.length}: ${each})`;
}

/**
 * The results as Markdown: success per arm (pooled over seeds, 95% interval) beside its warm start's, then the paired
 * differences, then where each warm start stopped, then whether AT-GRPO lifts the workflow (atGrpoVerdict), then
 * (when run) each ablation against at-grpo-shared.
 */
export function benchMasTable(results: readonly BenchMasResult[]): string {
  const pct = (x: number): string => (100 * x).toFixed(1);
  const seeds = results[0]?.seeds ?? [];
  const lines = [
    `| env | arm | success % | 95% interval | warm start % | per seed (${seeds.join(', ')}) | responses/step |`,
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const r of results)
    for (const a of [...ARMS, ...ABLATIONS]) {
      const arm = r.arms[a];
      if (arm === undefined) continue;
      const { pooled, perSeed, warmStart } = arm;
      lines.push(
        `| ${r.workflow} | ${a} | ${pct(pooled.value)} | ${pct(pooled.low)}–${pct(pooled.high)} | ${pct(warmStart)} | ` +
          `${perSeed.map(pct).join(' / ')} | ${r.responsesPerStep[a] ?? '—'} |`,
      );
    }
  // A bench with no seeds has warm starts only: nothing to pair or judge.
  const trained = results.filter((r) => r.seeds.length > 0);
  if (trained.length > 0)
    lines.push(
      '',
      'Paired differences in points (same held-out instances; per-seed mean, Student-t 95% interval over seeds):',
      '',
      `| env | arm | ${VERSUS.map((b) => `− ${b}`).join(' | ')} |`,
      `| --- | --- | ${VERSUS.map(() => '---').join(' | ')} |`,
    );
  for (const r of trained)
    for (const a of TRAINED) {
      const d = r.paired[a]!;
      const cells = VERSUS.map((b) => (d[b] === undefined ? '—' : formatDifference(d[b])));
      lines.push(`| ${r.workflow} | ${a} | ${cells.join(' | ')} |`);
    }
  lines.push(
    '',
    'Warm starts (greedy success; a band stops at the first chunk of steps inside it on calibration instances):',
    '',
    '| env | warm start | steps | band % | calibration % | stop | held-out % |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  );
  for (const r of results)
    for (const which of ['workflow', 'single'] as const) {
      const w = r.warmStarts[which];
      const band = w.band === null ? '—' : `${pct(w.band.low)}–${pct(w.band.high)}`;
      const calibration = w.calibration === null ? '—' : pct(w.calibration);
      lines.push(
        `| ${r.workflow} | ${which} | ${w.steps} | ${band} | ${calibration} | ${w.outcome}${tries(w)}` +
          `${w.cached ? ' (cached)' : ''} | ` +
          `${pct(w.heldOut)} |`,
      );
    }
  if (trained.length > 0)
    lines.push(
      '',
      'Does AT-GRPO lift the workflow? (above: the paired interval lies above zero; weakest seed − warm start in points):',
      '',
      '| env | arm | above workflow-untrained | above single-grpo | weakest seed − warm start |',
      '| --- | --- | --- | --- | --- |',
    );
  const yes = (b: boolean): string => (b ? 'yes' : 'no');
  for (const r of trained)
    for (const a of AT_GRPO) {
      const v = atGrpoVerdict(r, a);
      lines.push(
        `| ${r.workflow} | ${a} | ${yes(v.aboveWorkflow)} | ${yes(v.aboveSingle)} | ${formatPoints(v.weakestSeedGain)} |`,
      );
    }
  const withAblations = results.filter((r) => Object.keys(r.ablations).length > 0);
  if (withAblations.length > 0) {
    lines.push(
      '',
      'Ablations − at-grpo-shared in points (same instances and seeds; one seed: the interval is over instances):',
      '',
      '| env | ablation | − at-grpo-shared | seeds |',
      '| --- | --- | --- | --- |',
    );
    for (const r of withAblations)
      for (const a of ABLATIONS) {
        const d = r.ablations[a];
        if (d === undefined) continue;
        const name = a === 'group-filter-flipped' ? `${a} (lowMeanRatio ${r.flippedLowMeanRatio})` : a;
        lines.push(`| ${r.workflow} | ${name} | ${formatDifference(d)} | ${d.seeds} |`);
      }
  }
  return lines.join('\n');
}
