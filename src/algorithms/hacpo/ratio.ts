/**
 * The cross-agent sequence importance ratio and exponential importance sampling (HACRL Eqs. 11–12, spec §4).
 * Learner and generator may tokenize the response differently, so each side is a mean over its own tokens.
 */

/**
 * log s^(k,j) = Σ log π_θ^(k) over the learner's tokens / `learnerDivisor` − `generatorOld` (HACRL Eq. 11): the one
 * place Eq. 11 is formed. Per token (the paper, GSPO's length normalisation): `learnerDivisor` is the learner's token
 * count (the default) and `generatorOld` the generator's pre-update mean log-prob over the response span (for an own
 * response: the mean of the learner's own old log-probs, giving the plain GSPO ratio). Per character (spec §7,
 * ratio-normalization.ts): both are divided by the response's characters instead.
 * Not clamped here, like gspoLogRatio: the loss functions clamp at MAX_SEQUENCE_LOG_RATIO and give no gradient beyond,
 * so own responses get exactly GSPO's gradient. Throws on an empty response (it has no ratio).
 */
export function crossSequenceLogRatio(
  learnerLogProbs: ArrayLike<number>,
  generatorOld: number,
  learnerDivisor = learnerLogProbs.length,
): number {
  if (learnerLogProbs.length === 0) {
    throw new Error('a response with no tokens has no sequence ratio: leave it out of the loss');
  }
  return normalizedLogProb(learnerLogProbs, learnerDivisor) - generatorOld;
}

/** Σ log-probs / divisor: one side's normalised log-likelihood (nats per token or per character). */
export function normalizedLogProb(logProbs: ArrayLike<number>, divisor: number): number {
  let sum = 0;
  for (let t = 0; t < logProbs.length; t++) sum += logProbs[t]!;
  return sum / divisor;
}

/** s̃ = s·sg(s)^α and its derivative with the stop-gradient factor held constant. */
export interface ExponentialIs {
  /** s·sg(s)^α = s^(1+α) in value. */
  value: number;
  /** ∂value/∂ log s with sg(s)^α constant: s·sg(s)^α (equal to value: only the first factor moves). */
  dLogRatio: number;
}

/**
 * s̃ = s·sg(s)^α (HACRL Eq. 12), α ≥ 0 (0: plain s). The sg factor is a per-sample weight s^α ≤ 1 for s ≤ 1, so
 * foreign responses far from the learner's own distribution count less, while the gradient direction stays the
 * GSPO one. Throws when α < 0 or is not finite.
 */
export function exponentialIs(ratio: number, alpha: number): ExponentialIs {
  if (!(alpha >= 0 && Number.isFinite(alpha))) {
    throw new Error(`exponential importance sampling needs a finite α ≥ 0 (0 turns it off), got ${alpha}`);
  }
  const value = alpha === 0 ? ratio : ratio * ratio ** alpha;
  return { value, dLogRatio: value };
}
