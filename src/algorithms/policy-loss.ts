/**
 * The one policy loss of a mini-batch, for every algorithm, as a pure function of numbers: per-sequence log-probs and
 * advantages in, the loss, ∂loss/∂(each new log-prob) (and ∂loss/∂(each token's entropy) under an entropy bonus) and
 * statistics out. The surrogate of each sequence (surrogates.ts) is the only part that differs between GRPO, GSPO and
 * HACPO; aggregation, KL, entropy and statistics are here, once.
 */
import { type LossAggregation, sequenceWeight } from './aggregate.js';
import { type ClipRange, validateClip } from './clipped-surrogate.js';
import { DEFAULT_STEPWISE_CLIP, type StepwiseClip, stepwiseLowerBound } from './hacpo/stepwise-clip.js';
import { type KlEstimator, addKlPenalty } from './kl.js';
import { Mean, type RatioStats, RatioTally } from './loss-stats.js';
import { type RolloutCorrection, rolloutTokenWeights, validateRolloutCorrection } from './rollout-correction.js';
import {
  type LossUnits,
  type PolicySequence,
  checkedDenominators,
  countedTokens,
  lossUnits,
  validateSequence,
} from './sequence.js';
import { type Surrogate, type SurrogateName, type SurrogateTerm, surrogateSpec } from './surrogates.js';

/** The surrogate objective of own responses. */
export interface PolicyObjective {
  /** Its name in SURROGATES (surrogates.ts): 'token-clip' (GRPO), 'seq-clip' (GSPO), 'cispo', … */
  surrogate: SurrogateName;
  /** Clip range; default the surrogate's (token-clip: DAPO_CLIP ε 0.2/0.28; seq-clip: GSPO_CLIP ε 3e-4/4e-4). */
  clip?: ClipRange;
  /** token-clip's dual clip c ≥ 1 capping the loss of A < 0 tokens at −c·A; default off (verl applies c = 3). */
  dualClip?: number;
}

/** The foreign-response terms of a HACPO mini-batch. */
export interface ForeignTerms {
  /**
   * How foreign responses enter the loss: a foreign surrogate of SURROGATES; default 'hacpo-foreign' (HACRL
   * Eqs. 12–14); 'hacpo-foreign-unclipped' drops the band (Figure 4's "no Clip"); 'seq-clip' treats them like own
   * responses under GSPO (naive sharing).
   */
  surrogate?: SurrogateName;
  /** Exponential IS exponent α ≥ 0 (HACRL Eq. 12) of the HACPO surrogates; default 1; 0 = off. */
  alpha?: number;
  /** The band of HACRL Eq. 14 under 'hacpo-foreign'; default δ 0.2, δ_step 0.025. */
  stepwise?: StepwiseClip;
  /** m: the 0-based optimizer update within the current step (sets the band's lower bound); required. */
  update: number;
}

/** β·KL(π_θ ‖ π_ref) added to each counted own token's loss and aggregated like it. */
export interface KlPenalty {
  /** β ≥ 0 (the HACPO spec uses 0.001, on own responses only). */
  coef: number;
  /** Estimator; default 'k3' (low variance). */
  estimator?: KlEstimator;
}

/** Options of policyLoss. */
export interface PolicyLossOptions {
  /** The surrogate objective of own responses and its clip range. */
  objective: PolicyObjective;
  /** How foreign responses (own: false) enter; required when the batch holds any. */
  foreign?: ForeignTerms;
  /** Default the own surrogate's: 'token-mean' for token-clip (DAPO), 'seq-mean-token-mean' for seq-clip (GSPO). */
  aggregation?: LossAggregation;
  /** KL penalty to the frozen reference on own responses; default none. Own sequences then need refLogProbs. */
  kl?: KlPenalty;
  /**
   * Entropy bonus β_H ≥ 0: the loss subtracts β_H·H over counted own tokens, aggregated like the surrogate; own
   * sequences then need `entropy`, and the result carries ∂loss/∂H per token (−β_H·w_i). Default 0 (off).
   */
  entropyCoef?: number;
  /** Drop sequences flagged `truncated` from the loss and from every denominator; default false. */
  maskTruncated?: boolean;
  /**
   * Correct own responses for the sampler/learner log-prob mismatch (rollout-correction.ts): TIS scales each own
   * token's (or sequence's) surrogate term by min(ρ, C); masking drops tokens (or sequences) with ρ outside [1/C, C]
   * from the loss and its denominators. Own sequences then need samplingLogProbs and oldLogProbs; token level needs a
   * token-ratio surrogate. Default none.
   */
  rolloutCorrection?: RolloutCorrection;
  /**
   * The denominators to divide by; default this batch's own lossUnits. Pass lossUnits(miniBatch) when calling on
   * micro-batches of one mini-batch, so that their losses and gradients add up to the mini-batch's.
   */
  denominators?: LossUnits;
}

