/**
 * The baseline μ̂^(k) of HACPO's capability-aware advantage (HACRL Eq. 7) and variants of it, chosen by `hacpo.baseline`.
 * The paper's μ̂ is unbiased for agent k's expected reward only on average over questions (Theorem 4.1): within one
 * group the partner's 0/1 rewards, scaled by the batch ratio ω = P̂_k / P̂_j, add ω²·p_j(1 − p_j)/G of variance and
 * ω·p_j(q) − p_k(q) of bias, which is large for the stronger agent when ω is large and the agents' per-question
 * successes are weakly correlated. The variants trade that average unbiasedness for a smaller per-group error.
 */
import { CAPABILITY_FLOOR, RATIO_CLAMP } from './capability.js';

/**
 * 'paper': Eq. 7 with the batch ratio; 'per-question': ω from the group's own rewards shrunk toward the batch ratio;
 * 'blend': own mean and scaled partner mean mixed with a weight fitted per step; 'clamped': Eq. 7 with ω in a band.
 */
export const HACPO_BASELINES = ['paper', 'per-question', 'blend', 'clamped'] as const;
/** A baseline variant's name. */
export type HacpoBaseline = (typeof HACPO_BASELINES)[number];

/** One line per variant, for the config schema and the docs. */
export const HACPO_BASELINE_SUMMARIES: Record<HacpoBaseline, { summary: string }> = {
  paper: { summary: 'Eq. 7: mean of ω·R over all agents with the batch ratio ω = P̂_k/P̂_j (the paper)' },
  'per-question': {
    summary: "Eq. 7 with ω from this question's own and partner rewards, shrunk toward P̂ (omegaPrior)",
  },
  blend: { summary: '(1 − β)·own mean + β·scaled partner mean, β fitted per step to the least per-group error' },
  clamped: { summary: 'Eq. 7 with ω clamped to omegaBand' },
};

/** The baseline settings of one run (the `hacpo` section). */
export interface BaselineSettings {
  /** Which baseline; default 'paper'. */
  kind: HacpoBaseline;
  /** [low, high] band of ω for 'clamped' (dimensionless; default [0.5, 2]); low ≤ 1 ≤ high. */
  omegaBand: readonly [number, number];
  /** Pseudo-count c of the 'per-question' shrinkage, in responses (default 8 = one group). */
  omegaPrior: number;
}

/** The paper's settings: every existing result was computed with these. */
export const DEFAULT_BASELINE: BaselineSettings = { kind: 'paper', omegaBand: [0.5, 2], omegaPrior: 8 };

/** Throws on a band that does not contain 1 or is not positive, or a negative prior. */
export function validateBaseline(s: BaselineSettings): void {
  const [lo, hi] = s.omegaBand;
  if (!(lo > 0 && lo <= 1 && hi >= 1 && Number.isFinite(hi))) {
    throw new Error(`hacpo.omegaBand must be [low, high] with 0 < low ≤ 1 ≤ high, got [${lo}, ${hi}]`);
  }
  if (!(s.omegaPrior >= 0 && Number.isFinite(s.omegaPrior))) {
    throw new Error(`hacpo.omegaPrior must be a finite count ≥ 0 (responses), got ${s.omegaPrior}`);
  }
}

/** μ̂^(k) = (1/nG) Σ ω^(k,generator)·R over the responses at `members` (HACRL Eq. 7). */
export function paperBaseline(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  omega: ArrayLike<number>,
  members: readonly number[],
): number {
  let sum = 0;
  for (const i of members) sum += omega[generators[i]!]! * rewards[i]!;
  return sum / members.length;
}

/**
 * ω clamped to [low, high] (Eq. 8 with a narrower band than RATIO_CLAMP): the partner's rewards can then add at most
 * high²·p(1 − p)/G of variance. Biased whenever the true ratio lies outside the band.
 */
export function clampedRatios(omega: ArrayLike<number>, band: readonly [number, number]): Float64Array {
  return Float64Array.from(omega, (w) => Math.min(band[1], Math.max(band[0], w)));
}

/**
 * Per-question ratios of learner k: out[j] = p̃_k / p̃_j with p̃_a = (S_a + c·P̂_a) / (n_a + c), S_a and n_a agent a's
 * reward sum and response count in this group — each agent's success on this question, shrunk toward its batch
 * capability P̂_a with c pseudo-responses. c → ∞ gives the batch ratio (the paper); c = 0 makes Eq. 7 the learner's
 * own mean. Not unbiased: it spends the partner's rewards where they say something about this question. Clamped to
 * RATIO_CLAMP; all 1 while any P̂ is NaN (no history), like capabilityRatio.
 */
