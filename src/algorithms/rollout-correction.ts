/**
 * Rollout correction: an own response's tokens were drawn by the sampler (the decode path, its log-probs recorded
 * while sampling), but the surrogate's ratio starts from the learner's old log-probs (the training forward pass before
 * the step's updates). The two disagree — by rounding today, by more when rollouts and training run at different
 * precisions — so the samples come from a slightly different policy than π_old. A weight per token or per sequence
 * on the surrogate corrects for it: truncated importance sampling (TIS, as verl's rollout correction and TRL's
 * vllm_importance_sampling_correction) or masking (verl's rejection sampling). Pure: log-probs in, weights out.
 */
import { klK3 } from './kl.js';
import { Mean } from './loss-stats.js';

/** 'none': no correction; 'tis': weight min(ρ, C); 'mask': drop what has ρ outside [1/C, C]. */
export const ROLLOUT_CORRECTIONS = ['none', 'tis', 'mask'] as const;
/** One of ROLLOUT_CORRECTIONS. */
export type RolloutCorrectionMode = (typeof ROLLOUT_CORRECTIONS)[number];
/** 'token': one ρ_t per token; 'sequence': one ρ per response, the geometric mean of its tokens'. */
export const ROLLOUT_CORRECTION_LEVELS = ['token', 'sequence'] as const;
/** One of ROLLOUT_CORRECTION_LEVELS. */
export type RolloutCorrectionLevel = (typeof ROLLOUT_CORRECTION_LEVELS)[number];

/**
 * Where π_old's log-probs come from. 'learner': a forward pass of the generator before the step's updates (the first
 * own ratio is exactly 1; the rollout correction weighs the sampler against it). 'sampler': the log-probs the sampler
 * recorded while generating stand in for them (π_old = π_sampler, as verl's bypass mode and NeMo RL's skipped previous
 * log-probs): one forward pass fewer over every own response per step, and the ratio carries the sampler/learner
 * mismatch instead of a correction weighing it.
 */
export const OLD_LOG_PROB_SOURCES = ['learner', 'sampler'] as const;
/** One of OLD_LOG_PROB_SOURCES. */
export type OldLogProbSource = (typeof OLD_LOG_PROB_SOURCES)[number];

/** A rollout correction that is on. */
export interface RolloutCorrection {
  mode: Exclude<RolloutCorrectionMode, 'none'>;
  /** C > 1: TIS truncates ρ at C; masking keeps ρ in [1/C, C]. */
  cap: number;
  level: RolloutCorrectionLevel;
}

/** Throws, saying what to pass, unless the cap is finite and above 1. */
export function validateRolloutCorrection(c: RolloutCorrection): void {
  if (!(Number.isFinite(c.cap) && c.cap > 1))
    throw new Error(`rollout correction cap ${c.cap}: pass a finite cap above 1 (e.g. 2)`);
}

/** ρ_t = π_old(y_t) / π_sampler(y_t) = exp(old_t − sampler_t): one token's rollout ratio. */
export function tokenRolloutRatio(old: number, sampler: number): number {
  return Math.exp(old - sampler);
}

/**
 * ρ = exp(mean_t (old_t − sampler_t)) over `tokens`: the geometric mean of the token ratios, length-normalised like
 * GSPO's sequence ratio so that the cap means the same for a short and a long response (verl's 'geometric' level).
 */
export function sequenceRolloutRatio(
  old: ArrayLike<number>,
  sampler: ArrayLike<number>,
  tokens: readonly number[],
): number {
  let sum = 0;
  for (const t of tokens) sum += old[t]! - sampler[t]!;
  return Math.exp(sum / tokens.length);
}

/** TIS: w = min(ρ, C); a ratio above the cap is truncated, one below it kept (never raised to 1). */
export function tisWeight(ratio: number, cap: number): number {
  return Math.min(ratio, cap);
}

/** Masking: w = 1 when 1/C ≤ ρ ≤ C, else 0 (the token or sequence leaves the loss and its denominators). */
export function maskWeight(ratio: number, cap: number): number {
  return ratio >= 1 / cap && ratio <= cap ? 1 : 0;
}

/** The correction's weight for one ratio. */
export function rolloutWeight(ratio: number, c: RolloutCorrection): number {
  return c.mode === 'tis' ? tisWeight(ratio, c.cap) : maskWeight(ratio, c.cap);
}

/** Whether the correction changed this ratio's term: truncated by TIS (ρ > C) or dropped by the mask. */
function corrected(ratio: number, c: RolloutCorrection): boolean {
  return c.mode === 'tis' ? ratio > c.cap : maskWeight(ratio, c.cap) === 0;
}

/**
 * The rollout ratios of one response over `tokens`, one per token ('token') or one for all ('sequence'), each with
 * the token indices it weighs.
 */
export function rolloutRatios(
  old: ArrayLike<number>,
  sampler: ArrayLike<number>,
  tokens: readonly number[],
  level: RolloutCorrectionLevel,
): { ratio: number; tokens: readonly number[] }[] {
  if (level === 'sequence')
    return tokens.length === 0 ? [] : [{ ratio: sequenceRolloutRatio(old, sampler, tokens), tokens }];
  return tokens.map((t) => ({ ratio: tokenRolloutRatio(old[t]!, sampler[t]!), tokens: [t] }));
}

/**
 * The correction's weight of every position of a response of `old.length` tokens: each token's own (token level) or
 * the response's over `tokens` (sequence level); positions outside `tokens` get 1 (they are not in the loss anyway).
 */
export function rolloutTokenWeights(
  old: ArrayLike<number>,
  sampler: ArrayLike<number>,
  tokens: readonly number[],
  c: RolloutCorrection,
): Float64Array {
  const w = new Float64Array(old.length).fill(1);
  for (const r of rolloutRatios(old, sampler, tokens, c.level)) {
    const weight = rolloutWeight(r.ratio, c);
    for (const t of r.tokens) w[t] = weight;
  }
  return w;
}

/** How far the sampler and the learner disagreed over a step's own responses. */
export interface RolloutMismatch {
  /** Token mean of k3 = ρ_t − 1 − log ρ_t, an estimate of KL(π_sampler ‖ π_old) from the sampled tokens (nats). */
  kl: number;
  /** Largest ratio at the correction's level (before any truncation). */
  ratioMax: number;
  /** Share of those ratios the correction truncated (tis) or dropped (mask). */
  correctedFrac: number;
}

/** The mismatch statistics of `responses` (every token of each); NaN fields when there is no token. */
export function rolloutMismatch(
  responses: readonly { old: ArrayLike<number>; sampler: ArrayLike<number> }[],
  c: RolloutCorrection,
): RolloutMismatch {
  const kl = new Mean();
  const changed = new Mean();
  let ratioMax = -Infinity;
  for (const { old, sampler } of responses) {
    const all = Array.from({ length: old.length }, (_, t) => t);
    // klK3(new, ref) estimates KL(new ‖ ref) from tokens drawn by `new`: here the sampler drew them.
    for (const t of all) kl.add(klK3(sampler[t]!, old[t]!).value);
    for (const r of rolloutRatios(old, sampler, all, c.level)) {
      ratioMax = Math.max(ratioMax, r.ratio);
      changed.add(corrected(r.ratio, c) ? 1 : 0);
    }
  }
  return { kl: kl.value, ratioMax: ratioMax === -Infinity ? NaN : ratioMax, correctedFrac: changed.value };
}