/** Foreign responses' sequence ratios: s before the clip, and how many fell inside the clip band in use. */
export interface ForeignRatioStats extends RatioStats {
  /** Fraction of counted foreign sequences inside the band (bounds inclusive); NaN if none. */
  inBandFrac: number;
  /** Counted foreign sequences. */
  count: number;
}

/** Statistics of one policyLoss call (means over nothing are NaN, which JSON writes as null). */
export interface PolicyLossStats extends RatioStats {
  /** The surrogate part of the loss (own + foreign). */
  policyLoss: number;
  /** The β·KL part of the loss (0 without a penalty). */
  klLoss: number;
  /** The −β_H·H part of the loss (0 without a bonus). */
  entropyLoss: number;
  /** Token mean of the KL estimate to the reference over own tokens that have refLogProbs; NaN when none. */
  kl: number;
  /** Token mean of old − new over counted tokens that have oldLogProbs: how far this mini-batch moved (ppo_kl). */
  approxKl: number;
  /** Token mean of the entropy over counted own tokens that carry it (nats); NaN when none. */
  entropy: number;
  /** Counted own sequences (the ratio statistics above are theirs). */
  ownCount: number;
  /** Foreign responses' ratios. */
  foreign: ForeignRatioStats;
  /** This update's stepwise lower bound 1 − δ + m·δ_step under the 'hacpo-foreign' surrogate; NaN otherwise. */
  lowerBound: number;
  /** Counted sequences of this batch. */
  sequences: number;
  /** Counted tokens of this batch. */
  tokens: number;
  /** Sequences left out because they were truncated (under maskTruncated). */
  truncatedDropped: number;
  /** Sequences left out because they had no tokens to count (empty or fully masked). */
  empty: number;
}

/** The loss of a mini-batch, its gradient per sequence and token (0 where not counted), and statistics. */
export interface PolicyLossResult {
  loss: number;
  /** ∂L/∂ logProbs[t] per sequence (seed for tape.backward). */
  grad: Float32Array[];
  /** ∂L/∂ entropy[t] per sequence; only with an entropy bonus. */
  entropyGrad?: Float32Array[];
  stats: PolicyLossStats;
}

/** The surrogates of own and foreign responses, and the options with defaults filled in. */
interface Resolved {
  own: Surrogate;
  ownLevel: 'token' | 'sequence';
  foreign: Surrogate | null;
  lowerBound: number;
  aggregation: LossAggregation;
  klCoef: number;
  estimator: KlEstimator;
  entropyCoef: number;
  maskTruncated: boolean;
  correction: RolloutCorrection | null;
}

