/**
 * The surrogates of the one policy loss (policy-loss.ts), by name — one registry, like verl's policy losses: each
 * takes one counted response and adds its weighted loss and ∂loss/∂(new log-prob) per token. The driver owns
 * everything they share (aggregation weights, KL, entropy, statistics, Eq. 10's coefficient); a new objective is one
 * function and one entry of SURROGATES here, and a recipe row that names it (recipes.ts).
 */
import type { LossAggregation } from './aggregate.js';
import { type ClipRange, type ClipSide, DAPO_CLIP, GSPO_CLIP } from './clipped-surrogate.js';
import { MAX_TOKEN_LOG_RATIO, grpoTokenLoss } from './grpo.js';
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

/** GSPO: one clipped length-normalised ratio per sequence (HACRL Eqs. 47–49). */
export function sequenceSurrogate(clip: ClipRange): Surrogate {
  return (seq, tokens, w, g) => {
    const { logRatio, scale } = sequenceLogRatio(seq, tokens);
    const r = gspoSequenceLoss(logRatio, seq.advantage, clip);
    for (const t of tokens) g[t] += w * r.dLogRatio * scale;
    const inBand = r.ratio >= 1 - clip.low && r.ratio <= 1 + clip.high;
    return { loss: w * tokens.length * r.loss, ratios: [{ ratio: r.ratio, clipped: r.clipped, inBand }] };
  };
}

/**
 * HACPO's foreign-response surrogate (HACRL Eqs. 12–14): exponential IS sg(s)^α, the stepwise band
 * [1 − δ + m·δ_step, 1] (null: no band), no min with the unclipped term; the advantage arrives scaled by Eq. 10.
 */
export function foreignSurrogate(alpha: number, band: StepwiseClip | null, update: number): Surrogate {
  return (seq, tokens, w, g) => {
    const { logRatio, scale } = sequenceLogRatio(seq, tokens);
    const r = foreignSequenceLoss(logRatio, seq.advantage, 1, alpha, band, update);
    for (const t of tokens) g[t] += w * r.dLogRatio * scale;
    return { loss: w * tokens.length * r.loss, ratios: [{ ratio: r.ratio, clipped: r.clipped, inBand: r.inBand }] };
  };
}

/**
 * CISPO (MiniMax-M1, arXiv 2506.13585, Eq. 4): ℓ_t = −sg(r̂_t)·A·log π_θ(y_t) with r̂_t the token ratio clipped to
 * [1 − ε_low, 1 + ε_high]. The clip bounds the importance weight instead of the update, so every token keeps its
 * gradient −r̂_t·A (PPO's clip zeroes it for tokens past the bound).
 */
export function cispoSurrogate(clip: ClipRange): Surrogate {
  return (seq, tokens, w, g) => {
    let loss = 0;
    const ratios: SurrogateTerm['ratios'] = [];
    for (const t of tokens) {
      const logRatio = Math.max(
        -MAX_TOKEN_LOG_RATIO,
        Math.min(MAX_TOKEN_LOG_RATIO, seq.logProbs[t]! - seq.oldLogProbs![t]!),
      );
      const ratio = Math.exp(logRatio);
      const weight = Math.min(1 + clip.high, Math.max(1 - clip.low, ratio));
      const clipped = ratio > 1 + clip.high ? 'high' : ratio < 1 - clip.low ? 'low' : 'none';
      ratios.push({ ratio, clipped, inBand: clipped === 'none' });
      g[t] += -w * weight * seq.advantage;
      loss += -w * weight * seq.advantage * seq.logProbs[t]!;
    }
    return { loss, ratios };
  };
}

/** What a surrogate is built from: the run's clip range and, for foreign responses, HACPO's knobs. */
export interface SurrogateParams {
  /** The own-response clip range [1 − ε_low, 1 + ε_high]. */
  clip: ClipRange;
  /** GRPO's dual clip c ≥ 1; undefined: off. */
  dualClip: number | undefined;
  /** Exponential-IS α ≥ 0 (HACRL Eq. 12). */
  alpha: number;
  /** The foreign band of Eqs. 13–14. */
  band: StepwiseClip;
  /** m: the optimizer update within the step (0-based). */
  update: number;
}

