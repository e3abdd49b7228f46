import type { Kernels } from '../backend/kernels.js';
import { packPromptResponses, type PromptResponse } from './pack.js';
import type { Transformer } from './transformer.js';

/**
 * Per-token log-probs of each response given its prompt, under the model (temperature 1), in nats: result[b][j] =
 * log π(response_j | prompt, response_<j). Rows are scored `batchSize` sequences at a time; no gradients.
 */
export function scoreResponses(
  model: Transformer,
  k: Kernels,
  items: readonly PromptResponse[],
  batchSize = 16,
): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < items.length; i += batchSize) {
    const packed = packPromptResponses(items.slice(i, i + batchSize));
    const { logProb } = model.tokenLogProbs({ k, tape: null }, packed, packed.targets);
    for (const r of packed.responseRows) out.push(Array.from(logProb.data.subarray(r.start, r.start + r.length)));
  }
  return out;
}
