/**
 * HACPO (HACRL Eqs. 6–14): capability estimates, capability-aware advantages, cross-agent ratios and the foreign
 * sequence loss. The whole objective is the one policyLoss with the 'seq-clip' surrogate on own responses (GSPO,
 * Eqs. 47–49) and 'hacpo-foreign' on foreign ones (surrogates.ts).
 */
export {
  CAPABILITY_FLOOR,
  RATIO_CLAMP,
  CapabilityTracker,
  baselineRatios,
  capabilityRatio,
  discrepancyCoefficients,
} from './capability.js';
export {
  type CapabilityAdvantageOptions,
  type CapabilityAdvantageResult,
  type CapabilityBatchAdvantages,
  capabilityAwareAdvantages,
  capabilityAwareBatchAdvantages,
  capabilityBaseline,
  partnerOnlyBaseline,
} from './advantage.js';
export {
  type BaselineContext,
  type BlendParts,
  type BaselineSettings,
  type HacpoBaseline,
  DEFAULT_BASELINE,
  HACPO_BASELINES,
  HACPO_BASELINE_SUMMARIES,
  blendBaseline,
  blendParts,
  blendWeight,
  clampedRatios,
  groupBaseline,
  paperBaseline,
  perQuestionRatios,
  validateBaseline,
} from './baseline.js';
export { type ExponentialIs, crossSequenceLogRatio, exponentialIs, normalizedLogProb } from './ratio.js';
export {
  type RatioNormalization,
  RATIO_NORMALIZATIONS,
  crossLogRatio,
  inBandFraction,
  learnerLogRatioGradient,
  ratioDivisor,
  responseCharacters,
} from './ratio-normalization.js';
export {
  type ForeignSequenceLoss,
  type StepwiseClip,
  DEFAULT_STEPWISE_CLIP,
  foreignSequenceLoss,
  stepwiseLowerBound,
  validateStepwiseClip,
} from './stepwise-clip.js';