/** A surrogate by name: what it is, which responses it is for, its defaults, and how it is built. */
export interface SurrogateSpec {
  /** One line for `hacrl config schema`. */
  summary: string;
  /** Own responses, foreign ones (HACPO), or both. */
  responses: 'own' | 'foreign' | 'both';
  /** One importance ratio per token or per sequence (what the ratio statistics count). */
  ratioLevel: 'token' | 'sequence';
  /** Clip range when the caller gives none. */
  clip: ClipRange;
  /** Aggregation when the caller gives none. */
  aggregation: LossAggregation;
  /** Whether it clips to Eq. 14's stepwise band (its lower bound is then reported). */
  stepwise: boolean;
  build(p: SurrogateParams): Surrogate;
}

/** Every surrogate, by the name recipes and the config use. */
export const SURROGATES = {
  'token-clip': {
    summary: "GRPO/PPO: one clipped ratio per token (DAPO's clip-higher, optional dual clip)",
    responses: 'own',
    ratioLevel: 'token',
    clip: DAPO_CLIP,
    aggregation: 'token-mean',
    stepwise: false,
    build: (p) => tokenSurrogate(p.clip, p.dualClip),
  },
  'seq-clip': {
    summary: 'GSPO: one clipped length-normalised ratio per sequence (HACRL Eqs. 11, 47–49)',
    responses: 'both',
    ratioLevel: 'sequence',
    clip: GSPO_CLIP,
    aggregation: 'seq-mean-token-mean',
    stepwise: false,
    build: (p) => sequenceSurrogate(p.clip),
  },
  'hacpo-foreign': {
    summary: 'HACPO on foreign responses: exponential IS, stepwise band [1 − δ + m·δ_step, 1] (HACRL Eqs. 12–14)',
    responses: 'foreign',
    ratioLevel: 'sequence',
    clip: GSPO_CLIP,
    aggregation: 'seq-mean-token-mean',
    stepwise: true,
    build: (p) => foreignSurrogate(p.alpha, p.band, p.update),
  },
  'hacpo-foreign-unclipped': {
    summary: 'HACPO on foreign responses without the band (the paper\'s Figure 4 "no Clip" ablation)',
    responses: 'foreign',
    ratioLevel: 'sequence',
    clip: GSPO_CLIP,
    aggregation: 'seq-mean-token-mean',
    stepwise: false,
    build: (p) => foreignSurrogate(p.alpha, null, p.update),
  },
  cispo: {
    summary: 'CISPO: clipped, stop-gradient importance weight on log π per token (MiniMax-M1)',
    responses: 'own',
    ratioLevel: 'token',
    clip: DAPO_CLIP,
    aggregation: 'token-mean',
    stepwise: false,
    build: (p) => cispoSurrogate(p.clip),
  },
} as const satisfies Record<string, SurrogateSpec>;

/** A surrogate's name. */
export type SurrogateName = keyof typeof SURROGATES;

const named = (ok: (s: SurrogateSpec) => boolean) =>
  (Object.keys(SURROGATES) as SurrogateName[]).filter((n) => ok(SURROGATES[n])) as [SurrogateName, ...SurrogateName[]];

/** The surrogates of own responses (the config's optim.surrogate). */
export const OWN_SURROGATES = named((s) => s.responses !== 'foreign');
/** The surrogates of foreign responses (the config's hacpo.foreignSurrogate). */
export const FOREIGN_SURROGATES = named((s) => s.responses !== 'own');

/** The spec of surrogate `name` for `responses`; throws naming the choices when there is none. */
export function surrogateSpec(name: string, responses: 'own' | 'foreign'): SurrogateSpec {
  const choices: readonly string[] = responses === 'own' ? OWN_SURROGATES : FOREIGN_SURROGATES;
  if (!choices.includes(name))
    throw new Error(`no ${responses}-response surrogate "${name}": choose one of ${choices.join(', ')}`);
  return SURROGATES[name as SurrogateName];
}