export function perQuestionRatios(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  members: readonly number[],
  learner: number,
  capability: readonly number[],
  prior: number,
): Float64Array {
  const out = new Float64Array(capability.length).fill(1);
  if (capability.some((p) => Number.isNaN(p))) return out;
  const sums = new Float64Array(capability.length);
  const counts = new Float64Array(capability.length);
  for (const i of members) {
    sums[generators[i]!]! += rewards[i]!;
    counts[generators[i]!]! += 1;
  }
  const shrunk = (a: number) =>
    Math.max(CAPABILITY_FLOOR, (sums[a]! + prior * capability[a]!) / Math.max(CAPABILITY_FLOOR, counts[a]! + prior));
  for (let j = 0; j < capability.length; j++) {
    if (j === learner) continue;
    out[j] = Math.min(RATIO_CLAMP.max, Math.max(RATIO_CLAMP.min, shrunk(learner) / shrunk(j)));
  }
  return out;
}

/** One group's parts for the blend: the learner's own rewards and the mean of ω·R over the foreign responses. */
export interface BlendParts {
  own: readonly number[];
  /** Mean of ω^(k,generator)·R over the group's foreign responses; NaN when it has none. */
  foreign: number;
}

/** The parts of the group at `members` for learner k (see BlendParts). */
export function blendParts(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  learner: number,
  omega: ArrayLike<number>,
  members: readonly number[],
): BlendParts {
  const own: number[] = [];
  let sum = 0;
  let n = 0;
  for (const i of members) {
    if (generators[i] === learner) own.push(rewards[i]!);
    else {
      sum += omega[generators[i]!]! * rewards[i]!;
      n++;
    }
  }
  return { own, foreign: n === 0 ? NaN : sum / n };
}

/**
 * The blend's weight β for one step: β = V / M, V the mean over groups of the own mean's sampling variance s²/n and
 * M the mean of (f̄ − ō)², clipped to [0, 1]. Why: the error of b = (1 − β)·ō + β·f̄ against p_k(q) has expected
 * square (1 − β)²·V + β²·D with D = E[(f̄ − p_k)²] (ō and f̄ are independent given the question), least at
 * β = V / (V + D), and E[(f̄ − ō)²] = D + V. The paper's Eq. 7 is β = n_f / (n_k + n_f) (½ for two agents of G each)
 * whatever D is. The literal control variate ō + β·(f̄ − E f̄) cannot help per group: its extra term is independent
 * of ō's error, so its best β is 0. 0 when no group has both parts (or M = 0: then every β gives the same baseline).
 */
export function blendWeight(groups: readonly BlendParts[]): number {
  let v = 0;
  let nv = 0;
  let m = 0;
  let nm = 0;
  for (const g of groups) {
    const n = g.own.length;
    if (n === 0) continue;
    let mean = 0;
    for (const r of g.own) mean += r / n;
    if (n >= 2) {
      let sq = 0;
      for (const r of g.own) sq += (r - mean) ** 2;
      v += sq / (n - 1) / n;
      nv++;
    }
    if (!Number.isNaN(g.foreign)) {
      m += (g.foreign - mean) ** 2;
      nm++;
    }
  }
  if (nv === 0 || nm === 0 || m === 0) return 0;
  return Math.min(1, v / nv / (m / nm));
}

/** b = (1 − β)·ō + β·f̄ for one group; the own mean ō when it has no foreign response. */
export function blendBaseline(parts: BlendParts, beta: number): number {
  let own = 0;
  for (const r of parts.own) own += r / parts.own.length;
  return Number.isNaN(parts.foreign) ? own : (1 - beta) * own + beta * parts.foreign;
}

/** What groupBaseline needs beyond the group. */
export interface BaselineContext {
  settings: BaselineSettings;
  learner: number;
  /** ω^(k,j) of the batch (Eq. 8), omega[learner] = 1. */
  omega: ArrayLike<number>;
  /** Every agent's P̂ (Eq. 9; NaN before any step), for 'per-question'. */
  capability: readonly number[];
  /** The step's fitted β, for 'blend'. */
  beta: number;
}

/** The chosen variant's μ̂^(k) over the group at `members`, before the fallback of the advantage (spec §2). */
export function groupBaseline(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  members: readonly number[],
  c: BaselineContext,
): number {
  switch (c.settings.kind) {
    case 'paper':
      return paperBaseline(rewards, generators, c.omega, members);
    case 'clamped':
      return paperBaseline(rewards, generators, clampedRatios(c.omega, c.settings.omegaBand), members);
    case 'per-question': {
      const w = perQuestionRatios(rewards, generators, members, c.learner, c.capability, c.settings.omegaPrior);
      return paperBaseline(rewards, generators, w, members);
    }
    case 'blend':
      return blendBaseline(blendParts(rewards, generators, c.learner, c.omega, members), c.beta);
  }
}
