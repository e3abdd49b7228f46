/**
 * The arms of `hacrl bench mas`: which arms a seed trains, each as a run config starting from its warm start; one
 * arm trained and its final policies played again on the held-out instances; and its result cached in its run folder,
 * keyed by its resolved run config, so an interrupted bench (or one asked for more seeds) trains only what is missing.
 */
import { existsSync } from 'node:fs';
import { readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Kernels } from '../backend/kernels.js';
import { parseRunConfig } from '../config/load-config.js';
import type { RunConfig } from '../config/rl-config.js';
import { loadPretrained } from '../model/pretrained.js';
import { agentKey } from '../run/metric-names.js';
import { findLatestCheckpoint } from '../run/run-folder.js';
import { trainRl } from '../train/rl-trainer.js';
import { Rng } from '../util/rng.js';
import { mean } from '../util/stats.js';
import { DEFAULT_GROUP_FILTER } from '../workflows/group-filter.js';
import { modelPolicy } from '../workflows/model-policy.js';
import { playHeldOut } from '../workflows/play.js';
import { buildWorkflow } from '../workflows/registry.js';
import { parseWorkflowConfig } from '../workflows/workflow-config.js';
import type { Ablation, BenchMasSettings } from './mas-options.js';
import { kernelsKey, successVector, type WarmStartKind } from './mas-warm-starts.js';
import { reproducibleMode } from '../backend/select.js';

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

/** The trained arms, each compared with the arms of VERSUS. */
export const TRAINED = ['single-grpo', 'at-grpo-shared', 'at-grpo-per-role'] as const;
/** The untrained arms: the two warm starts, played greedily (all a bench with no seeds has). */
export const UNTRAINED = ['single-untrained', 'workflow-untrained'] as const;
/** The arms every trained arm is paired with. */
export const VERSUS = ['single-untrained', 'workflow-untrained', 'single-grpo'] as const;

/** The workflow section of ablation `a` of AT-GRPO shared, whose section is `shared`. */
export function ablationSection(a: Ablation, shared: Record<string, unknown>): Record<string, unknown> {
  if (a === 'grouping-agent') return { ...shared, grouping: 'agent' };
  if (a === 'grouping-turn') return { ...shared, grouping: 'turn' };
  if (a === 'no-tree') return { ...shared, sampling: 'no-tree' };
  const filterOn = parseWorkflowConfig(shared).groupFilter.lowMeanRatio > 0;
  return { ...shared, groupFilter: { lowMeanRatio: filterOn ? 0 : DEFAULT_GROUP_FILTER.lowMeanRatio } };
}

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

/** One trained arm's held-out result: 1/0 per instance, and the responses it generated per step. */
export interface ArmRun {
  vector: number[];
  responsesPerStep: number;
}

/**
 * Trains one arm (run config `cfg` with workflow section `section`, policies `agents`) and plays its final policies again on the held-out instances,
 * for per-instance pairing; the run's own validation played the same greedy episodes, so the two rates must agree.
 */
export async function trainArm(
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
export async function cachedArm(
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

/** One arm a seed trains: its name, workflow section, policies (agent names) and run config. */
export interface ArmSpec {
  name: Arm | Ablation;
  workflow: Record<string, unknown>;
  agents: string[];
  cfg: RunConfig;
}

/**
 * The arms seed `seed` trains in `dir`, in the table's order, the ablations last: single-agent GRPO from the single
 * warm start on twice the instances, AT-GRPO shared and per role from the workflow's, each ablation a variant of
 * AT-GRPO shared. `sections` are the environment's workflow sections per warm start, `starts` their folders.
 */
export function seedArms(
  o: BenchMasSettings,
  sections: Record<WarmStartKind, Record<string, unknown>>,
  starts: Record<WarmStartKind, string>,
  ablations: readonly Ablation[],
  seed: number,
  dir: string,
): ArmSpec[] {
  const roles = buildWorkflow(sections.workflow).roles.map((r) => r.name);
  const shared = { ...sections.workflow, roles: {} };
  // Name, workflow section, policies, instances per step, warm start.
  type Row = [Arm | Ablation, Record<string, unknown>, string[], number, string];
  const arms: Row[] = [
    ['single-grpo', sections.single, ['shared'], 2 * o.instancesPerStep, starts.single],
    ['at-grpo-shared', shared, ['shared'], o.instancesPerStep, starts.workflow],
    [
      'at-grpo-per-role',
      { ...sections.workflow, roles: Object.fromEntries(roles.map((r) => [r, { policy: r }])) },
      roles,
      o.instancesPerStep,
      starts.workflow,
    ],
    ...ablations.map((a): Row => [a, ablationSection(a, shared), ['shared'], o.instancesPerStep, starts.workflow]),
  ];
  return arms.map(([name, workflow, agents, instances, start]) => ({
    name,
    workflow,
    agents,
    cfg: parseRunConfig({
      algorithm: 'at-grpo',
      agents: agents.map((a) => ({ name: a, checkpoint: start })),
      workflow,
      rollout: { promptsPerStep: instances },
      optim: { lr: o.lr, advantage: o.advantage },
      steps: o.steps,
      seed,
      eval: { every: 0, problems: o.heldOut },
      checkpoint: { every: 0, keepLast: 1 },
      samplesPerStep: 2,
      runDir: join(dir, name),
      reproducible: reproducibleMode().on,
    }),
  }));
}
