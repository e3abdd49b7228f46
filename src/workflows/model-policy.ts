/**
 * A transformer with its tokenizer as a workflow Policy: prompts are encoded, continued by the batched KV-cache
 * sampler with the role's settings (EOS and the stop strings end a response), and decoded. The RNG is the caller's,
 * so a run's rollouts are fixed by its seed.
 */
import type { Kernels } from '../backend/kernels.js';
import { generate } from '../model/generate.js';
import type { Transformer } from '../model/transformer.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import type { Rng } from '../util/rng.js';
import type { Policy } from './policy.js';

/**
 * The policy of one model: `generate` samples one response per prompt, drawing from `rng`; `name` (default 'the
 * model') names it in sampling errors.
 */
export function modelPolicy(model: Transformer, tokenizer: Tokenizer, k: Kernels, rng: Rng, name?: string): Policy {
  return {
    generate: async (prompts, s) => {
      const ids = prompts.map((p) => tokenizer.encode(p));
      const gens = generate(model, k, ids, {
        maxNewTokens: s.maxNewTokens,
        temperature: s.temperature,
        topP: s.topP,
        stopTokens: [tokenizer.eosId],
        stopStrings: s.stopStrings,
        decode: (x) => tokenizer.decode(x, { skipSpecialTokens: true }),
        rng,
        name,
      });
      return gens.map((g) => ({ text: g.text, finishReason: g.finishReason, ids: g.ids }));
    },
  };
}
