/**
 * Every algorithm's recipe: the surrogate it optimises and its advantage estimator (by their registry names,
 * surrogates.ts and advantages.ts), whether its agents share rollouts, and the settings it was published with. A
 * config names an algorithm (or a named variant) and states only what it changes; the config layer turns a recipe
 * into defaults (src/config/recipe-defaults.ts), so `algorithm: gspo` alone is GSPO.
 */
import type { AdvantageEstimatorName } from './advantages.js';
import type { LossAggregation } from './aggregate.js';
import { type ClipRange, DAPO_CLIP, GSPO_CLIP } from './clipped-surrogate.js';
import type { SurrogateName } from './surrogates.js';

/**
 * How agents use each other's rollouts: 'none' (each learns alone), 'hacpo' (HACRL Eqs. 6–14, each mechanism a
 * switch), 'naive' (every foreign response treated as an own one: HACPO with every switch off).
 */
export type Sharing = 'none' | 'hacpo' | 'naive';

/** The HACPO mechanisms (the `hacpo` config section's switches). */
export interface HacpoSwitches {
  /** Eqs. 6–8: the capability-aware baseline (false: the plain mean of all agents' rewards). */
  capabilityBaseline: boolean;
  /** Eq. 10: the discrepancy coefficient on foreign advantages. */
  discrepancyCoefficient: boolean;
  /** Eqs. 12–14 on foreign responses: a foreign surrogate ('hacpo-foreign', 'hacpo-foreign-unclipped', 'seq-clip'). */
  foreignSurrogate: SurrogateName;
  /** Eq. 12's exponent α (0 = off). */
  alpha: number;
}

/** What an algorithm is, and the settings it runs with unless the config says otherwise. */
export interface Recipe {
  /** The algorithm this recipe runs (a variant names its base algorithm). */
  algorithm: 'grpo' | 'gspo' | 'hacpo' | 'naive' | 'at-grpo';
  /** One line for `hacrl config schema`. */
  summary: string;
  /** The surrogate of own responses (SURROGATES). */
  surrogate: SurrogateName;
  sharing: Sharing;
  /** Own-response clip range [1 − ε_low, 1 + ε_high]. */
  clip: ClipRange;
  aggregation: LossAggregation;
  /** The advantage estimator (ADVANTAGE_ESTIMATORS). */
  advantage: AdvantageEstimatorName;
  /** Optimizer updates per epoch (M). */
  miniBatches: number;
  /** Completions per prompt and agent (G); absent: the run-wide default. */
  groupSize?: number;
  /** Number of agents the recipe is defined for ('one' for the resource-equivalent single-agent baseline). */
  agents?: 'one';
  /** HACPO switches; only for sharing 'hacpo' / 'naive'. */
  hacpo?: HacpoSwitches;
}

const GSPO: Omit<Recipe, 'algorithm' | 'summary'> = {
  surrogate: 'seq-clip',
  sharing: 'none',
  clip: GSPO_CLIP,
  aggregation: 'seq-mean-token-mean',
  advantage: 'group-std',
  // The authors' GSPO: 2 optimizer updates per step.
  miniBatches: 2,
};

const GRPO: Recipe = {
  algorithm: 'grpo',
  summary: 'GRPO with DAPO clip-higher (ε 0.2/0.28), token-mean loss, group z-score advantages',
  surrogate: 'token-clip',
  sharing: 'none',
  clip: DAPO_CLIP,
  aggregation: 'token-mean',
  advantage: 'group-std',
  miniBatches: 1,
};

