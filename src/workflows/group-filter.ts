/**
 * Which (instance, agent, turn) groups train (AT-GRPO spec, "Group filter"): the reference drops, by default, the 50%
 * of groups with the lowest mean reward. Groups whose rewards are all equal are the learner's to leave out
 * (optim.filterZeroVariance), as for every source. Pure: rewards in, kept and dropped keys out.
 */
import { mean } from '../util/stats.js';

/** Group filter settings. */
export interface GroupFilterOptions {
  /** Fraction of groups with the lowest mean reward to drop, in [0, 1); default 0.5 (the reference); 0 = off. */
  lowMeanRatio: number;
}

/** The defaults: the reference's mean filter on (ratio 0.5). */
export const DEFAULT_GROUP_FILTER: Readonly<GroupFilterOptions> = Object.freeze({ lowMeanRatio: 0.5 });

/** One group's rewards. */
export interface RewardGroup {
  key: string;
  rewards: readonly number[];
}

/** What the filter kept and dropped (keys in input order). */
export interface GroupFilterResult {
  kept: string[];
  droppedLowMean: string[];
}

/** Drops floor(lowMeanRatio · n) groups with the lowest mean reward over all n groups (equal means: earlier first). */
export function filterGroups(
  groups: readonly RewardGroup[],
  options: Partial<GroupFilterOptions> = {},
): GroupFilterResult {
  const o = { ...DEFAULT_GROUP_FILTER, ...options };
  if (!(o.lowMeanRatio >= 0 && o.lowMeanRatio < 1))
    throw new Error(`group filter lowMeanRatio must be in [0, 1), got ${o.lowMeanRatio}; 0 turns it off`);
  for (const g of groups) if (g.rewards.length === 0) throw new Error(`group "${g.key}" has no rewards`);
  const byMean = groups.map((g, i) => ({ i, m: mean(g.rewards) })).sort((a, b) => a.m - b.m || a.i - b.i);
  const lowMean = new Set(byMean.slice(0, Math.floor(o.lowMeanRatio * groups.length)).map((x) => x.i));
  const result: GroupFilterResult = { kept: [], droppedLowMean: [] };
  groups.forEach((g, i) => (lowMean.has(i) ? result.droppedLowMean : result.kept).push(g.key));
  return result;
}
