/**
 * Per-token estimators of KL(π_θ ‖ π_ref) from the sampled token's log-probs (Schulman, "Approximating KL
 * divergence", 2020), with their derivatives in the new log-prob.
 */

/**
 * 'k1': new − ref (unbiased, high variance, can be negative); 'k3': exp(ref − new) − (ref − new) − 1 (low variance,
 * never negative; GRPO's estimator, verl's 'low_var_kl').
 */
export const KL_ESTIMATORS = ['k1', 'k3'] as const;
/** One of KL_ESTIMATORS. */
export type KlEstimator = (typeof KL_ESTIMATORS)[number];

/** An estimate and its derivative ∂/∂ new log-prob. */
export interface KlTerm {
  value: number;
  grad: number;
}

/** k3 is capped here (gradient 0 beyond), as in verl's low_var_kl, so one token far off the reference cannot dominate. */
export const K3_MAX = 10;

/** k1 = new − ref, ∂k1/∂new = 1. */
export function klK1(newLogProb: number, refLogProb: number): KlTerm {
  return { value: newLogProb - refLogProb, grad: 1 };
}

/** k3 = e^d − d − 1 with d = ref − new; ∂k3/∂new = −(e^d − 1) = 1 − e^d; capped at K3_MAX. */
export function klK3(newLogProb: number, refLogProb: number): KlTerm {
  const d = refLogProb - newLogProb;
  const e = Math.exp(d);
  const value = e - d - 1;
  return value > K3_MAX ? { value: K3_MAX, grad: 0 } : { value, grad: 1 - e };
}

/** The chosen estimator for one token. */
export function klTerm(estimator: KlEstimator, newLogProb: number, refLogProb: number): KlTerm {
  return estimator === 'k1' ? klK1(newLogProb, refLogProb) : klK3(newLogProb, refLogProb);
}

/**
 * Adds coef·w·∂KL/∂new of each of `tokens` of one sequence to its gradient `g` and returns coef·w·Σ KL, the
 * sequence's share of the penalty; every token's estimate is also handed to `record` (for the mean-KL statistic).
 */
export function addKlPenalty(
  estimator: KlEstimator,
  coef: number,
  w: number,
  logProbs: ArrayLike<number>,
  refLogProbs: ArrayLike<number>,
  tokens: Iterable<number>,
  g: Float64Array,
  record: (value: number) => void,
): number {
  let loss = 0;
  for (const t of tokens) {
    const k = klTerm(estimator, logProbs[t]!, refLogProbs[t]!);
    record(k.value);
    loss += coef * w * k.value;
    g[t] += coef * w * k.grad;
  }
  return loss;
}
