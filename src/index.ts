/** hacrl's public API. */
export type { AttentionShape, F32, GemmArgs, I32, Kernels, MatrixRef } from './backend/kernels.js';
export { Engine, KernelInputError, engine } from './backend/engine.js';
export { availableBackends, defaultBackend, nativeBackend, nativeLoadError } from './backend/select.js';
export { typescriptKernels } from './backend/typescript.js';
export { Tensor } from './tensor/tensor.js';
export { Tape, type Ctx } from './tensor/tape.js';
export * as ops from './tensor/ops.js';
