/** Group-relative advantages of GRPO/GSPO (HACRL Eq. 5) and the zero-variance group filter. */
import { type Grouping, groupIsConstant, groupMean, groupMembers, groupStd } from './grouping.js';

/**
 * How centred rewards are scaled: 'group-std' divides by the std of the response's own group (GRPO, HACRL Eq. 5);
 * 'batch-std' by the std of all rewards of the batch (TRL's scale_rewards='batch'); 'none' only centres (Dr. GRPO,
 * verl's norm_adv_by_std_in_grpo=false).
 */
export const ADVANTAGE_NORMALIZATIONS = ['group-std', 'batch-std', 'none'] as const;
/** One of ADVANTAGE_NORMALIZATIONS. */
export type AdvantageNormalization = (typeof ADVANTAGE_NORMALIZATIONS)[number];

/** Options of groupAdvantages. */
export interface AdvantageOptions {
  /** Scaling of the centred rewards; default 'group-std'. */
  normalization?: AdvantageNormalization;
  /** Added to the std before dividing; default 1e-6 (verl's GRPO and the HACPO code; TRL uses 1e-4). */
  epsilon?: number;
}

/**
 * A_i = (R_i − mean_g(R)) / (std + ε) for response i of group g (HACRL Eq. 5), std the unbiased (n − 1) one as in
 * verl/TRL. A group whose rewards are all equal gets exactly 0 (float rounding of its mean would otherwise leave
 * ±1e-17 / ε ≈ ±1e-11). Throws on a group of one response, which has no baseline.
 */
export function groupAdvantages(
  rewards: ArrayLike<number>,
  grouping: Grouping,
  options: AdvantageOptions = {},
): Float64Array {
  const normalization = options.normalization ?? 'group-std';
  const epsilon = options.epsilon ?? 1e-6;
  if (!(epsilon >= 0)) throw new Error(`advantage epsilon must be ≥ 0, got ${epsilon}`);
  const groups = groupMembers(rewards.length, grouping);
  const batchScale = normalization === 'batch-std' ? groupStd(rewards, allIndices(rewards.length)) + epsilon : 1;
  const out = new Float64Array(rewards.length);
  for (const members of groups) {
    if (groupIsConstant(rewards, members)) continue;
    const mean = groupMean(rewards, members);
    const scale = normalization === 'group-std' ? groupStd(rewards, members) + epsilon : batchScale;
    for (const i of members) out[i] = (rewards[i]! - mean) / scale;
  }
  return out;
}

/** 0, 1, …, n − 1. */
function allIndices(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

/** Which groups carry no learning signal because all their rewards are equal. */
export interface ZeroVarianceGroups {
  /** Per group (in order of first appearance): true when its rewards are all equal. */
  zeroVariance: boolean[];
  /** Per response: true when its group has reward variance (keep it when filtering). */
  keep: boolean[];
  /** Fraction of groups with zero variance (the per-step metric). */
  fraction: number;
}

/**
 * Finds the groups whose rewards are all equal (max − min ≤ tolerance, default 0): their advantages are 0, so they
 * only dilute the loss; DAPO's dynamic sampling drops them. Throws on a group of one response, like groupAdvantages.
 */
export function zeroVarianceGroups(rewards: ArrayLike<number>, grouping: Grouping, tolerance = 0): ZeroVarianceGroups {
  const groups = groupMembers(rewards.length, grouping);
  const zeroVariance = groups.map((members) => groupIsConstant(rewards, members, tolerance));
  const keep = new Array<boolean>(rewards.length).fill(false);
  for (const [g, members] of groups.entries()) for (const i of members) keep[i] = !zeroVariance[g];
  const fraction = groups.length === 0 ? 0 : zeroVariance.filter(Boolean).length / groups.length;
  return { zeroVariance, keep, fraction };
}
