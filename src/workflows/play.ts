/**
 * Playing a workflow outside the sampler: which instances each use plays (training, held-out, train-side probe and
 * calibration seeds), one training step's episodes with their groups and the group filter's verdict — in the one
 * scope, per policy, that both a training step and `hacrl mas rollout` use — and greedy evaluation.
 */
import { SANDBOX_OUTCOMES } from '../sandbox/sandbox-types.js';
import { mean } from '../util/stats.js';
import { filterGroups, type GroupFilterResult } from './group-filter.js';
import { type SampleGroup, groupSamples } from './groups.js';
import type { Policy } from './policy.js';
import type { MasBatch } from './samples.js';
import { rollout } from './tree-sampling.js';
import type { WorkflowConfig } from './workflow-config.js';
import type { Workflow } from './workflow.js';

/** First seed of the held-out instances: far from every training instance and the warm-start rows (10⁶ on). */
export const HELD_OUT_SEED = 1_500_000_000;

/** The seeds of the `count` instances a training step plays at `step` (from 0): seed·10⁷ + step·count + i. */
export function trainingSeeds(seed: number, step: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => seed * 10_000_000 + step * count + i);
}

/** The seeds of `count` held-out instances, from HELD_OUT_SEED (validation and `hacrl bench mas`). */
export function heldOutSeeds(count: number): number[] {
  return Array.from({ length: count }, (_, i) => HELD_OUT_SEED + i);
}

/**
 * First seed of the train-side probe instances (`hacrl mas eval --split train`): drawn as training instances are
 * (coding: train-side task keys, so a key trained on comes back with other arguments) but never played in training —
 * past every training seed of RL seeds below 100 and every warm-start row, below the held-out seeds.
 */
export const TRAIN_PROBE_SEED = 1_000_000_000;

/** The seeds of `count` train-side probe instances, from TRAIN_PROBE_SEED. */
export function trainProbeSeeds(count: number): number[] {
  return Array.from({ length: count }, (_, i) => TRAIN_PROBE_SEED + i);
}

/**
 * First seed of the calibration instances, on which presets and warm-start stops are chosen: 3·10⁸ past the first
 * held-out seed (disjoint from up to 3·10⁸ held-out instances), past every training seed of seeds below 100, and on
 * the test side of the coding tasks (their test seeds start at HELD_OUT_SEED).
 */
export const CALIBRATION_SEED = 1_800_000_000;

/** The seeds of `count` calibration instances, from CALIBRATION_SEED (warm starts stopped by a band). */
export function calibrationSeeds(count: number): number[] {
  return Array.from({ length: count }, (_, i) => CALIBRATION_SEED + i);
}

/** Episode success rate in [0, 1]: the fraction of `batch`'s episodes the environment called solved (a cut-off is not). */
export function successRate(batch: MasBatch): number {
  return mean(batch.episodes.map((e) => (e.success ? 1 : 0)));
}

/** One policy's part of a step: its groups, in sample order, and what the group filter kept and dropped of them. */
export interface PolicyGroups {
  groups: SampleGroup[];
  filter: GroupFilterResult;
}

/** One step of a workflow: its episodes, their validated groups and, per policy, the group filter's verdict. */
export interface PlayedStep {
  batch: MasBatch;
  groups: SampleGroup[];
  /** Per policy given (in the order given, one that did not act included): its groups and the filter's verdict. */
  byPolicy: Map<string, PolicyGroups>;
}

/**
 * Plays `wf` on the instances of `seeds` as the `workflow` config section asks — its sampling, group size,
 * teamBranches and grouping — with `policies` by name, groups the samples and filters each policy's groups among its
 * own (config.groupFilter): a policy trains on its own groups only, so they compete with each other and not with
 * another policy's, whose rewards may sit on another scale. What a training step and `hacrl mas rollout` both do.
 */
export async function playStep(
  wf: Workflow<unknown>,
  config: WorkflowConfig,
  policies: Readonly<Record<string, Policy>>,
  seeds: readonly number[],
): Promise<PlayedStep> {
  const batch = await rollout(wf, config.sampling, {
    seeds,
    groupSize: config.groupSize,
    policies,
    teamBranches: config.teamBranches,
    grouping: config.grouping,
  });
  const groups = groupSamples(batch.samples, config.groupSize, config.grouping);
  const byPolicy = new Map<string, PolicyGroups>();
  for (const name of Object.keys(policies)) {
    // groupSamples refuses a group mixing policies, so its first member names the group's policy.
    const mine = groups.filter((g) => batch.samples[g.members[0]!]!.policy === name);
    const rewards = mine.map((g) => ({ key: g.key, rewards: g.members.map((i) => batch.samples[i]!.reward) }));
    byPolicy.set(name, { groups: mine, filter: filterGroups(rewards, config.groupFilter) });
  }
  return { batch, groups, byPolicy };
}

/** The keys of the groups of `step` that the group filter kept, over every policy, in group order. */
export function keptGroupKeys(step: PlayedStep): string[] {
  const kept = new Set([...step.byPolicy.values()].flatMap((p) => p.filter.kept));
  return step.groups.filter((g) => kept.has(g.key)).map((g) => g.key);
}

/** The workflow with every role greedy (temperature 0): the validation rollout. */
function greedy(wf: Workflow<unknown>): Workflow<unknown> {
  return { ...wf, roles: wf.roles.map((r) => ({ ...r, sampling: { ...r.sampling, temperature: 0 } })) };
}

/** Plays `wf` greedily, one episode per instance of `seeds` (no training); returns the episodes. */
export async function playGreedy(
  wf: Workflow<unknown>,
  policies: Readonly<Record<string, Policy>>,
  seeds: readonly number[],
): Promise<MasBatch> {
  return rollout(greedy(wf), 'no-tree', { seeds, groupSize: 1, policies });
}

/** Plays `wf` greedily, one episode on each of the first `count` held-out instances (no training). */
export async function playHeldOut(
  wf: Workflow<unknown>,
  policies: Readonly<Record<string, Policy>>,
  count: number,
): Promise<MasBatch> {
  return playGreedy(wf, policies, heldOutSeeds(count));
}

/**
 * Per role that ran at least one program in `batch`: how many ended with each sandbox outcome, as counts
 * `heldout/<workflow>/role/<role>/sandbox_<outcome>` (every outcome, 0 included).
 */
export function heldOutSandboxCounts(workflow: string, batch: MasBatch): Record<string, number> {
  const out: Record<string, number> = {};
  for (const role of [...new Set(batch.samples.filter((s) => s.sandbox).map((s) => s.role))]) {
    const mine = batch.samples.filter((s) => s.role === role && s.sandbox);
    for (const o of SANDBOX_OUTCOMES)
      out[`heldout/${workflow}/role/${role}/sandbox_${o}`] = mine.filter((s) => s.sandbox === o).length;
  }
  return out;
}
