import type { Kernels } from '../backend/kernels.js';
import type { Tensor } from '../tensor/tensor.js';

/**
 * Global L2 norm of all gradients; when it exceeds maxNorm, scales them down to maxNorm (as torch's clip_grad_norm_).
 * Returns the norm before clipping — NaN or Infinity when a gradient is not finite, in which case nothing is scaled
 * and the caller should skip the step.
 */
export function clipGradNorm(k: Kernels, params: Iterable<Tensor>, maxNorm: number): number {
  const grads = [...params].map((p) => p.grad).filter((g): g is Float32Array => g !== null);
  let sq = 0;
  for (const g of grads) sq += k.sumSquares(g, g.length);
  const norm = Math.sqrt(sq);
  if (!Number.isFinite(norm) || !(maxNorm > 0) || norm <= maxNorm) return norm;
  const scale = maxNorm / (norm + 1e-6);
  for (const g of grads) k.scale(g, scale, g.length);
  return norm;
}
