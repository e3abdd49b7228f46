import type { Ctx } from '../tensor/tape.js';
import { weightedSum } from '../tensor/ops.js';
import type { Tensor } from '../tensor/tensor.js';
import { packPromptResponses, type PromptResponse } from './pack.js';
import type { Transformer } from './transformer.js';

/** Number of response tokens (the targets an SFT loss averages over) in `items`. */
export function responseTokens(items: readonly PromptResponse[]): number {
  return items.reduce((n, s) => n + s.response.length, 0);
}

/**
 * Supervised fine-tuning loss with prompt masking: the negative log-likelihood (nats) of the response tokens only,
 * divided by `normalizer` (default: this batch's response-token count, i.e. the mean per token). For gradient
 * accumulation over micro-batches pass the token count of the whole batch (responseTokens), so the summed gradients
 * equal one big batch's. Returns the loss as a one-element tensor on ctx's tape and this micro-batch's token count.
 */
export function sftLoss(
  ctx: Ctx,
  model: Transformer,
  items: readonly PromptResponse[],
  normalizer?: number,
): { loss: Tensor; tokens: number } {
  const packed = packPromptResponses(items);
  const { logProb } = model.tokenLogProbs(ctx, packed, packed.targets);
  const tokens = responseTokens(items);
  if (tokens === 0) throw new Error('sftLoss: no response tokens in the batch');
  const denominator = normalizer ?? tokens;
  const weights = Float32Array.from(packed.targets, (t) => (t >= 0 ? -1 / denominator : 0));
  return { loss: weightedSum(ctx, logProb, weights), tokens };
}
