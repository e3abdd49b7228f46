/**
 * Agent capability estimates and the capability ratio ω (HACRL Eqs. 8–10, spec §1): how well each agent has been
 * doing lately, and how two agents compare. ω rescales foreign rewards in the learner's baseline (Eq. 7) and
 * foreign advantages in the loss (Eq. 10).
 */

/** Smallest capability estimate: an agent that solved nothing still has a finite ratio to the others. */
export const CAPABILITY_FLOOR = 1e-8;

/** Every ratio ω used anywhere is clamped to [0.1, 10] (spec §1), so one agent can never rescale another by more. */
export const RATIO_CLAMP = { min: 0.1, max: 10 } as const;

/**
 * P̂ of one agent (HACRL Eq. 9): the plain mean of its last K per-step accuracies P_t, the current step included
 * (a sliding window, not an exponential average). Before K steps have been recorded it averages what there is.
 * Rewards are assumed ≥ 0 (accuracies); a negative mean is floored like a zero one.
 */
export class CapabilityTracker {
  private readonly values: number[] = [];

  /** A tracker over a sliding window of `window` steps (K, default 5; the authors' value); `window` stays readable. */
  constructor(readonly window = 5) {
    if (!Number.isInteger(window) || window < 1) {
      throw new Error(`capability window K must be an integer ≥ 1 (steps averaged in Eq. 9), got ${window}`);
    }
  }

  /** Appends this step's P_t (HACRL Eq. 9): the agent's mean reward over its own rollouts of this step's batch. */
  record(accuracy: number): void {
    if (!Number.isFinite(accuracy)) {
      throw new Error(`capability record needs a finite mean reward, got ${accuracy}: check this step's rewards`);
    }
    this.values.push(accuracy);
    if (this.values.length > this.window) this.values.shift();
  }

  /** P̂ = mean of the kept values, floored at CAPABILITY_FLOOR; NaN before anything was recorded (capabilityRatio → 1). */
  estimate(): number {
    if (this.values.length === 0) return NaN;
    let sum = 0;
    for (const v of this.values) sum += v;
    return Math.max(CAPABILITY_FLOOR, sum / this.values.length);
  }

  /** The values kept (at most K), oldest first: what a checkpoint stores. */
  history(): number[] {
    return [...this.values];
  }

  /** A tracker restored from history(); a history longer than `window` keeps only its last `window` values. */
  static fromHistory(window: number, history: readonly number[]): CapabilityTracker {
    const t = new CapabilityTracker(window);
    for (const v of history) t.record(v);
    return t;
  }
}

/**
 * ω^(k,j) = P̂_k / P̂_j (HACRL Eq. 8), each estimate floored at CAPABILITY_FLOOR, the ratio clamped to RATIO_CLAMP.
 * 1 when either estimate is NaN (no history yet): with nothing known, treat the agents as equal.
 */
export function capabilityRatio(pK: number, pJ: number): number {
  if (Number.isNaN(pK) || Number.isNaN(pJ)) return 1;
  const ratio = Math.max(CAPABILITY_FLOOR, pK) / Math.max(CAPABILITY_FLOOR, pJ);
  return Math.min(RATIO_CLAMP.max, Math.max(RATIO_CLAMP.min, ratio));
}

/**
 * The baseline ratios of learner k (HACRL Eq. 8 as used in Eq. 7): out[j] = ω^(k,j) from every agent's P̂
 * (`estimates[j]`, NaN allowed); out[k] = 1. This is the `omega` argument of the advantage functions.
 */
export function baselineRatios(estimates: readonly number[], learner: number): Float64Array {
  checkAgent(learner, estimates.length);
  return Float64Array.from(estimates, (pJ, j) => (j === learner ? 1 : capabilityRatio(estimates[learner]!, pJ)));
}

/**
 * The discrepancy coefficients of learner k (HACRL Eq. 10): out[j] = ω^(j,k) = P̂_j / P̂_k, the factor on the
 * advantage of agent j's responses in k's loss (>1 for stronger agents, <1 for weaker ones); out[k] = 1.
 */
export function discrepancyCoefficients(estimates: readonly number[], learner: number): Float64Array {
  checkAgent(learner, estimates.length);
  return Float64Array.from(estimates, (pJ, j) => (j === learner ? 1 : capabilityRatio(pJ, estimates[learner]!)));
}

/** Throws unless `agent` indexes one of `count` agents. */
function checkAgent(agent: number, count: number): void {
  if (!Number.isInteger(agent) || agent < 0 || agent >= count) {
    throw new Error(`learner ${agent} is not one of the ${count} agents with a capability estimate`);
  }
}
