/**
 * The policy loss of a mini-batch as a pure function of numbers: per-sequence log-probs and advantages in, the loss,
 * ∂loss/∂(each new log-prob) and statistics out. The trainer seeds tape.backward(logProbs, grad[i]) with the result.
 */
import { type LossAggregation, sequenceWeight } from './aggregate.js';
import { type ClipRange, DAPO_CLIP, GSPO_CLIP, validateClip } from './clip.js';
import { grpoTokenLoss } from './grpo.js';
import { gspoLogRatio, gspoSequenceLoss } from './gspo.js';
import { type KlEstimator, addKlPenalty } from './kl.js';
import { Mean, type RatioStats, RatioTally } from './loss-stats.js';
import {
  type LossUnits,
  type PolicySequence,
  checkedDenominators,
  countedTokens,
  lossUnits,
  validateSequence,
} from './sequence.js';

/** GRPO: one importance ratio per token. */
export interface GrpoObjective {
  kind: 'grpo';
  /** Clip range; default DAPO_CLIP (ε_low 0.2, ε_high 0.28). */
  clip?: ClipRange;
  /** Dual clip c ≥ 1 capping the loss of A < 0 tokens at −c·A; default off (verl applies c = 3). */
  dualClip?: number;
}

/** GSPO: one length-normalised importance ratio per sequence. */
export interface GspoObjective {
  kind: 'gspo';
  /** Clip range; default GSPO_CLIP (ε_low 3e-4, ε_high 4e-4). */
  clip?: ClipRange;
}

/** The surrogate objective. */
export type PolicyObjective = GrpoObjective | GspoObjective;

/** β·KL(π_θ ‖ π_ref) added to each counted token's loss and aggregated like it. */
export interface KlPenalty {
  /** β ≥ 0 (the HACPO spec uses 0.001, on own responses only). */
  coef: number;
  /** Estimator; default 'k3' (low variance). */
  estimator?: KlEstimator;
}

/** Options of policyLoss. */
export interface PolicyLossOptions {
  /** The surrogate objective and its clip range. */
  objective: PolicyObjective;
  /** Default 'token-mean' for GRPO (DAPO), 'seq-mean-token-mean' for GSPO (the GSPO paper and verl's recipe). */
  aggregation?: LossAggregation;
  /** KL penalty to the frozen reference; default none. Every counted sequence then needs refLogProbs. */
  kl?: KlPenalty;
  /** Drop sequences flagged `truncated` from the loss and from every denominator; default false. */
  maskTruncated?: boolean;
  /**
   * The denominators to divide by; default this batch's own lossUnits. Pass lossUnits(miniBatch) when calling on
   * micro-batches of one mini-batch, so that their losses and gradients add up to the mini-batch's.
   */
  denominators?: LossUnits;
  // No entropy bonus: it needs ∂H/∂logits, and the model only hands out the sampled tokens' log-probs.
}

/** Statistics of one policyLoss call (means over nothing are NaN, which JSON writes as null). */
export interface PolicyLossStats extends RatioStats {
  /** The clipped-surrogate part of the loss. */
  policyLoss: number;
  /** The β·KL part of the loss (0 without a penalty). */
  klLoss: number;
  /** Token mean of the KL estimate to the reference over tokens that have refLogProbs; NaN when none do. */
  kl: number;
  /** Token mean of old − new: the k1 estimate of KL(π_old ‖ π_θ), how far this mini-batch moved (verl's ppo_kl). */
  approxKl: number;
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
  grad: Float32Array[];
  stats: PolicyLossStats;
}

/** The options with their defaults filled in. */
interface Resolved {
  aggregation: LossAggregation;
  clip: ClipRange;
  dualClip: number | undefined;
  klCoef: number;
  estimator: KlEstimator;
  maskTruncated: boolean;
}

