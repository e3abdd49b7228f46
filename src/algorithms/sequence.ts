/** One response of a policy-loss mini-batch, and which of its tokens the loss counts. */
import { mean } from '../util/stats.js';

/**
 * Per-token log-probs of one response in the learner's tokenization (all arrays the same length, one entry per
 * response token) and its advantage. An own response carries the learner's old log-probs; a response another agent
 * generated (HACPO) carries that generator's old mean instead, since the two tokenizations may differ.
 */
export interface PolicySequence {
  /** log π_θ(y_t | x, y_<t) under the current policy: the numbers the gradient is taken with respect to. */
  logProbs: ArrayLike<number>;
  /** log π_old(y_t | x, y_<t) of the learner before this step's updates; required for own responses. */
  oldLogProbs?: ArrayLike<number>;
  /**
   * Own responses only: log π(y_t) as the sampler computed it while generating (nats, temperature 1); needed only
   * under a rollout correction, which weighs each term by exp(old − this) (rollout-correction.ts).
   */
  samplingLogProbs?: ArrayLike<number>;
  /**
   * The generator's mean pre-update log-prob over the response (HACRL Eq. 11's denominator); required for a foreign
   * response; for an own one it replaces the mean of oldLogProbs in the sequence ratio (the HACPO API's form).
   */
  generatorOldMean?: number;
  /**
   * Foreign responses only: the response text's characters (responseCharacters) when the cross-agent ratio is
   * normalised per character (spec §7, 'char'): the learner's summed log-probs are divided by it instead of its
   * token count, and generatorOldMean must then be the generator's summed old log-probs over the same number.
   * Absent: per token (HACRL Eq. 11).
   */
  ratioCharacters?: number;
  /** False for a response another agent generated; default true. */
  own?: boolean;
  /** ω^(j,k) of HACRL Eq. 10 on a foreign response's advantage; default 1, and must be 1 for own responses. */
  coefficient?: number;
  /** The learner's current entropy (nats) at each response token; needed only for an entropy bonus. */
  entropy?: ArrayLike<number>;
  /** log π_ref(y_t | x, y_<t) under the frozen reference; needed only for a KL penalty. */
  refLogProbs?: ArrayLike<number>;
  /** The response's advantage, shared by all its tokens. */
  advantage: number;
  /** Per token 1 (in the loss) or 0 (left out, e.g. padding); default all 1. */
  mask?: ArrayLike<number>;
  /** The response hit the length limit before finishing; dropped from the loss when maskTruncated is on. */
  truncated?: boolean;
}

/** How many sequences and tokens a loss averages over (its denominators). */
export interface LossUnits {
  /** Sequences with at least one counted token. */
  sequences: number;
  /** Counted tokens. */
  tokens: number;
}

/**
 * Whether token t of `seq` is in the loss. A truncated sequence under maskTruncated is dropped entirely — from the
 * loss and from every denominator — rather than kept at weight 0 and still counted, so that masking it does not shrink
 * the step of the other sequences.
 */
export function tokenCounted(seq: PolicySequence, t: number, maskTruncated: boolean): boolean {
  if (maskTruncated && seq.truncated === true) return false;
  return seq.mask === undefined || seq.mask[t] === 1;
}

/** The indices of the counted tokens of `seq`; their number is |y| in the sequence-level equations. */
export function countedTokens(seq: PolicySequence, maskTruncated: boolean): number[] {
  const out: number[] = [];
  for (let t = 0; t < seq.logProbs.length; t++) if (tokenCounted(seq, t, maskTruncated)) out.push(t);
  return out;
}

/**
 * The denominators of a mini-batch. An empty response (no tokens, or all masked) counts as no sequence: it has no
 * log-prob the update could move, and counting it would only scale down everyone else's gradient.
 */
export function lossUnits(batch: readonly PolicySequence[], maskTruncated = false): LossUnits {
  let sequences = 0;
  let tokens = 0;
  for (const seq of batch) {
    const n = countedTokens(seq, maskTruncated).length;
    tokens += n;
    if (n > 0) sequences++;
  }
  return { sequences, tokens };
}