/** Fills in defaults, validates, and builds each kind of response's surrogate from the registry. */
function resolve(options: PolicyLossOptions): Resolved {
  const { objective: obj, foreign: f } = options;
  const spec = surrogateSpec(obj.surrogate, 'own');
  const clip = obj.clip ?? spec.clip;
  validateClip(clip);
  const dualClip = obj.dualClip;
  if (dualClip !== undefined && !(dualClip >= 1)) throw new Error(`dual clip c must be ≥ 1, got ${dualClip}`);
  const klCoef = options.kl?.coef ?? 0;
  if (!(klCoef >= 0)) throw new Error(`KL coefficient must be ≥ 0, got ${klCoef}`);
  const entropyCoef = options.entropyCoef ?? 0;
  if (!(entropyCoef >= 0)) throw new Error(`entropy coefficient must be ≥ 0, got ${entropyCoef}`);
  const alpha = f?.alpha ?? 1;
  if (!(alpha >= 0 && Number.isFinite(alpha))) throw new Error(`α must be finite and ≥ 0, got ${alpha}`);
  const band = f?.stepwise ?? DEFAULT_STEPWISE_CLIP;
  const params = { clip, dualClip, alpha, band, update: f?.update ?? 0 };
  const foreign = f === undefined ? null : surrogateSpec(f.surrogate ?? 'hacpo-foreign', 'foreign');
  const correction = options.rolloutCorrection ?? null;
  if (correction !== null) validateRolloutCorrection(correction);
  if (correction?.level === 'token' && spec.ratioLevel === 'sequence')
    throw new Error(
      `token-level rollout correction needs a surrogate with token ratios, but '${obj.surrogate}' has one ratio per ` +
        'sequence: correct at the sequence level',
    );
  return {
    own: spec.build(params),
    ownLevel: spec.ratioLevel,
    foreign: foreign?.build(params) ?? null,
    lowerBound: foreign?.stepwise ? stepwiseLowerBound(band, f!.update) : NaN,
    aggregation: options.aggregation ?? spec.aggregation,
    klCoef,
    estimator: options.kl?.estimator ?? 'k3',
    entropyCoef,
    maskTruncated: options.maskTruncated ?? false,
    correction,
  };
}

/**
 * An own sequence under rollout correction: its weight per token (over the tokens it counts); under masking, the
 * sequence with the dropped tokens masked out instead, so that they leave the loss and every denominator.
 */
function rolloutCorrected(
  seq: PolicySequence,
  index: number,
  c: RolloutCorrection,
  maskTruncated: boolean,
): { seq: PolicySequence; weights: Float64Array | null } {
  if (seq.own === false) return { seq, weights: null };
  if (seq.samplingLogProbs === undefined || seq.oldLogProbs === undefined)
    throw new Error(
      `sequence ${index} (own) needs samplingLogProbs and oldLogProbs under rollout correction '${c.mode}': pass ` +
        'both, or leave rolloutCorrection out',
    );
  const weights = rolloutTokenWeights(seq.oldLogProbs, seq.samplingLogProbs, countedTokens(seq, maskTruncated), c);
  if (c.mode === 'tis') return { seq, weights };
  const mask = Array.from(weights, (w, t) => (seq.mask === undefined ? w : seq.mask[t]! * w));
  return { seq: { ...seq, mask }, weights: null };
}

/**
 * An own term under TIS: the whole sequence's term scaled by its one weight, or (token level, where the surrogate's
 * loss is a sum of independent per-token terms) each token's term by its own.
 */
function tisTerm(
  s: Surrogate,
  seq: PolicySequence,
  tokens: readonly number[],
  w: number,
  g: Float64Array,
  weights: Float64Array,
  level: RolloutCorrection['level'],
): SurrogateTerm {
  if (level === 'sequence') return s(seq, tokens, w * weights[tokens[0]!]!, g);
  const out: SurrogateTerm = { loss: 0, ratios: [] };
  for (const t of tokens) {
    const term = s(seq, [t], w * weights[t]!, g);
    out.loss += term.loss;
    out.ratios.push(...term.ratios);
  }
  return out;
}

/**
 * L = Σ_i w_i·[ℓ_i + β·Σ_t KL_{i,t} − β_H·Σ_t H_{i,t}] with w_i from the aggregation mode (aggregate.ts) and ℓ_i the
 * sequence's surrogate: GRPO's token ratios or GSPO's sequence ratio for own responses, HACPO's Eqs. 12–14 (or GSPO,
 * for naive sharing) for foreign ones; KL and entropy on own responses only. Under a rollout correction an own ℓ_i's
 * terms carry TIS weights, or the masked tokens leave before anything is counted. Throws on malformed sequences or
 * options; a non-finite log-prob is not an error but makes the loss NaN, so the trainer can skip the step.
 */
