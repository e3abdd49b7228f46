/** FLOP counting shared by the benchmarks. */
import type { Transformer } from '../src/model/transformer.js';

/** Parameters that take part in a matrix multiply per token: every 2-D weight, the embedding only as a tied head. */
export function matmulParams(model: Transformer): number {
  let n = 0;
  for (const [name, t] of model.params)
    if (t.shape.length === 2 && (model.cfg.tiedEmbeddings || name !== 'model.embed_tokens.weight')) n += t.size;
  return n;
}
