/**
 * The per-sequence surrogates of the one policy loss (policy-loss.ts): each takes one counted response and adds its
 * weighted loss and ∂loss/∂(new log-prob) per token. The driver owns everything they share (aggregation weights, KL,
 * entropy, statistics); a new algorithm's objective is one more function here.
 */
import { type ClipRange, type ClipSide } from './clipped-surrogate.js';
import { grpoTokenLoss } from './grpo.js';
import { gspoLogRatio, gspoSequenceLoss } from './gspo.js';
import { crossSequenceLogRatio } from './hacpo/ratio.js';
import { learnerLogRatioGradient } from './hacpo/ratio-normalization.js';
import { foreignSequenceLoss, type StepwiseClip } from './hacpo/stepwise-clip.js';
import type { PolicySequence } from './sequence.js';

/** What one surrogate call adds: its weighted loss, and each ratio it formed with the clip side that was active. */
export interface SurrogateTerm {
  /** w·Σ_t ℓ_t over the counted tokens. */
  loss: number;
  /** Importance ratios formed (one per token for GRPO, one per sequence otherwise) and their clip sides. */
  ratios: { ratio: number; clipped: ClipSide; inBand: boolean }[];
}

/** A surrogate: adds w·∂ℓ/∂new_t into `g` for each counted token `t` of `seq`, returns the term. */
export type Surrogate = (seq: PolicySequence, tokens: readonly number[], w: number, g: Float64Array) => SurrogateTerm;

/** GRPO: one clipped ratio per token (grpo.ts; DAPO's asymmetric clip, optional dual clip). */
export function tokenSurrogate(clip: ClipRange, dualClip?: number): Surrogate {
  return (seq, tokens, w, g) => {
    let loss = 0;
    const ratios: SurrogateTerm['ratios'] = [];
    for (const t of tokens) {
      const r = grpoTokenLoss(seq.logProbs[t]!, seq.oldLogProbs![t]!, seq.advantage, clip, dualClip);
      ratios.push({ ratio: r.ratio, clipped: r.clipped, inBand: r.clipped === 'none' });
      g[t] += w * r.dNew;
      loss += w * r.loss;
    }
    return { loss, ratios };
  };
}

/**
 * log s (HACRL Eq. 11) and ∂ log s/∂(each counted log-prob) as a multiple of the per-token mean's 1/|y|: the mean over
 * counted tokens of new − old when the learner's own old log-probs are given (GSPO's ratio), else the learner's
 * normalised log-likelihood minus the generator's old one (a response from another agent), per token, or per
 * character of the response when the sequence carries ratioCharacters (spec §7).
 */
export function sequenceLogRatio(seq: PolicySequence, tokens: readonly number[]): { logRatio: number; scale: number } {
  if (seq.generatorOldMean === undefined) return { logRatio: gspoLogRatio(seq, tokens), scale: 1 };
  const counted = tokens.length === seq.logProbs.length ? seq.logProbs : tokens.map((t) => seq.logProbs[t]!);
  const chars = seq.ratioCharacters;
  if (chars === undefined) return { logRatio: crossSequenceLogRatio(counted, seq.generatorOldMean), scale: 1 };
  return {
    logRatio: crossSequenceLogRatio(counted, seq.generatorOldMean, chars),
    scale: learnerLogRatioGradient('char', tokens.length, chars).scaleFromTokenMean,
  };
}

/** GSPO: one clipped length-normalised ratio per sequence (HACRL Eqs. 47–49), advantage × coefficient (Eq. 10). */
export function sequenceSurrogate(clip: ClipRange): Surrogate {
  return (seq, tokens, w, g) => {
    const { logRatio, scale } = sequenceLogRatio(seq, tokens);
    const r = gspoSequenceLoss(logRatio, seq.advantage * (seq.coefficient ?? 1), clip);
    for (const t of tokens) g[t] += w * r.dLogRatio * scale;
    const inBand = r.ratio >= 1 - clip.low && r.ratio <= 1 + clip.high;
    return { loss: w * tokens.length * r.loss, ratios: [{ ratio: r.ratio, clipped: r.clipped, inBand }] };
  };
}

/**
 * HACPO's foreign-response surrogate (HACRL Eqs. 12–14): exponential IS sg(s)^α, the stepwise band
 * [1 − δ + m·δ_step, 1] (null: no band), no min with the unclipped term, advantage × ω^(j,k) (Eq. 10).
 */
export function foreignSurrogate(alpha: number, band: StepwiseClip | null, update: number): Surrogate {
  return (seq, tokens, w, g) => {
    const { logRatio, scale } = sequenceLogRatio(seq, tokens);
    const r = foreignSequenceLoss(logRatio, seq.advantage, seq.coefficient ?? 1, alpha, band, update);
    for (const t of tokens) g[t] += w * r.dLogRatio * scale;
    return { loss: w * tokens.length * r.loss, ratios: [{ ratio: r.ratio, clipped: r.clipped, inBand: r.inBand }] };
  };
}