export function policyLoss(input: readonly PolicySequence[], options: PolicyLossOptions): PolicyLossResult {
  const o = resolve(options);
  input.forEach(validateSequence);
  const c = o.correction;
  const corrected = c === null ? null : input.map((seq, i) => rolloutCorrected(seq, i, c, o.maskTruncated));
  const batch = corrected === null ? input : corrected.map((r) => r.seq);
  const counts = lossUnits(batch, o.maskTruncated);
  const units = checkedDenominators(options.denominators, counts, 'lossUnits');
  const ownTally = new RatioTally(o.ownLevel);
  const foreignTally = new RatioTally('sequence');
  const [klMean, moved, entropy] = [new Mean(), new Mean(), new Mean()];
  let [policy, klLoss, entropyLoss, ownCount, foreignCount, inBand, truncatedDropped, empty] = [0, 0, 0, 0, 0, 0, 0, 0];
  const entropyGrad: Float32Array[] = [];

  const grad = batch.map((seq, i) => {
    const g = new Float64Array(seq.logProbs.length);
    const gH = new Float32Array(o.entropyCoef > 0 ? seq.logProbs.length : 0);
    entropyGrad.push(gH);
    const tokens = countedTokens(seq, o.maskTruncated);
    if (tokens.length === 0) {
      if (o.maskTruncated && seq.truncated === true && seq.logProbs.length > 0) truncatedDropped++;
      else empty++;
      return Float32Array.from(g);
    }
    const w = sequenceWeight(tokens.length, o.aggregation, units);
    const own = seq.own !== false;
    if (!own && o.foreign === null) throw new Error(`sequence ${i} is foreign but options.foreign is not set`);
    // HACRL Eq. 10: a foreign response's advantage enters every surrogate scaled by its coefficient ω^(j,k).
    const scaled = seq.coefficient === undefined ? seq : { ...seq, advantage: seq.advantage * seq.coefficient };
    const tis = corrected?.[i]!.weights;
    const term = tis
      ? tisTerm(o.own, scaled, tokens, w, g, tis, c!.level)
      : (own ? o.own : o.foreign!)(scaled, tokens, w, g);
    policy += term.loss;
    for (const r of term.ratios) (own ? ownTally : foreignTally).add(r.ratio, r.clipped);
    if (own) ownCount++;
    else {
      foreignCount++;
      if (term.ratios[0]!.inBand) inBand++;
    }
    for (const t of seq.oldLogProbs === undefined ? [] : tokens) moved.add(seq.oldLogProbs![t]! - seq.logProbs[t]!);
    if (!own) return Float32Array.from(g);
    if (seq.refLogProbs !== undefined)
      klLoss += addKlPenalty(o.estimator, o.klCoef, w, seq.logProbs, seq.refLogProbs, tokens, g, (v) => klMean.add(v));
    else if (o.klCoef > 0)
      throw new Error(
        `sequence ${i} (own) has no refLogProbs but the KL coefficient is ${o.klCoef}: pass them or set it to 0`,
      );
    if (o.entropyCoef > 0 && seq.entropy === undefined)
      throw new Error(`sequence ${i} has no entropy but the entropy coefficient is ${o.entropyCoef}: pass it`);
    const h = seq.entropy;
    for (const t of h === undefined ? [] : tokens) {
      entropy.add(h![t]!);
      if (o.entropyCoef === 0) continue;
      entropyLoss -= o.entropyCoef * w * h![t]!;
      gH[t] = -o.entropyCoef * w;
    }
    return Float32Array.from(g);
  });

  const stats: PolicyLossStats = {
    ...ownTally.stats(),
    policyLoss: policy,
    klLoss,
    entropyLoss,
    kl: klMean.value,
    approxKl: moved.value,
    entropy: entropy.value,
    ownCount,
    foreign: {
      ...foreignTally.stats(),
      inBandFrac: foreignCount === 0 ? NaN : inBand / foreignCount,
      count: foreignCount,
    },
    lowerBound: o.lowerBound,
    sequences: counts.sequences,
    tokens: counts.tokens,
    truncatedDropped,
    empty,
  };
  return { loss: policy + klLoss + entropyLoss, grad, ...(o.entropyCoef > 0 ? { entropyGrad } : {}), stats };
}
