import type { Ctx } from '../tensor/tape.js';
import { weightedSum } from '../tensor/ops.js';
import type { Tensor } from '../tensor/tensor.js';
import { packPromptResponses, type PromptResponse } from './pack.js';
import type { Transformer } from './transformer.js';

/**
 * Supervised fine-tuning loss with prompt masking: the mean negative log-likelihood (nats per token) of the response
 * tokens only, over every response token of the batch. Returns the loss as a one-element tensor on ctx's tape and the
 * number of tokens it averages (so gradient accumulation can weight micro-batches by tokens).
 */
export function sftLoss(
  ctx: Ctx,
  model: Transformer,
  items: readonly PromptResponse[],
): { loss: Tensor; tokens: number } {
  const packed = packPromptResponses(items);
  const { logProb } = model.tokenLogProbs(ctx, packed, packed.targets);
  let tokens = 0;
  for (const t of packed.targets) if (t >= 0) tokens++;
  if (tokens === 0) throw new Error('sftLoss: no response tokens in the batch');
  const weights = Float32Array.from(packed.targets, (t) => (t >= 0 ? -1 / tokens : 0));
  return { loss: weightedSum(ctx, logProb, weights), tokens };
}
