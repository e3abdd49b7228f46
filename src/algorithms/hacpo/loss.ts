/**
 * HACPO's total objective for one learner's mini-batch, own and foreign responses mixed (HACRL Eqs. 10–14, spec §5):
 *   L = Σ_i w_i·|y_i|·ℓ_i  (+ β·KL on own responses),
 *   ℓ_i = GSPO's −min(s·A, clip(s)·A)                                  own response (Eqs. 47–49),
 *   ℓ_i = −A_i·ω^(j,k)·c·sg(c)^α,  c = clip(s, 1 − δ + m·δ_step, 1)     foreign response of agent j (Eqs. 10, 12–14),
 * with s the cross-agent sequence ratio of Eq. 11 and A_i the capability-aware advantage of Eqs. 6–9. Each equation is
 * one function (surrogates.ts, stepwise-clip.ts, ratio.ts); the aggregation, KL and statistics are the shared policyLoss.
 */
import type { LossAggregation } from '../aggregate.js';
import type { ClipRange } from '../clipped-surrogate.js';
import type { KlEstimator } from '../kl.js';
import type { RatioStats } from '../loss-stats.js';
import { type ForeignObjective, type PolicyLossStats, policyLoss } from '../policy-loss.js';
import { type LossUnits, type PolicySequence, lossUnits } from '../sequence.js';
import type { StepwiseClip } from './stepwise-clip.js';
import { meanOf } from './ratio.js';

export type { ForeignObjective, ForeignRatioStats } from '../policy-loss.js';

/** One response in a learner's mini-batch: its own (generatorOldMean = mean of its old log-probs) or a foreign one. */
export type HacpoSequence = PolicySequence & { generatorOldMean: number; own: boolean };

/** Options of hacpoLoss. */
export interface HacpoLossOptions {
  /** GSPO clip range of own responses (and of foreign ones under 'gspo'); default GSPO_CLIP (3e-4 / 4e-4). */
  ownClip?: ClipRange;
  /** The foreign objective; default 'hacpo' (Eqs. 12–14). */
  foreign?: ForeignObjective;
  /** Exponential IS exponent α ≥ 0 (Eq. 12); default 1; 0 = off. */
  alpha?: number;
  /** The foreign clip band (Eq. 14); default δ 0.2, δ_step 0.025; deltaStep 0 = fixed band. */
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

/** Own responses' sequence-ratio statistics. */
export interface OwnRatioStats extends RatioStats {
  /** Counted own sequences. */
  count: number;
}

/** Statistics of one hacpoLoss call: policyLoss's, with own and foreign ratio statistics side by side. */
export type HacpoLossStats = Omit<PolicyLossStats, keyof RatioStats | 'ownCount'> & { own: OwnRatioStats };

/** The loss, ∂loss/∂ each learner log-prob (seed for tape.backward), and statistics. */
export interface HacpoLossResult {
  loss: number;
  grad: Float32Array[];
  stats: HacpoLossStats;
}

/** The denominators of a HACPO mini-batch (sequences with tokens, and tokens). */
export const hacpoLossUnits = (batch: readonly HacpoSequence[], maskTruncated = false): LossUnits =>
  lossUnits(batch, maskTruncated);

/**
 * The HACPO loss of a mini-batch (the objective above). Throws on malformed sequences or options, including an own
 * response whose generatorOldMean disagrees with the mean of its oldLogProbs (both must cover the same span).
 */
export function hacpoLoss(batch: readonly HacpoSequence[], options: HacpoLossOptions): HacpoLossResult {
  batch.forEach((seq, i) => {
    if (!seq.own || seq.oldLogProbs === undefined || seq.oldLogProbs.length !== seq.logProbs.length) return;
    const mean = meanOf(seq.oldLogProbs);
    if (seq.logProbs.length > 0 && Math.abs(mean - seq.generatorOldMean) > 1e-3 * Math.max(1, Math.abs(mean)))
      throw new Error(
        `sequence ${i}: own response with generatorOldMean ${seq.generatorOldMean} but its oldLogProbs average ` +
          `${mean}; for own responses pass the mean of the learner's old log-probs over the same tokens`,
      );
  });
  const { loss, grad, stats } = policyLoss(batch, {
    objective: { kind: 'gspo', ...(options.ownClip ? { clip: options.ownClip } : {}) },
    foreign: {
      ...(options.foreign === undefined ? {} : { objective: options.foreign }),
      ...(options.alpha === undefined ? {} : { alpha: options.alpha }),
      ...(options.stepwise ? { stepwise: options.stepwise } : {}),
      update: options.update,
    },
    ...(options.aggregation ? { aggregation: options.aggregation } : {}),
    ...(options.kl ? { kl: options.kl } : {}),
    ...(options.maskTruncated === undefined ? {} : { maskTruncated: options.maskTruncated }),
    ...(options.denominators ? { denominators: options.denominators } : {}),
  });
  const { ratioLevel, clipFracLow, clipFracHigh, clipFracDual, ratioMean, ratioMin, ratioMax, ownCount, ...rest } =
    stats;
  const own = { ratioLevel, clipFracLow, clipFracHigh, clipFracDual, ratioMean, ratioMin, ratioMax, count: ownCount };
  return { loss, grad, stats: { ...rest, own } };
}