/**
 * Throws, naming the sequence, when its arrays differ in length, its mask holds anything but 0 and 1, it lacks the
 * old log-probs its kind needs, a foreign one carries samplingLogProbs, an own response's generatorOldMean disagrees
 * with its oldLogProbs, or its coefficient is not finite and > 0 (or not 1 on an own response).
 */
export function validateSequence(seq: PolicySequence, index: number): void {
  const n = seq.logProbs.length;
  const others: [string, ArrayLike<number> | undefined][] = [
    ['oldLogProbs', seq.oldLogProbs],
    ['samplingLogProbs', seq.samplingLogProbs],
    ['refLogProbs', seq.refLogProbs],
    ['entropy', seq.entropy],
    ['mask', seq.mask],
  ];
  for (const [name, arr] of others) {
    if (arr !== undefined && arr.length !== n) {
      throw new Error(`sequence ${index}: ${name} has ${arr.length} entries but logProbs has ${n}; pass one per token`);
    }
  }
  if (seq.own === false && seq.generatorOldMean === undefined)
    throw new Error(`sequence ${index}: a foreign response needs generatorOldMean (the generator's old mean)`);
  if (seq.own !== false && seq.oldLogProbs === undefined && seq.generatorOldMean === undefined)
    throw new Error(`sequence ${index}: an own response needs oldLogProbs (the learner's pre-update log-probs)`);
  if (seq.own === false && seq.samplingLogProbs !== undefined)
    throw new Error(
      `sequence ${index}: samplingLogProbs is for own responses; a foreign one's ratio already weighs its generator`,
    );
  const chars = seq.ratioCharacters;
  if (chars !== undefined && seq.own !== false)
    throw new Error(
      `sequence ${index}: ratioCharacters is for foreign responses; own ones keep GSPO's per-token ratio`,
    );
  if (chars !== undefined && !(Number.isInteger(chars) && chars > 0))
    throw new Error(`sequence ${index}: ratioCharacters ${chars}; pass the response's characters (a positive integer)`);
  const old = seq.oldLogProbs;
  if (seq.own !== false && old !== undefined && seq.generatorOldMean !== undefined && n > 0) {
    const m = mean(old);
    if (Math.abs(m - seq.generatorOldMean) > 1e-3 * Math.max(1, Math.abs(m)))
      throw new Error(
        `sequence ${index}: own response with generatorOldMean ${seq.generatorOldMean} but its oldLogProbs average ` +
          `${m}; for own responses pass the mean of the learner's old log-probs over the same tokens`,
      );
  }
  const c = seq.coefficient;
  if (c !== undefined && !(Number.isFinite(c) && c > 0)) {
    throw new Error(`sequence ${index}: coefficient ${c}; ω^(j,k) must be finite and > 0`);
  }
  if (seq.own !== false && c !== undefined && c !== 1) {
    throw new Error(`sequence ${index}: an own response takes coefficient 1 (HACRL Eq. 10), got ${c}`);
  }
  for (let t = 0; t < n && seq.mask !== undefined; t++) {
    const m = seq.mask[t];
    if (m !== 0 && m !== 1) throw new Error(`sequence ${index}: mask[${t}] is ${m}; a token mask holds only 0 and 1`);
  }
}

/**
 * The denominators a loss divides by: the caller's (checked to cover the batch's own counts, as when a mini-batch is
 * split into micro-batches) or the batch's own. `unitsFn` names the function the caller should have used.
 */
export function checkedDenominators(given: LossUnits | undefined, own: LossUnits, unitsFn: string): LossUnits {
  if (given === undefined) return own;
  if (given.tokens < own.tokens || given.sequences < own.sequences) {
    throw new Error(
      `denominators (${given.sequences} sequences, ${given.tokens} tokens) are smaller than this batch's own ` +
        `(${own.sequences}, ${own.tokens}): pass ${unitsFn}() of the whole mini-batch`,
    );
  }
  return given;
}
