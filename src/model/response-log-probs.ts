import type { Kernels } from '../backend/kernels.js';
import { Arena } from '../tensor/tape.js';
import { workPoint } from '../util/work-points.js';
import { packPromptResponses, type PromptResponse } from './pack.js';
import type { Transformer } from './transformer.js';

const length = (s: PromptResponse): number => s.prompt.length + s.response.length;

/** Sequences scored per forward pass by default (scoreResponses). */
export const SCORE_BATCH_SIZE = 16;

/**
 * Per-token log-probs of each response given its prompt, under the model (temperature 1), in nats: result[b][j] =
 * log π(response_j | prompt, response_<j). Rows are scored `batchSize` sequences at a time, longest first (less
 * padding); no gradients.
 */
export function scoreResponses(
  model: Transformer,
  k: Kernels,
  items: readonly PromptResponse[],
  batchSize = SCORE_BATCH_SIZE,
): number[][] {
  const out: number[][] = new Array(items.length);
  // Longest first, so each pass pads its sequences to nearly their own length.
  const order = items.map((_, i) => i).sort((a, b) => length(items[b]!) - length(items[a]!) || a - b);
  for (let i = 0; i < items.length; i += batchSize) {
    const members = order.slice(i, i + batchSize);
    const packed = packPromptResponses(members.map((j) => items[j]!));
    const arena = new Arena();
    const { logProb } = model.tokenLogProbs({ k, tape: null, arena }, packed, packed.targets);
    packed.responseRows.forEach(
      (r, m) => (out[members[m]!] = Array.from(logProb.data.subarray(r.start, r.start + r.length))),
    );
    arena.release();
    workPoint.passed();
  }
  return out;
}
