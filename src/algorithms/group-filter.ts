/**
 * Which (instance, agent, turn) groups train (AT-GRPO spec, "Group filter"). The reference drops, by default, the 50%
 * of groups with the lowest mean reward; dropping groups whose rewards are all equal (zero advantage) is the other
 * switch. Pure: rewards in, kept and dropped keys out.
 */

/** Group filter switches. */
export interface GroupFilterOptions {
  /** Fraction of groups with the lowest mean reward to drop, in [0, 1); default 0.5 (the reference); 0 = off. */
  lowMeanRatio: number;
  /** Drop groups whose rewards are all equal (their advantages are 0); default false. */
  zeroVariance: boolean;
}

/** The defaults: the reference's mean filter on (ratio 0.5), the zero-variance filter off. */
export const DEFAULT_GROUP_FILTER: Readonly<GroupFilterOptions> = Object.freeze({
  lowMeanRatio: 0.5,
  zeroVariance: false,
});

/** One group's rewards. */
export interface RewardGroup {
  key: string;
  rewards: readonly number[];
}

/** What the filter kept and why it dropped the rest (keys in input order). */
export interface GroupFilterResult {
  kept: string[];
  droppedLowMean: string[];
  droppedZeroVariance: string[];
}

/**
 * First drops floor(lowMeanRatio · n) groups with the lowest mean reward over all n groups (equal means: the earlier
 * group is dropped first), then, when zeroVariance is on, the remaining groups whose rewards are all equal.
 */
export function filterGroups(
  groups: readonly RewardGroup[],
  options: Partial<GroupFilterOptions> = {},
): GroupFilterResult {
  const o = { ...DEFAULT_GROUP_FILTER, ...options };
  if (!(o.lowMeanRatio >= 0 && o.lowMeanRatio < 1))
    throw new Error(`group filter lowMeanRatio must be in [0, 1), got ${o.lowMeanRatio}; 0 turns it off`);
  const mean = (r: readonly number[]): number => r.reduce((a, b) => a + b, 0) / r.length;
  for (const g of groups) if (g.rewards.length === 0) throw new Error(`group "${g.key}" has no rewards`);
  const byMean = groups.map((g, i) => ({ i, m: mean(g.rewards) })).sort((a, b) => a.m - b.m || a.i - b.i);
  const lowMean = new Set(byMean.slice(0, Math.floor(o.lowMeanRatio * groups.length)).map((x) => x.i));
  const result: GroupFilterResult = { kept: [], droppedLowMean: [], droppedZeroVariance: [] };
  groups.forEach((g, i) => {
    if (lowMean.has(i)) result.droppedLowMean.push(g.key);
    else if (o.zeroVariance && g.rewards.every((r) => r === g.rewards[0])) result.droppedZeroVariance.push(g.key);
    else result.kept.push(g.key);
  });
  return result;
}
