/**
 * HACPO's policy loss of one learner's mini-batch, own and foreign responses mixed (HACRL Eqs. 10–14, spec §5), as a
 * pure function of numbers: the loss, ∂loss/∂(each learner log-prob) to seed tape.backward with, and statistics.
 *
 * Every counted token t of sequence i has the same loss ℓ_i(s_i) and weight w_i (aggregate.ts), and log s_i is a
 * mean over the learner's |y_i| tokens, so ∂L/∂new_t = w_i·ℓ_i'(log s_i): the GSPO-token form (see gspo.ts), for own
 * and foreign responses alike. Stop-gradient factors (sg(c)^α) are constants in that derivative.
 */
import { type LossAggregation, sequenceWeight } from '../aggregate.js';
import { type ClipRange, GSPO_CLIP, validateClip } from '../clip.js';
import { gspoSequenceLoss } from '../gspo.js';
import { type KlEstimator, addKlPenalty } from '../kl.js';
import { Mean, type RatioStats, RatioTally } from '../loss-stats.js';
import { type LossUnits, checkedDenominators } from '../sequence.js';
import { type StepwiseClip, DEFAULT_STEPWISE_CLIP, foreignSequenceLoss, stepwiseLowerBound } from './clip.js';
import { crossSequenceLogRatio, meanOf } from './ratio.js';

/** One response in a learner's mini-batch: its own or another agent's (re-tokenized for the learner). */
export interface HacpoSequence {
  /** The learner's current log π_θ^(k) of each response token, in the learner's tokenization: what the gradient is for. */
  logProbs: ArrayLike<number>;
  /** The generator's mean pre-update log-prob over the response span (own response: mean of the learner's old ones). */
  generatorOldMean: number;
  /** The learner's advantage A^(k) of the response (HACRL Eqs. 6–9), before the coefficient. */
  advantage: number;
  /** True when the learner generated the response. */
  own: boolean;
  /** ω^(j,k) of HACRL Eq. 10 for a foreign response (1 turns the coefficient off); default 1; must be 1 for own. */
  coefficient?: number;
  /** The learner's own pre-update log-probs per token; only for the approxKl statistic (own: must match the mean). */
  oldLogProbs?: ArrayLike<number>;
  /** Reference log-probs per token for the KL penalty; used on own responses only. */
  refLogProbs?: ArrayLike<number>;
  /** The response hit the length limit; dropped from the loss and denominators under maskTruncated. */
  truncated?: boolean;
}

/**
 * How foreign responses enter the loss. 'hacpo': HACRL Eqs. 12–14 (foreignSequenceLoss: exponential IS, stepwise
 * asymmetric clip, no min). 'hacpo-unclipped': the same without any clip band (Figure 4's "no Clip"). 'gspo': exactly like own responses — GSPO's min-clip with the own clip range, no
 * exponential IS — the naive-sharing baseline (the coefficient still multiplies A; pass 1 for naive sharing).
 */
export type ForeignObjective = 'hacpo' | 'hacpo-unclipped' | 'gspo';

/** Options of hacpoLoss. */
export interface HacpoLossOptions {
  /** GSPO clip range of own responses (and of foreign ones under 'gspo'); default GSPO_CLIP (3e-4 / 4e-4). */
  ownClip?: ClipRange;
  /** The foreign objective; default 'hacpo'. */
  foreign?: ForeignObjective;
  /** Exponential IS exponent α ≥ 0 (HACRL Eq. 12) for foreign responses under 'hacpo'; default 1; 0 = off. */
  alpha?: number;
  /** The foreign clip band (HACRL Eq. 14) under 'hacpo'; default DEFAULT_STEPWISE_CLIP; deltaStep 0 = fixed band. */
  stepwise?: StepwiseClip;
  /** m: the 0-based index of this optimizer update within the current step (required; sets the lower bound). */
  update: number;
  /** Default 'seq-mean-token-mean' (the authors' and GSPO's), over own and foreign sequences together. */
  aggregation?: LossAggregation;
  /** β·KL to the frozen reference on own responses only (spec §5: k3, β 0.001); default none. */
  kl?: { coef: number; estimator?: KlEstimator };
  /** Drop sequences flagged `truncated` from the loss and every denominator; default false. */
  maskTruncated?: boolean;
  /** Denominators; default this batch's hacpoLossUnits. Pass the mini-batch's when calling on micro-batches. */
  denominators?: LossUnits;
}

