/**
 * Loss aggregation: how per-token losses ℓ_{i,t} of a mini-batch become one number. Every mode is a weighted sum
 * L = Σ_i w_i Σ_{t counted} ℓ_{i,t} with a weight that is the same for all tokens of a sequence — which is what makes
 * the GSPO-token gradient equal the exact gradient of the sequence-level loss (see gspo.ts).
 */
import type { LossUnits } from './sequence.js';

/**
 * 'token-mean': Σ over all counted tokens / number of tokens (DAPO; the GRPO baseline);
 * 'seq-mean-token-mean': mean over sequences of each sequence's token mean (original GRPO; GSPO);
 * 'seq-mean-token-sum': mean over sequences of each sequence's token sum (Dr. GRPO uses a constant instead of the
 * sequence count).
 */
export const LOSS_AGGREGATIONS = ['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum'] as const;
/** One of LOSS_AGGREGATIONS. */
export type LossAggregation = (typeof LOSS_AGGREGATIONS)[number];

/** The weight w_i of each counted token of a sequence with `tokens` counted tokens, given the batch's denominators. */
export function sequenceWeight(tokens: number, mode: LossAggregation, units: LossUnits): number {
  if (tokens === 0) return 0;
  switch (mode) {
    case 'token-mean':
      return 1 / units.tokens;
    case 'seq-mean-token-mean':
      return 1 / (units.sequences * tokens);
    case 'seq-mean-token-sum':
      return 1 / units.sequences;
  }
}