/** Fills in defaults and validates. */
function resolve(options: PolicyLossOptions): Resolved {
  const { objective } = options;
  const grpo = objective.kind === 'grpo';
  const r: Resolved = {
    aggregation: options.aggregation ?? (grpo ? 'token-mean' : 'seq-mean-token-mean'),
    clip: objective.clip ?? (grpo ? DAPO_CLIP : GSPO_CLIP),
    dualClip: objective.kind === 'grpo' ? objective.dualClip : undefined,
    klCoef: options.kl?.coef ?? 0,
    estimator: options.kl?.estimator ?? 'k3',
    maskTruncated: options.maskTruncated ?? false,
  };
  validateClip(r.clip);
  if (r.dualClip !== undefined && !(r.dualClip >= 1)) throw new Error(`dual clip c must be ≥ 1, got ${r.dualClip}`);
  if (!(r.klCoef >= 0)) throw new Error(`KL coefficient must be ≥ 0, got ${r.klCoef}`);
  return r;
}

/**
 * L = Σ_i w_i Σ_{t counted} [ℓ_{i,t} + β·KL_{i,t}] with w_i from the aggregation mode (aggregate.ts), ℓ from GRPO
 * (grpo.ts) or GSPO (gspo.ts), and ∂L/∂new_{i,t} for every token. Throws on malformed sequences or options; a
 * non-finite log-prob is not an error but makes the loss NaN, so the trainer can skip the step as for a NaN grad norm.
 */
export function policyLoss(batch: readonly PolicySequence[], options: PolicyLossOptions): PolicyLossResult {
  const o = resolve(options);
  batch.forEach(validateSequence);
  const own = lossUnits(batch, o.maskTruncated);
  const units = checkedDenominators(options.denominators, own, 'lossUnits');
  const tally = new RatioTally(options.objective.kind === 'grpo' ? 'token' : 'sequence');
  const klMean = new Mean();
  const moved = new Mean();
  let policy = 0;
  let klLoss = 0;
  let truncatedDropped = 0;
  let empty = 0;

  /** Adds sequence i's clipped-surrogate term (GRPO: per token; GSPO: one ratio for the sequence) to g and policy. */
  const addPolicyTerm = (seq: PolicySequence, tokens: readonly number[], w: number, g: Float64Array): void => {
    if (options.objective.kind === 'gspo') {
      const r = gspoSequenceLoss(gspoLogRatio(seq, tokens), seq.advantage, o.clip);
      tally.add(r.ratio, r.clipped);
      for (const t of tokens) g[t] += w * r.dLogRatio;
      policy += w * tokens.length * r.loss;
      return;
    }
    for (const t of tokens) {
      const r = grpoTokenLoss(seq.logProbs[t]!, seq.oldLogProbs[t]!, seq.advantage, o.clip, o.dualClip);
      tally.add(r.ratio, r.clipped);
      g[t] += w * r.dNew;
      policy += w * r.loss;
    }
  };

  /** Adds β·KL of sequence i's tokens to g and klLoss, and the KL and old − new statistics. */
  const addKlTerm = (seq: PolicySequence, i: number, tokens: readonly number[], w: number, g: Float64Array): void => {
    const ref = seq.refLogProbs;
    if (ref === undefined && o.klCoef > 0) {
      throw new Error(
        `sequence ${i} has no refLogProbs but the KL coefficient is ${o.klCoef}: pass them or set it to 0`,
      );
    }
    for (const t of tokens) moved.add(seq.oldLogProbs[t]! - seq.logProbs[t]!);
    if (ref !== undefined)
      klLoss += addKlPenalty(o.estimator, o.klCoef, w, seq.logProbs, ref, tokens, g, (v) => klMean.add(v));
  };

  const grad = batch.map((seq, i) => {
    const g = new Float64Array(seq.logProbs.length);
    const tokens = countedTokens(seq, o.maskTruncated);
    if (tokens.length === 0) {
      if (o.maskTruncated && seq.truncated === true) truncatedDropped++;
      else empty++;
    } else {
      const w = sequenceWeight(tokens.length, o.aggregation, units);
      addPolicyTerm(seq, tokens, w, g);
      addKlTerm(seq, i, tokens, w, g);
    }
    return Float32Array.from(g);
  });

  const stats: PolicyLossStats = {
    ...tally.stats(),
    policyLoss: policy,
    klLoss,
    kl: klMean.value,
    approxKl: moved.value,
    sequences: own.sequences,
    tokens: own.tokens,
    truncatedDropped,
    empty,
  };
  return { loss: policy + klLoss, grad, stats };
}