/** Sequence-ratio statistics of own responses (RatioStats at sequence level; NaN means over no sequence). */
export interface OwnRatioStats extends RatioStats {
  /** Counted own sequences. */
  count: number;
}

/** Sequence-ratio statistics of foreign responses: s before the clip; clipFracLow/High as in RatioStats. */
export interface ForeignRatioStats extends RatioStats {
  /** Fraction of counted foreign sequences inside the clip band of the objective in use (bounds inclusive); NaN if none. */
  inBandFrac: number;
  /** Counted foreign sequences. */
  count: number;
}

/** Statistics of one hacpoLoss call (means over nothing are NaN, which JSON writes as null). */
export interface HacpoLossStats {
  /** The surrogate part of the loss (own + foreign). */
  policyLoss: number;
  /** The β·KL part of the loss (0 without a penalty). */
  klLoss: number;
  /** Token mean of the KL estimate to the reference over own tokens that have refLogProbs; NaN when none. */
  kl: number;
  /** Token mean of old − new over counted tokens of sequences that carry oldLogProbs (verl's ppo_kl); NaN when none. */
  approxKl: number;
  /** Own responses' ratios. */
  own: OwnRatioStats;
  /** Foreign responses' ratios. */
  foreign: ForeignRatioStats;
  /** This update's stepwise lower bound 1 − δ + m·δ_step (≤ 1) under 'hacpo'; NaN under 'gspo'. */
  lowerBound: number;
  /** Counted sequences of this batch. */
  sequences: number;
  /** Counted tokens of this batch. */
  tokens: number;
  /** Sequences left out because they were truncated (under maskTruncated). */
  truncatedDropped: number;
  /** Sequences left out because they had no tokens. */
  empty: number;
}

/** The loss of a mini-batch, ∂loss/∂ each learner log-prob (0 where not counted), and statistics. */
export interface HacpoLossResult {
  /** L: the aggregated surrogate plus the KL term. */
  loss: number;
  /** ∂L/∂ logProbs[t] per sequence, same shape as the inputs (seed for tape.backward). */
  grad: Float32Array[];
  /** Loss parts, ratio statistics and counts. */
  stats: HacpoLossStats;
}

/** The options with defaults filled in. */
interface Resolved {
  ownClip: ClipRange;
  foreign: ForeignObjective;
  alpha: number;
  stepwise: StepwiseClip;
  aggregation: LossAggregation;
  klCoef: number;
  estimator: KlEstimator;
  maskTruncated: boolean;
}

/** Fills in defaults and validates (the stepwise clip and m are validated by stepwiseLowerBound). */
function resolve(options: HacpoLossOptions): Resolved {
  const r: Resolved = {
    ownClip: options.ownClip ?? GSPO_CLIP,
    foreign: options.foreign ?? 'hacpo',
    alpha: options.alpha ?? 1,
    stepwise: options.stepwise ?? DEFAULT_STEPWISE_CLIP,
    aggregation: options.aggregation ?? 'seq-mean-token-mean',
    klCoef: options.kl?.coef ?? 0,
    estimator: options.kl?.estimator ?? 'k3',
    maskTruncated: options.maskTruncated ?? false,
  };
  validateClip(r.ownClip);
  if (!['hacpo', 'hacpo-unclipped', 'gspo'].includes(r.foreign)) {
    throw new Error(`foreign objective must be 'hacpo', 'hacpo-unclipped' or 'gspo', got '${String(r.foreign)}'`);
  }
  if (!(r.alpha >= 0 && Number.isFinite(r.alpha))) throw new Error(`α must be finite and ≥ 0, got ${r.alpha}`);
  if (!(r.klCoef >= 0)) throw new Error(`KL coefficient must be ≥ 0, got ${r.klCoef}`);
  stepwiseLowerBound(r.stepwise, options.update);
  return r;
}

