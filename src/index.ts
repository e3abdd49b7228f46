/** hacrl's public API. */
export type { AttentionShape, F32, GemmArgs, I32, Kernels, MatrixRef } from './backend/kernels.js';
export { Engine, KernelInputError, engine } from './backend/engine.js';
export { availableBackends, defaultBackend, nativeBackend, nativeLoadError } from './backend/select.js';
export { typescriptKernels } from './backend/typescript.js';
export { Tensor } from './tensor/tensor.js';
export { Tape, type Ctx } from './tensor/tape.js';
export * as ops from './tensor/ops.js';
export * from './algorithms/hacpo/index.js';
export { type ClipRange, DAPO_CLIP, GSPO_CLIP, clippedSurrogate } from './algorithms/clipped-surrogate.js';
export { ADVANTAGE_ESTIMATORS, groupAdvantages, zeroVarianceGroups } from './algorithms/advantages.js';
export { SURROGATES, type Surrogate, type SurrogateName } from './algorithms/surrogates.js';
export { gspoLogRatio, gspoSequenceLoss } from './algorithms/gspo.js';
export { retokenizeResponse, sameTokenization, spanMean, UnencodableTextError } from './rollout/retokenize.js';
export {
  policyLoss,
  type PolicyObjective,
  type ForeignTerms,
  type PolicyLossOptions,
  type PolicyLossStats,
} from './algorithms/policy-loss.js';
export type { RolloutCorrection } from './algorithms/rollout-correction.js';
export { type SampleRecord, type LearnerTokens, type LearnerView, learnerView } from './train/sample-table.js';
export { RolloutSource, type SampleSource, type StepInputs, type RolloutRole } from './train/sample-sources.js';
export { learnerStep, type Learner, type UpdateRecipe } from './train/learner-step.js';
export { teamStep } from './train/team-step.js';
export { buildLearners, partnerTokenizers, type TeamMember } from './train/learners.js';
export { resolveRun, type ResolvedRun } from './train/resolved-run.js';
export { ALGORITHM_RECIPES, VARIANT_RECIPES, type Recipe } from './algorithms/recipes.js';
export { trainRl } from './train/rl-trainer.js';
export { createProgressDisplay, type ProgressDisplay, type StepProgress } from './train/progress.js';
export { healthWarnings, type HealthThresholds, type HealthWarning } from './train/health-warnings.js';
export { loadRunConfig } from './config/load-config.js';
