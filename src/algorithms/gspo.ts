/**
 * GSPO's sequence-level objective (Zheng et al. 2025, arXiv 2507.18071; HACRL Eqs. 11, 47–49 for an agent's own
 * responses).
 *
 * Gradient. Every token of sequence i carries the same loss ℓ_i(s_i) and, under every aggregation mode, the same weight
 * w_i, so L = Σ_i w_i·|y_i|·ℓ_i(s_i). Since log s_i is the mean of (new_t − old_t) over the |y_i| counted tokens,
 * ∂s_i/∂new_t = s_i/|y_i|, hence
 *   ∂L/∂new_t = w_i·|y_i|·ℓ_i'(s_i)·s_i/|y_i| = w_i·(−A_i·s_i)  (unclipped branch active),  0  (clipped).
 * That is exactly the GSPO-token form, where token t's ratio is sg(s_i)·exp(new_t − sg(new_t)) and its own term has
 * ∂/∂new_t = −A_i·s_i. For one sequence under seq-mean-token-mean (w = 1/|y|) it reads −A·s/|y|.
 */
import { type ClipRange, type Surrogate, clippedSurrogate } from './clipped-surrogate.js';
import type { PolicySequence } from './sequence.js';

/** log s is clamped at 10 (HACPO spec §4, verl's GSPO); beyond it the gradient is 0. */
export const MAX_SEQUENCE_LOG_RATIO = 10;

/** A sequence's loss ℓ(s), its derivative in log s, and s. */
export interface SequenceLoss extends Surrogate {
  /** ∂ℓ/∂ log s. */
  dLogRatio: number;
  /** s = exp(log s), after the clamp. */
  ratio: number;
}

/** log s = (1/|y|) Σ_{t ∈ tokens} (new_t − old_t) over the counted `tokens` (HACRL Eq. 11 = Eq. 48); 0 when none. */
export function gspoLogRatio(seq: PolicySequence, tokens: readonly number[]): number {
  let sum = 0;
  for (const t of tokens) sum += seq.logProbs[t]! - seq.oldLogProbs![t]!;
  return tokens.length === 0 ? 0 : sum / tokens.length;
}

/** ℓ(s) = −min(s·A, clip(s, 1 − ε_low, 1 + ε_high)·A) (HACRL Eq. 47 with the clip of Eq. 49); ∂ℓ/∂ log s = (∂ℓ/∂s)·s. */
export function gspoSequenceLoss(logRatio: number, advantage: number, clip: ClipRange): SequenceLoss {
  const clamped = Math.min(MAX_SEQUENCE_LOG_RATIO, logRatio);
  const ratio = Math.exp(clamped);
  const s = clippedSurrogate(ratio, advantage, clip);
  const dLogRatio = clamped === logRatio ? s.dRatio * ratio : 0;
  return { ...s, dLogRatio, ratio };
}
