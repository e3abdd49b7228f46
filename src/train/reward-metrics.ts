/** Per-reward-function means of a step, so a weighted total can be read apart into what each reward contributed. */
import type { SampleScore, WeightedReward } from '../rewards/reward.js';

/**
 * `reward/<name>_mean`: the mean unweighted value of each reward function over the samples, averaged like
 * reward_mean (so Σ weight · reward/<name>_mean = reward_mean). Empty when the total is one reward of weight 1, where
 * it would repeat reward_mean.
 */
export function rewardPartMeans(
  scores: readonly SampleScore[],
  rewards: readonly Pick<WeightedReward, 'name' | 'weight'>[],
): Record<string, number> {
  if (rewards.length === 1 && rewards[0]!.weight === 1) return {};
  const out: Record<string, number> = {};
  for (const { name } of rewards)
    out[`reward/${name}_mean`] = scores.length
      ? scores.reduce((sum, s) => sum + (s.values[name] ?? 0), 0) / scores.length
      : NaN;
  return out;
}
