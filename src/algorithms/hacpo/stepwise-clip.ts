/**
 * Asymmetric stepwise clipping of foreign responses and their sequence loss (HACRL Eqs. 12–14, spec §5).
 */
import { MAX_SEQUENCE_LOG_RATIO } from '../gspo.js';
import { exponentialIs } from './ratio.js';

/** The foreign clip band [1 − δ + m·δ_step, 1] of HACRL Eq. 14. */
export interface StepwiseClip {
  /** δ: the band's lower bound at the first update of a step is 1 − δ; default 0.2. */
  delta: number;
  /** δ_step: how much the lower bound rises with each further optimizer update in the step; default 0.025 (0: fixed). */
  deltaStep: number;
}

/** The authors' values: δ = 0.2, δ_step = 0.025. */
export const DEFAULT_STEPWISE_CLIP: StepwiseClip = { delta: 0.2, deltaStep: 0.025 };

/** Throws unless 0 ≤ δ ≤ 1 and δ_step ≥ 0 (both finite). */
export function validateStepwiseClip(clip: StepwiseClip): void {
  if (!(clip.delta >= 0 && clip.delta <= 1 && clip.deltaStep >= 0 && Number.isFinite(clip.deltaStep))) {
    throw new Error(`stepwise clip needs 0 ≤ δ ≤ 1 and δ_step ≥ 0, got δ ${clip.delta}, δ_step ${clip.deltaStep}`);
  }
}

/**
 * The lower bound min(1, 1 − δ + m·δ_step) for the m-th optimizer update (0-based) of the current step (HACRL
 * Eq. 14): later mini-batches accept only foreign responses ever closer to the learner, as it drifts from the old
 * policies. Capped at 1 so the band never becomes empty. Throws on a bad clip or a non-integer m < 0.
 */
export function stepwiseLowerBound(clip: StepwiseClip, update: number): number {
  validateStepwiseClip(clip);
  if (!(Number.isInteger(update) && update >= 0)) {
    throw new Error(`update index m must be an integer ≥ 0 (the optimizer update within the step), got ${update}`);
  }
  return Math.min(1, 1 - clip.delta + update * clip.deltaStep);
}

/** One foreign sequence's loss ℓ, its derivative in log s, s, and where s fell relative to the band. */
export interface ForeignSequenceLoss {
  /** ℓ = −A·ω·c·sg(c)^α. */
  loss: number;
  /** ∂ℓ/∂ log s: −A·ω·s^(1+α) inside the band, 0 outside (c constant there) or beyond the log s clamp. */
  dLogRatio: number;
  /** s = exp(log s) after the clamp at MAX_SEQUENCE_LOG_RATIO, before the clip. */
  ratio: number;
  /** lower ≤ s ≤ 1 (bounds inclusive): the sample carries a gradient. */
  inBand: boolean;
  /** 'low': s below the stepwise lower bound; 'high': s above 1; 'none': in the band. */
  clipped: 'none' | 'low' | 'high';
}

/**
 * ℓ = −A·ω·c·sg(c)^α with c = clip(s, lower, 1) and lower = stepwiseLowerBound(clip, update) (HACRL Eqs. 12–14;
 * `clip` null: c = s, no band — the "no Clip" ablation of the paper's Figure 4;
 * `coefficient` is ω^(j,k) of Eq. 10, or 1). Unlike GSPO there is no min() with the unclipped term (spec §5):
 * outside the band c is a constant, so the sample gives no gradient whatever the sign of A — a foreign response is
 * never up-weighted (c ≤ 1), and one too far from the learner is dropped. Inside, ∂ℓ/∂ log s = −A·ω·s^(1+α).
 */
export function foreignSequenceLoss(
  logRatio: number,
  advantage: number,
  coefficient: number,
  alpha: number,
  clip: StepwiseClip | null,
  update: number,
): ForeignSequenceLoss {
  const lower = clip === null ? 0 : stepwiseLowerBound(clip, update);
  const clamped = Math.min(MAX_SEQUENCE_LOG_RATIO, logRatio);
  const ratio = Math.exp(clamped);
  const clipped = ratio < lower ? 'low' : ratio > 1 && clip !== null ? 'high' : 'none';
  const c = clipped === 'low' ? lower : clipped === 'high' ? 1 : ratio;
  const is = exponentialIs(c, alpha);
  const scale = -advantage * coefficient;
  const inBand = clipped === 'none';
  // Within the band c = s, so ∂c/∂ log s = s; the clamp (log s > 10) is always 'high', kept explicit for clarity.
  const dLogRatio = inBand && clamped === logRatio ? scale * is.dLogRatio : 0;
  return { loss: scale * is.value, dLogRatio, ratio, inBand, clipped };
}