/** How many of a sequence's tokens the loss counts: all, or none when it is empty or dropped as truncated. */
function countedLength(seq: HacpoSequence, maskTruncated: boolean): number {
  return maskTruncated && seq.truncated === true ? 0 : seq.logProbs.length;
}

/** The denominators of a HACPO mini-batch (sequences with tokens, and tokens), as lossUnits for PolicySequence. */
export function hacpoLossUnits(batch: readonly HacpoSequence[], maskTruncated = false): LossUnits {
  let sequences = 0;
  let tokens = 0;
  for (const seq of batch) {
    const n = countedLength(seq, maskTruncated);
    tokens += n;
    if (n > 0) sequences++;
  }
  return { sequences, tokens };
}

/**
 * Throws, naming the sequence, when its per-token arrays differ in length, its coefficient is not finite and > 0, an
 * own response has a coefficient other than 1, or an own response's generatorOldMean disagrees with the mean of its
 * oldLogProbs (both must cover the same span, else the ratio is off by their difference).
 */
function validateSequence(seq: HacpoSequence, index: number): void {
  const n = seq.logProbs.length;
  for (const [name, arr] of [
    ['oldLogProbs', seq.oldLogProbs],
    ['refLogProbs', seq.refLogProbs],
  ] as const) {
    if (arr !== undefined && arr.length !== n) {
      throw new Error(`sequence ${index}: ${name} has ${arr.length} entries but logProbs has ${n}; pass one per token`);
    }
  }
  const c = seq.coefficient;
  if (c !== undefined && !(Number.isFinite(c) && c > 0)) {
    throw new Error(`sequence ${index}: coefficient ${c}; ω^(j,k) must be finite and > 0`);
  }
  if (seq.own && c !== undefined && c !== 1) {
    throw new Error(`sequence ${index}: an own response takes coefficient 1 (HACRL Eq. 10), got ${c}`);
  }
  if (seq.own && seq.oldLogProbs !== undefined && n > 0) {
    const mean = meanOf(seq.oldLogProbs);
    if (Math.abs(mean - seq.generatorOldMean) > 1e-3 * Math.max(1, Math.abs(mean))) {
      throw new Error(
        `sequence ${index}: own response with generatorOldMean ${seq.generatorOldMean} but its oldLogProbs ` +
          `average ${mean}; for own responses pass the mean of the learner's old log-probs over the same tokens`,
      );
    }
  }
}

/**
 * L = Σ_i w_i·|y_i|·ℓ_i + β·Σ_{own i} w_i Σ_t KL_{i,t}, with ℓ_i = gspoSequenceLoss (own responses, and foreign ones
 * under 'gspo', with A·coefficient) or foreignSequenceLoss (foreign under 'hacpo', HACRL Eqs. 12–14, with A and
 * ω^(j,k)); log s_i from crossSequenceLogRatio (HACRL Eq. 11) for both. Returns ∂L/∂ each learner log-prob:
 * w_i·∂ℓ_i/∂ log s_i + β·w_i·∂KL/∂new. Throws on malformed sequences or options, and when β > 0 and a counted own
 * response lacks refLogProbs; a non-finite log-prob is not an error but makes the loss NaN.
 */
