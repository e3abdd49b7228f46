// A hand-wired agent for checking what evaluation counts: it answers every prompt with "\boxed{7}" or "\boxed{3}"
// (7 with probability 0.6 when sampled, 7 when greedy), so each answer's correctness is known in advance.
import { parseHfConfig } from '../src/model/hf-config.js';
import type { Transformer } from '../src/model/transformer.js';
import { initModel } from '../src/model/weights.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';

const ALPHABET = 'QA: \nq0123456789\\boxed{}';
/** Its character tokenizer: the plain prompt layout, questions q0, q1, …, and the answers. */
export const tokenizer = new CharTokenizer({ alphabet: ALPHABET, specialTokens: ['<eos>'], names: { eos: '<eos>' } });

/**
 * A bigram model: attention and MLP write nothing (o_proj and down_proj zero), so the residual stream is the one-hot
 * embedding of the current token and lm_head alone picks the next one. After the prompt's last character (" " of
 * "A: ") it writes "\boxed{", then 7 or 3 (logits 40 and 40 − ln 1.5: probabilities 0.6 and 0.4, everything else
 * about e^-40), then "}" and EOS.
 *
 * With `separateChoice`, the same behaviour with 7's and 3's logits read from two different coordinates of "{"'s
 * embedding (its own and a spare one past the vocabulary) rather than one: LoRA adapters, which cannot touch
 * lm_head, can then change which answer wins by writing into the residual stream (with one coordinate they could
 * only scale both logits together).
 */
export function bigramModel(o: { separateChoice?: boolean } = {}): Transformer {
  const id = (c: string): number => tokenizer.encode(c)[0]!;
  const vocab = tokenizer.vocabSize;
  const hidden = 32;
  const model = initModel(
    parseHfConfig({
      architectures: ['LlamaForCausalLM'],
      model_type: 'llama',
      vocab_size: vocab,
      hidden_size: hidden,
      num_hidden_layers: 1,
      num_attention_heads: 2,
      num_key_value_heads: 2,
      intermediate_size: 32,
      max_position_embeddings: 64,
      rms_norm_eps: 1e-6,
      tie_word_embeddings: false,
      hidden_act: 'silu',
    }),
    0,
  );
  const p = (name: string): Float32Array => model.params.get(name)!.data;
  p('model.layers.0.self_attn.o_proj.weight').fill(0);
  p('model.layers.0.mlp.down_proj.weight').fill(0);
  const embed = p('model.embed_tokens.weight').fill(0);
  for (let t = 0; t < vocab; t++) embed[t * hidden + t] = 1;
  // RMSNorm scales a one-hot row to √hidden.
  const head = p('lm_head.weight').fill(0);
  const next = (from: string, to: number, logit: number): void =>
    void (head[to * hidden + id(from)] = logit / Math.sqrt(hidden));
  const chain = [' ', '\\', 'b', 'o', 'x', 'e', 'd', '{'];
  for (let i = 0; i + 1 < chain.length; i++) next(chain[i]!, id(chain[i + 1]!), 40);
  if (o.separateChoice) {
    // "{" is one at its own coordinate and at the spare one, which RMSNorm scales to √(hidden / 2) each.
    const spare = vocab;
    embed[id('{') * hidden + spare] = 1;
    const scale = Math.sqrt(hidden / 2);
    head[id('7') * hidden + id('{')] = 40 / scale;
    head[id('3') * hidden + spare] = (40 - Math.log(1.5)) / scale;
  } else {
    next('{', id('7'), 40);
    next('{', id('3'), 40 - Math.log(1.5));
  }
  next('7', id('}'), 40);
  next('3', id('}'), 40);
  next('}', tokenizer.eosId, 40);
  return model;
}
