/**
 * GRPO's token-level clipped objective (Shao et al. 2024, DeepSeekMath, arXiv 2402.03300; not numbered in the HACRL
 * preprint), with DAPO's asymmetric clip and verl's optional dual clip.
 */
import { type ClipRange, type Surrogate, clippedSurrogate } from './clipped-surrogate.js';

/** verl clamps the token log-ratio to ±20 before exp so one wild token cannot overflow; beyond it the gradient is 0. */
export const MAX_TOKEN_LOG_RATIO = 20;

/** One token's loss, its derivative in the new log-prob, the ratio and which clip was active. */
export interface TokenLoss extends Surrogate {
  /** ∂ℓ/∂ log π_θ(y_t). */
  dNew: number;
  /** ρ_t = π_θ / π_old. */
  ratio: number;
}

/**
 * ρ_t = exp(new_t − old_t); ℓ_t = −min(ρ_t·A, clip(ρ_t, 1 − ε_low, 1 + ε_high)·A). With dual clip c ≥ 1 (Ye et al.
 * 2020, arXiv 1912.09729, as verl's clip_ratio_c), for A < 0 the loss is also capped: ℓ_t = min(ℓ_t, −c·A), so a
 * negative sample whose ratio grew past c cannot push arbitrarily hard. ∂ℓ_t/∂new_t = (∂ℓ/∂ρ)·ρ_t: −A·ρ_t when the
 * unclipped branch is active, 0 when any clip is.
 */
export function grpoTokenLoss(
  newLogProb: number,
  oldLogProb: number,
  advantage: number,
  clip: ClipRange,
  dualClip?: number,
): TokenLoss {
  const logRatio = newLogProb - oldLogProb;
  const clamped = Math.min(MAX_TOKEN_LOG_RATIO, Math.max(-MAX_TOKEN_LOG_RATIO, logRatio));
  const ratio = Math.exp(clamped);
  const s = clippedSurrogate(ratio, advantage, clip);
  if (dualClip !== undefined && advantage < 0 && s.loss > -dualClip * advantage) {
    return { loss: -dualClip * advantage, dRatio: 0, clipped: 'dual', dNew: 0, ratio };
  }
  const dNew = clamped === logRatio ? s.dRatio * ratio : 0;
  return { ...s, dNew, ratio };
}
