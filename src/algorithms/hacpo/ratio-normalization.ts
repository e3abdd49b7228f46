/**
 * How the cross-agent log-ratio of HACRL Eq. 11 is normalised (spec §7). The paper's form divides each side's summed
 * log-probs by that side's own token count; between a character-level and a byte-level-BPE agent the two counts
 * differ by granularity alone (BPE ≈ 1.8× fewer tokens), so the ratio moves with tokenization, not with how likely
 * the text is. The 'char' form divides both sums by the same number — the characters of the response text — so it is
 * a log-likelihood ratio per character, the same unit on both sides whatever the tokenizers.
 */
import { crossSequenceLogRatio, normalizedLogProb } from './ratio.js';

export { normalizedLogProb };

/** 'token': per token of each side (HACRL Eq. 11, the default); 'char': per character of the response text. */
export const RATIO_NORMALIZATIONS = ['token', 'char'] as const;
/** One of RATIO_NORMALIZATIONS. */
export type RatioNormalization = (typeof RATIO_NORMALIZATIONS)[number];

/**
 * Characters of a response's text as the 'char' form counts them: Unicode code points (so a non-ASCII character is
 * one, however many bytes or UTF-16 units it takes), at least 1 — an EOS-only response (empty text) counts as one
 * unit, as its single EOS token does in the per-token form.
 */
export function responseCharacters(text: string): number {
  return Math.max(1, Array.from(text).length);
}

/** What one side's summed log-probs are divided by: its token count ('token') or the response's characters ('char'). */
export function ratioDivisor(mode: RatioNormalization, tokens: number, characters: number): number {
  if (!(Number.isInteger(tokens) && tokens > 0))
    throw new Error(`a response side needs at least one token to have a ratio, got ${tokens}`);
  if (!(Number.isInteger(characters) && characters > 0))
    throw new Error(`characters must be a positive integer (see responseCharacters), got ${characters}`);
  if (mode === 'token') return tokens;
  if (mode === 'char') return characters;
  throw new Error(`ratio normalisation must be 'token' or 'char', got "${String(mode)}"`);
}

/**
 * log s^(k,j) of a response `text` that the learner k scores as `learnerLogProbs` (its tokens) and the generator j
 * scored as `generatorLogProbs` (its tokens, before the update):
 *   'token' (HACRL Eq. 11): Σ learner / T_k − Σ generator / T_j
 *   'char':                 Σ learner / C   − Σ generator / C,   C = responseCharacters(text)
 * For an own response (the same tokens on both sides) both forms give the GSPO log-ratio scaled by T/C in 'char'.
 */
export function crossLogRatio(
  learnerLogProbs: ArrayLike<number>,
  generatorLogProbs: ArrayLike<number>,
  text: string,
  mode: RatioNormalization,
): number {
  const c = responseCharacters(text);
  const generatorOld = normalizedLogProb(generatorLogProbs, ratioDivisor(mode, generatorLogProbs.length, c));
  return crossSequenceLogRatio(learnerLogProbs, generatorOld, ratioDivisor(mode, learnerLogProbs.length, c));
}

/**
 * ∂ log s / ∂ log π_θ^(k)(token t) for every learner token: 1 / divisor (1/T_k per token, 1/C per character). A loss
 * written for the per-token mean (gradient 1/T_k folded into its aggregation weight) gets the 'char' gradient by
 * scaling with T_k / C, which this returns as `scaleFromTokenMean`.
 */
export function learnerLogRatioGradient(
  mode: RatioNormalization,
  learnerTokens: number,
  characters: number,
): { perToken: number; scaleFromTokenMean: number } {
  const perToken = 1 / ratioDivisor(mode, learnerTokens, characters);
  return { perToken, scaleFromTokenMean: perToken * learnerTokens };
}

/**
 * The share of foreign log-ratios whose ratio lies inside the band [lower, upper] (HACRL Eq. 14's band: lower
 * 1 − δ + m·δ_step, upper 1); NaN for no ratios. What the bench reports beside each normalisation.
 */
export function inBandFraction(logRatios: readonly number[], lower: number, upper = 1): number {
  if (logRatios.length === 0) return NaN;
  let inside = 0;
  for (const lr of logRatios) {
    const s = Math.exp(lr);
    if (s >= lower && s <= upper) inside++;
  }
  return inside / logRatios.length;
}
