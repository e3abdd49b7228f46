/** The PPO clipped surrogate shared by GRPO (per-token ratio) and GSPO (per-sequence ratio). */

/** A clip range [1 − low, 1 + high] for an importance ratio. */
export interface ClipRange {
  /** ε_low: the ratio is clipped below at 1 − low. */
  low: number;
  /** ε_high: the ratio is clipped above at 1 + high. */
  high: number;
}

/** DAPO's clip-higher (Yu et al. 2025, arXiv 2503.14476): ε_low 0.2, ε_high 0.28; the project's GRPO default. */
export const DAPO_CLIP: ClipRange = { low: 0.2, high: 0.28 };

/** GSPO's sequence-ratio range (Zheng et al. 2025; HACRL App. A): ε_low 3e-4, ε_high 4e-4; the GSPO default. */
export const GSPO_CLIP: ClipRange = { low: 3e-4, high: 4e-4 };

/** Which bound of the clip was active in the min, if any ('dual' only for GRPO's dual clip). */
export type ClipSide = 'none' | 'low' | 'high' | 'dual';

/** A clipped surrogate's loss and its derivative in the ratio. */
export interface Surrogate {
  loss: number;
  dRatio: number;
  clipped: ClipSide;
}

/** Throws when a clip range is not 0 ≤ low < 1, 0 ≤ high. */
export function validateClip(clip: ClipRange): void {
  if (!(clip.low >= 0 && clip.low < 1 && clip.high >= 0)) {
    throw new Error(`clip range needs 0 ≤ ε_low < 1 and ε_high ≥ 0, got ε_low ${clip.low}, ε_high ${clip.high}`);
  }
}

/**
 * ℓ(ρ) = −min(ρ·A, clip(ρ, 1 − ε_low, 1 + ε_high)·A) (HACRL Eq. 47/49 for ρ = s; the GRPO/PPO objective for a
 * token ratio). The clipped branch wins the min only when A > 0 and ρ > 1 + ε_high ('high') or A < 0 and ρ < 1 − ε_low
 * ('low'); there the loss is constant in ρ, so ∂ℓ/∂ρ = 0; otherwise ∂ℓ/∂ρ = −A. Exactly on a bound both branches agree
 * and the unclipped derivative is used.
 */
export function clippedSurrogate(ratio: number, advantage: number, clip: ClipRange): Surrogate {
  if (advantage > 0 && ratio > 1 + clip.high) return { loss: -(1 + clip.high) * advantage, dRatio: 0, clipped: 'high' };
  if (advantage < 0 && ratio < 1 - clip.low) return { loss: -(1 - clip.low) * advantage, dRatio: 0, clipped: 'low' };
  return { loss: -ratio * advantage, dRatio: -advantage, clipped: 'none' };
}
