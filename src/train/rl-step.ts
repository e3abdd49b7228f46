/**
 * One RLVR step of a single agent (GRPO, GSPO, GSPO×2): sample G responses per prompt, score them, compute group
 * advantages, take the old (and reference) log-probs before any update, then M mini-batches × E epochs of policy
 * updates. Returns the step's metrics.
 */
import { performance } from 'node:perf_hooks';
import type { Kernels } from '../backend/kernels.js';
import { groupAdvantages, zeroVarianceGroups, type AdvantageNormalization } from '../algorithms/advantages.js';
import { policyLoss, type PolicyLossOptions } from '../algorithms/policy-loss.js';
import type { PolicySequence } from '../algorithms/sequence.js';
import { scoreResponses } from '../model/score.js';
import type { Transformer } from '../model/transformer.js';
import type { AdamW } from '../optim/adamw.js';
import type { Agent, Rollout } from '../rollout/rollout.js';
import type { Problem } from '../tasks/problem.js';
import type { Rng } from '../util/rng.js';
import {
  runUpdates,
  sampleAndScore,
  splitMiniBatches,
  summarizeUpdates,
  type RolloutOptions,
  type StepMetrics,
} from './policy-updates.js';

/** Everything one step needs to know. */
export interface RlStepOptions extends RolloutOptions {
  /** Optimizer mini-batches per epoch M. */
  miniBatches: number;
  /** Passes over the step's rollouts E. */
  epochs: number;
  /** Objective, clip range, aggregation, KL and truncation masking (see policyLoss). */
  loss: Omit<PolicyLossOptions, 'denominators'>;
  advantageNormalization: AdvantageNormalization;
  /** Drop groups whose rewards are all equal (they carry no signal under group advantages). */
  filterZeroVariance: boolean;
  /** Gradient-norm clip. */
  clip: number;
  /** Learning rate of this step. */
  lr: number;
}

/** The step's rollouts with their rewards, for sample logging. */
export interface StepResult {
  metrics: StepMetrics;
  rollouts: Rollout[];
  rewards: number[];
  /** Optimizer updates skipped because the loss or gradient was not finite. */
  skippedUpdates: number;
  /** Optimizer updates attempted. */
  updates: number;
}

/** Runs one step for `agent` on `problems` (B prompts); updates the agent's weights in place through `optimizer`. */
export async function rlStep(
  agent: Agent,
  reference: Transformer | null,
  optimizer: AdamW,
  k: Kernels,
  problems: readonly Problem[],
  o: RlStepOptions,
  rngs: { sampling: Rng; order: Rng },
): Promise<StepResult> {
  const t0 = performance.now();
  const { rollouts, rewards, metrics } = await sampleAndScore(agent, k, problems, o, rngs.sampling);
  const t1 = performance.now();

  const grouping = { groupSize: o.groupSize };
  const advantages = groupAdvantages(rewards, grouping, { normalization: o.advantageNormalization });
  const zero = zeroVarianceGroups(rewards, grouping);
  const items = rollouts.map((r) => ({ prompt: r.promptIds, response: r.responseIds }));
  // Old log-probs come from the training forward pass, not from sampling, so the first ratio is exactly 1.
  const old = scoreResponses(agent.model, k, items);
  const ref = o.loss.kl ? scoreResponses(reference ?? agent.model, k, items) : null;
  const kept = rollouts.map((_, i) => i).filter((i) => !o.filterZeroVariance || zero.keep[rollouts[i]!.group]!);

  const batches: number[][] = [];
  for (let epoch = 0; epoch < o.epochs && kept.length > 0; epoch++)
    batches.push(...splitMiniBatches(rngs.order.shuffle([...kept]), o.miniBatches));
  const updates = runUpdates(
    agent.model,
    optimizer,
    k,
    items,
    batches,
    (batch, logProbs) => {
      const sequences: PolicySequence[] = batch.map((i, j) => ({
        logProbs: logProbs[j]!,
        oldLogProbs: old[i]!,
        ...(ref ? { refLogProbs: ref[i]! } : {}),
        advantage: advantages[i]!,
        truncated: rollouts[i]!.truncated,
      }));
      const { loss, grad, stats: s } = policyLoss(sequences, o.loss);
      return {
        loss,
        grad,
        stats: {
          clip_frac_low: s.clipFracLow,
          clip_frac_high: s.clipFracHigh,
          ratio_mean: s.ratioMean,
          ratio_min: s.ratioMin,
          ratio_max: s.ratioMax,
          approx_kl: s.approxKl,
          ...(ref ? { kl: s.kl } : {}),
        },
      };
    },
    o,
  );
  const t2 = performance.now();
  const all: StepMetrics = {
    ...metrics,
    zero_var_groups_frac: zero.fraction,
    time_train_s: (t2 - t1) / 1e3,
    tokens_per_s: metrics.tokens! / ((t2 - t0) / 1e3),
    lr: o.lr,
    skipped_updates: updates.skippedUpdates,
    ...summarizeUpdates(updates.stats),
  };
  return { metrics: all, rollouts, rewards, skippedUpdates: updates.skippedUpdates, updates: batches.length };
}
