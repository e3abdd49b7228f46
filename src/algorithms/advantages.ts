/**
 * Advantage estimators by name — one registry, like verl's: group-relative advantages of GRPO/GSPO (HACRL Eq. 5) with
 * three scalings, and HACPO's capability-aware advantage (Eqs. 6–9) with the discrepancy coefficients of Eq. 10 beside
 * it; and the zero-variance group filter.
 */
import { capabilityAwareBatchAdvantages } from './hacpo/advantage.js';
import type { BaselineSettings } from './hacpo/baseline.js';
import { baselineRatios, discrepancyCoefficients } from './hacpo/capability.js';
import { type Grouping, groupIsConstant, groupMean, groupMembers, groupStd } from './grouping.js';

/**
 * How centred rewards are scaled: 'group-std' divides by the std of the response's own group (GRPO, HACRL Eq. 5);
 * 'batch-std' by the std of all rewards of the batch (TRL's scale_rewards='batch'); 'none' only centres (Dr. GRPO,
 * verl's norm_adv_by_std_in_grpo=false).
 */
export type AdvantageNormalization = 'group-std' | 'batch-std' | 'none';

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

/** What an estimator gets: one learner's pool of responses (its own, and every agent's when rollouts are shared). */
export interface AdvantageInput {
  rewards: readonly number[];
  /** The prompt group of each response. */
  groups: readonly number[];
  /** The agent (team index) that generated each response. */
  generators: readonly number[];
  /** The learner's team index. */
  learner: number;
  /** Every agent's capability estimate P̂ (HACRL Eq. 9; NaN before any step). */
  capability: readonly number[];
  /** HACPO's switches: the capability-aware baseline (Eqs. 6–8) and the discrepancy coefficient (Eq. 10). */
  capabilityBaseline: boolean;
  discrepancyCoefficient: boolean;
  /** Which capability-aware μ̂ (hacpo.baseline); default the paper's Eq. 7. */
  baseline?: BaselineSettings;
  /** Groups without the learner's responses take the partner-only baseline (Eq. 7′) instead of failing; default false. */
  partnerOnly?: boolean;
}

/** An estimator's output, in pool order. */
export interface AdvantageOutput {
  advantages: Float64Array;
  /** Per agent ω^(k,j) of the baseline (Eq. 8); null for group-relative estimators. */
  omega: Float64Array | null;
  /** Per agent ω^(j,k), the factor on its responses' advantages in the loss (Eq. 10); null: 1 for all. */
  coefficients: Float64Array | null;
  /** Groups whose capability-aware baseline fell back to the learner's own mean. */
  fallbackGroups: number;
}

/** An advantage estimator: its one-line summary and the function. */
export interface AdvantageEstimator {
  summary: string;
  estimate(input: AdvantageInput): AdvantageOutput;
}

/** A group-relative estimator with `normalization`. */
function groupRelative(normalization: AdvantageNormalization, summary: string): AdvantageEstimator {
  return {
    summary,
    estimate: (x) => ({
      advantages: groupAdvantages(x.rewards, { groupIds: x.groups }, { normalization }),
      omega: null,
      coefficients: null,
      fallbackGroups: 0,
    }),
  };
}

/** Every advantage estimator, by the name recipes and the config (optim.advantage) use. */
export const ADVANTAGE_ESTIMATORS = {
  'group-std': groupRelative('group-std', "reward − group mean, over the group's std (GRPO, HACRL Eq. 5)"),
  'batch-std': groupRelative('batch-std', "reward − group mean, over the step's std"),
  none: groupRelative('none', 'reward − group mean, unscaled (Dr. GRPO)'),
  'capability-aware': {
    summary: "HACPO: every agent's responses against a capability-weighted baseline (HACRL Eqs. 6–10)",
    estimate: (x) => {
      const omega = baselineRatios(x.capability, x.learner);
      const a = capabilityAwareBatchAdvantages(x.rewards, x.generators, x.groups, x.learner, omega, {
        capabilityAware: x.capabilityBaseline,
        baseline: x.baseline,
        capability: x.capability,
        partnerOnly: x.partnerOnly ?? false,
      });
      const coefficients = x.discrepancyCoefficient ? discrepancyCoefficients(x.capability, x.learner) : null;
      return { advantages: a.advantages, omega, coefficients, fallbackGroups: a.fallbackGroups };
    },
  },
} as const satisfies Record<string, AdvantageEstimator>;

/** An advantage estimator's name. */
export type AdvantageEstimatorName = keyof typeof ADVANTAGE_ESTIMATORS;
/** The estimators' names, in the order the config schema lists them. */
export const ADVANTAGE_ESTIMATOR_NAMES = Object.keys(ADVANTAGE_ESTIMATORS) as [
  AdvantageEstimatorName,
  ...AdvantageEstimatorName[],
];