export function hacpoLoss(batch: readonly HacpoSequence[], options: HacpoLossOptions): HacpoLossResult {
  const o = resolve(options);
  batch.forEach(validateSequence);
  const counts = hacpoLossUnits(batch, o.maskTruncated);
  const units = checkedDenominators(options.denominators, counts, 'hacpoLossUnits');
  const lowerBound = o.foreign === 'hacpo' ? stepwiseLowerBound(o.stepwise, options.update) : NaN;
  const ownTally = new RatioTally('sequence');
  const foreignTally = new RatioTally('sequence');
  let ownCount = 0;
  let foreignCount = 0;
  let foreignInBand = 0;
  const klMean = new Mean();
  const moved = new Mean();
  let policy = 0;
  let klLoss = 0;
  let truncatedDropped = 0;
  let empty = 0;

  /** ℓ_i and ∂ℓ_i/∂ log s_i of one counted sequence, with its statistics recorded. */
  const sequenceLoss = (seq: HacpoSequence): { loss: number; dLogRatio: number } => {
    const logRatio = crossSequenceLogRatio(seq.logProbs, seq.generatorOldMean);
    const coefficient = seq.coefficient ?? 1;
    if (!seq.own && o.foreign !== 'gspo') {
      const band = o.foreign === 'hacpo' ? o.stepwise : null;
      const r = foreignSequenceLoss(logRatio, seq.advantage, coefficient, o.alpha, band, options.update);
      foreignTally.add(r.ratio, r.clipped);
      foreignCount++;
      if (r.inBand) foreignInBand++;
      return r;
    }
    const r = gspoSequenceLoss(logRatio, seq.advantage * coefficient, o.ownClip);
    if (seq.own) {
      ownTally.add(r.ratio, r.clipped);
      ownCount++;
    } else {
      foreignTally.add(r.ratio, r.clipped);
      foreignCount++;
      if (r.ratio >= 1 - o.ownClip.low && r.ratio <= 1 + o.ownClip.high) foreignInBand++;
    }
    return r;
  };

  /** Adds β·KL of an own sequence's tokens to g and klLoss, and the KL and old − new statistics. */
  const addKlTerm = (seq: HacpoSequence, i: number, w: number, g: Float64Array): void => {
    const old = seq.oldLogProbs;
    for (let t = 0; old !== undefined && t < g.length; t++) moved.add(old[t]! - seq.logProbs[t]!);
    if (!seq.own) return;
    const ref = seq.refLogProbs;
    if (ref === undefined) {
      if (o.klCoef > 0) {
        throw new Error(
          `sequence ${i} (own) has no refLogProbs but the KL coefficient is ${o.klCoef}: pass them or set it to 0`,
        );
      }
      return;
    }
    const all = Array.from({ length: g.length }, (_, t) => t);
    klLoss += addKlPenalty(o.estimator, o.klCoef, w, seq.logProbs, ref, all, g, (v) => klMean.add(v));
  };

  const grad = batch.map((seq, i) => {
    const g = new Float64Array(seq.logProbs.length);
    const n = countedLength(seq, o.maskTruncated);
    if (n === 0) {
      if (o.maskTruncated && seq.truncated === true && seq.logProbs.length > 0) truncatedDropped++;
      else empty++;
      return Float32Array.from(g);
    }
    const w = sequenceWeight(n, o.aggregation, units);
    const r = sequenceLoss(seq);
    g.fill(w * r.dLogRatio);
    policy += w * n * r.loss;
    addKlTerm(seq, i, w, g);
    return Float32Array.from(g);
  });

  const stats: HacpoLossStats = {
    policyLoss: policy,
    klLoss,
    kl: klMean.value,
    approxKl: moved.value,
    own: { ...ownTally.stats(), count: ownCount },
    foreign: {
      ...foreignTally.stats(),
      inBandFrac: foreignCount === 0 ? NaN : foreignInBand / foreignCount,
      count: foreignCount,
    },
    lowerBound,
    sequences: counts.sequences,
    tokens: counts.tokens,
    truncatedDropped,
    empty,
  };
  return { loss: policy + klLoss, grad, stats };
}
