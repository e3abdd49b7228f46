/** hacrl's public API. */
export type { AttentionShape, F32, GemmArgs, I32, Kernels, MatrixRef } from './backend/kernels.js';
export { Engine, KernelInputError, engine } from './backend/engine.js';
export { availableBackends, defaultBackend, nativeBackend, nativeLoadError } from './backend/select.js';
export { typescriptKernels } from './backend/typescript.js';
export { Tensor } from './tensor/tensor.js';
export { Tape, type Ctx } from './tensor/tape.js';
export * as ops from './tensor/ops.js';
export * from './algorithms/hacpo/index.js';
export { type ClipRange, DAPO_CLIP, GSPO_CLIP, clippedSurrogate } from './algorithms/clip.js';
export { groupAdvantages, zeroVarianceGroups } from './algorithms/advantages.js';
export { policyLoss, type PolicyLossOptions } from './algorithms/policy-loss.js';
export { gspoLogRatio, gspoSequenceLoss } from './algorithms/gspo.js';
export { retokenizeResponse, sameTokenization, spanMean, UnencodableTextError } from './rollout/retokenize.js';
export { hacpoStep, type Collaborator, type HacpoMechanisms, type HacpoStepOptions } from './train/hacpo-step.js';
export { rlStep, type RlStepOptions } from './train/rl-step.js';
export { trainRl } from './train/rl-trainer.js';
export { loadRunConfig } from './config/load-config.js';
