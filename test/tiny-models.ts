// Tiny configs of the four families, each switching on a different part of the model, shared by the model tests.
import { parseHfConfig } from '../src/model/hf-config.js';
import type { Transformer } from '../src/model/transformer.js';
import { initModel } from '../src/model/weights.js';
import { mulberry32, uniform } from './helpers.js';

/** Vocabulary of every tiny model. */
export const VOCAB = 97;

const llamaLike = {
  vocab_size: VOCAB,
  hidden_size: 64,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  max_position_embeddings: 128,
  rope_theta: 10000,
  hidden_act: 'silu',
};

/** One config.json per family, each switching on a different part of the model. */
export const CONFIGS: Record<string, Record<string, unknown>> = {
  // Tied embeddings, biases everywhere, and llama3 rope scaling whose three frequency bands all hold some of the
  // 8 frequencies of head_dim 16 (wavelengths 6.3, 20, 63, 199, ... against bands cut at 16 and 64).
  llama: {
    ...llamaLike,
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    head_dim: 16,
    intermediate_size: 128,
    rms_norm_eps: 1e-5,
    attention_bias: true,
    mlp_bias: true,
    tie_word_embeddings: true,
    rope_scaling: {
      rope_type: 'llama3',
      factor: 8,
      low_freq_factor: 1,
      high_freq_factor: 4,
      original_max_position_embeddings: 64,
    },
  },
  // Untied, q/k/v biases only (implicit in Qwen2).
  qwen2: {
    ...llamaLike,
    architectures: ['Qwen2ForCausalLM'],
    model_type: 'qwen2',
    intermediate_size: 128,
    rms_norm_eps: 1e-6,
    tie_word_embeddings: false,
    use_sliding_window: false,
  },
  // Per-head q/k RMSNorm, heads · head_dim = 128 ≠ hidden 64, untied.
  qwen3: {
    ...llamaLike,
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    head_dim: 32,
    intermediate_size: 256,
    rms_norm_eps: 1e-6,
    attention_bias: false,
    tie_word_embeddings: false,
    rope_scaling: null,
  },
  // LayerNorm, tanh GELU, learned positions, Conv1D weights, tied embeddings.
  gpt2: {
    architectures: ['GPT2LMHeadModel'],
    model_type: 'gpt2',
    vocab_size: VOCAB,
    n_embd: 64,
    n_layer: 2,
    n_head: 4,
    n_positions: 32,
    n_inner: null,
    activation_function: 'gelu_new',
    layer_norm_epsilon: 1e-5,
    tie_word_embeddings: true,
  },
};

/**
 * A model whose every parameter matters: weights N(0, 0.15²) (the default 0.02 leaves attention nearly uniform, so
 * rotary or masking errors would hide under the tolerance), norm scales 1 + U(−0.35, 0.35), biases U(−0.17, 0.17).
 */
export function testModel(json: Record<string, unknown>, seed: number): Transformer {
  const model = initModel(parseHfConfig(json), seed, 0.15);
  const rng = mulberry32(seed + 1);
  for (const [name, t] of model.params) {
    const isNorm = /(norm|ln_\d|ln_f)\.weight$/.test(name);
    if (!isNorm && !name.endsWith('.bias')) continue;
    t.data.set(isNorm ? uniform(t.size, rng, 0.65, 1.35) : uniform(t.size, rng, -0.17, 0.17));
  }
  return model;
}
