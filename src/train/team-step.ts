/**
 * One training step of the whole team on the step's table: each learner's view of the table, every agent's P̂ when
 * rollouts are shared (HACRL Eq. 9), then each learner's update in team order (learner-step.ts).
 */
import { performance } from 'node:perf_hooks';
import type { Kernels } from '../backend/kernels.js';
import type { Rng } from '../util/rng.js';
import { mean } from '../util/stats.js';
import type { TeamMember } from './learners.js';
import {
  learnerBatches,
  learnerStep,
  type LearnerResult,
  type PartnerVersions,
  type UpdateRecipe,
} from './learner-step.js';
import { learnerView, type SampleRecord } from './sample-table.js';
import type { PhaseStart } from './step-watch.js';

/**
 * The update of every learner this process trains (`local`) at training step `step` on the step's complete `table`,
 * one result each in team order; a learner another process trains only draws its mini-batches, so the shared `rng`
 * moves as in one process; `phase` names each learner's training for the live progress line. When the recipe shares rollouts, each learner's view holds its tokens of every foreign
 * record, and each agent records this step's P_t (HACRL Eq. 9: the mean reward of its own records; an agent with no
 * records in the table — left out as late by the exchange — records none), so every learner sees the same P̂.
 * With `versions` (an asynchronous step: partners' records of other steps, each version with its own P̂) only the
 * local learners record a P_t and train; the others draw nothing, as no other process replays this table.
 */
export function teamStep(
  table: readonly SampleRecord[],
  members: readonly TeamMember[],
  recipe: UpdateRecipe,
  kernels: Kernels,
  rng: Rng,
  step: number,
  phase?: PhaseStart,
  versions?: PartnerVersions,
): (LearnerResult & { seconds: number })[] {
  const shared = recipe.sharing !== 'none';
  const byName = new Map(members.map((l) => [l.policy.name, l.policy]));
  const views = members.map((l) =>
    versions && !l.local ? null : learnerView(table, l.policy, byName, shared, versions?.prompts),
  );
  if (shared)
    for (const l of members.filter((m) => m.local || !versions)) {
      const own = table.filter((r) => r.generator === l.policy.name);
      if (own.length > 0) l.capability.record(mean(own.map((r) => r.reward)));
    }
  const capability = members.map((l) => l.capability.estimate());
  const team = members.map((l) => l.policy.name);
  return members.flatMap((l, k) => {
    if (!l.local) {
      if (!versions) learnerBatches(table, views[k]!, l.policy.name, l.order, recipe, rng);
      return [];
    }
    phase?.('training', l.policy.name);
    const t0 = performance.now();
    const r = learnerStep(table, views[k]!, { ...l, lr: l.lr(step) }, team, recipe, capability, kernels, rng, versions);
    return [{ ...r, seconds: (performance.now() - t0) / 1e3 }];
  });
}