/** The algorithms, each with its published recipe: `algorithm: X` alone runs RECIPES[X]. */
export const ALGORITHM_RECIPES = {
  grpo: GRPO,
  gspo: { algorithm: 'gspo', summary: 'GSPO (ε 3e-4/4e-4, seq-mean-token-mean, 2 updates)', ...GSPO },
  // HACPO as the authors ran it: GSPO's clip for own responses, each learner's n·B·G samples in 4 mini-batches.
  hacpo: {
    algorithm: 'hacpo',
    summary: 'HACPO (GSPO for own responses, Eqs. 6–14 for foreign ones, 4 updates)',
    ...GSPO,
    sharing: 'hacpo',
    advantage: 'capability-aware',
    miniBatches: 4,
    hacpo: { capabilityBaseline: true, discrepancyCoefficient: true, foreignSurrogate: 'hacpo-foreign', alpha: 1 },
  },
  naive: {
    algorithm: 'naive',
    summary: 'naive sharing: HACPO with every mechanism off (plain GSPO on all responses)',
    ...GSPO,
    sharing: 'naive',
    advantage: 'capability-aware',
    miniBatches: 4,
    hacpo: { capabilityBaseline: false, discrepancyCoefficient: false, foreignSurrogate: 'seq-clip', alpha: 0 },
  },
  // AT-GRPO (spec "Update"): (r − mean)/(std + 1e-6) within (instance, agent, turn) groups, PPO clip ε 0.2,
  // token-mean, no KL, several mini-batches per batch; the run's `workflow` section supplies the groups.
  'at-grpo': {
    algorithm: 'at-grpo',
    summary: 'AT-GRPO (multi-agent workflow; groups per instance, agent and turn; ε 0.2, token-mean, 4 updates)',
    surrogate: 'token-clip',
    sharing: 'none',
    clip: { low: 0.2, high: 0.2 },
    aggregation: 'token-mean',
    advantage: 'group-std',
    miniBatches: 4,
  },
} as const satisfies Record<string, Recipe>;

/** An algorithm name. */
export type Algorithm = keyof typeof ALGORITHM_RECIPES;
/** The algorithm names, in the order the config schema lists them. */
export const ALGORITHMS = Object.keys(ALGORITHM_RECIPES) as [Algorithm, ...Algorithm[]];

/** Named variants of an algorithm (the config's `preset`): a recipe with a few settings changed. */
export const VARIANT_RECIPES = {
  'grpo-dapo': { ...GRPO, summary: 'the grpo recipe under its paper name (DAPO clip-higher)' },
  // Dr. GRPO (Liu et al. 2025, arXiv 2503.20783): no std scaling of advantages, per-sequence token sums.
  'dr-grpo': {
    ...GRPO,
    summary: 'Dr. GRPO: advantages only centred, token sums per sequence',
    advantage: 'none',
    aggregation: 'seq-mean-token-sum',
  },
  gspo: ALGORITHM_RECIPES.gspo,
  // Resource-equivalent to a 2-agent run: one agent, twice the group size (8) and twice GSPO's updates, so it
  // generates as many rollouts per step as HACPO's two agents together.
  'gspo-x2': {
    ...ALGORITHM_RECIPES.gspo,
    summary: 'GSPO×2: one agent, G 16 and 4 updates (resource-equivalent to 2 agents)',
    groupSize: 16,
    miniBatches: 4,
    agents: 'one',
  },
  hacpo: ALGORITHM_RECIPES.hacpo,
  naive: ALGORITHM_RECIPES.naive,
  // CISPO (MiniMax-M1, arXiv 2506.13585): GRPO's recipe with the clipped importance weight on log π per token.
  cispo: { ...GRPO, summary: 'CISPO: clipped IS weight, every token keeps its gradient', surrogate: 'cispo' },
} as const satisfies Record<string, Recipe>;

/** A variant name. */
export type Variant = keyof typeof VARIANT_RECIPES;
/** The variant names. */
export const VARIANTS = Object.keys(VARIANT_RECIPES) as [Variant, ...Variant[]];

/** Whether the agents of an algorithm learn from each other's rollouts. */
export function sharesRollouts(algorithm: Algorithm): boolean {
  return ALGORITHM_RECIPES[algorithm].sharing !== 'none';
}
