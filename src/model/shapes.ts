/**
 * The shapes of the public checkpoints users bring, for benchmarks with random weights: each is the architecture part
 * of the model's Hugging Face `config.json` as published on its model card (values written here; nothing is
 * downloaded), parsed by the same parseHfConfig a real checkpoint goes through.
 */
import { parseHfConfig, type TransformerConfig } from './hf-config.js';

/** The config.json fields that fix a shape (vocabulary, sizes, heads, tying, rope, positions, norm). */
const SHAPES = {
  // HuggingFaceTB/SmolLM2-135M
  'smollm2-135m': {
    architectures: ['LlamaForCausalLM'],
    vocab_size: 49152,
    hidden_size: 576,
    intermediate_size: 1536,
    num_hidden_layers: 30,
    num_attention_heads: 9,
    num_key_value_heads: 3,
    tie_word_embeddings: true,
    rope_theta: 100000,
    max_position_embeddings: 8192,
    rms_norm_eps: 1e-5,
    hidden_act: 'silu',
    bos_token_id: 0,
    eos_token_id: 0,
  },
  // Qwen/Qwen2.5-0.5B (q, k, v biases; 494M parameters)
  'qwen2.5-0.5b': {
    architectures: ['Qwen2ForCausalLM'],
    vocab_size: 151936,
    hidden_size: 896,
    intermediate_size: 4864,
    num_hidden_layers: 24,
    num_attention_heads: 14,
    num_key_value_heads: 2,
    tie_word_embeddings: true,
    rope_theta: 1000000,
    max_position_embeddings: 32768,
    rms_norm_eps: 1e-6,
    hidden_act: 'silu',
    bos_token_id: 151643,
    eos_token_id: 151643,
  },
  // Qwen/Qwen3-0.6B (head_dim 128 with 16 heads: q is wider than the hidden size; q/k norms)
  'qwen3-0.6b': {
    architectures: ['Qwen3ForCausalLM'],
    vocab_size: 151936,
    hidden_size: 1024,
    intermediate_size: 3072,
    num_hidden_layers: 28,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    tie_word_embeddings: true,
    rope_theta: 1000000,
    max_position_embeddings: 40960,
    rms_norm_eps: 1e-6,
    hidden_act: 'silu',
    attention_bias: false,
    bos_token_id: 151643,
    eos_token_id: 151645,
  },
  // meta-llama/Llama-3.2-1B (Llama 3 rope scaling)
  'llama-3.2-1b': {
    architectures: ['LlamaForCausalLM'],
    vocab_size: 128256,
    hidden_size: 2048,
    intermediate_size: 8192,
    num_hidden_layers: 16,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    head_dim: 64,
    tie_word_embeddings: true,
    rope_theta: 500000,
    rope_scaling: {
      rope_type: 'llama3',
      factor: 32,
      low_freq_factor: 1,
      high_freq_factor: 4,
      original_max_position_embeddings: 8192,
    },
    max_position_embeddings: 131072,
    rms_norm_eps: 1e-5,
    hidden_act: 'silu',
    bos_token_id: 128000,
    eos_token_id: 128001,
  },
} as const;

/** The shape names: what `bench:model --shape` and `bench:rl --shape` take. */
export type ShapeName = keyof typeof SHAPES;
/** Every shape name, smallest model first. */
export const SHAPE_NAMES = Object.keys(SHAPES) as ShapeName[];

/** The named shape as a TransformerConfig; an error listing the names for an unknown one. */
export function shapeConfig(name: string): TransformerConfig {
  if (!Object.hasOwn(SHAPES, name)) throw new Error(`unknown shape "${name}": choose one of ${SHAPE_NAMES.join(', ')}`);
  return parseHfConfig(SHAPES[name as ShapeName], `shape ${name}`);
}

/**
 * The parameters a model of `cfg` holds, counted from the shape alone (no weights allocated): embeddings, per block
 * the attention projections (with their biases and q/k norms), the MLP and the norms, the final norm, and the output
 * projection unless tied.
 */
export function configParameterCount(cfg: TransformerConfig): number {
  const { hidden: h, heads, kvHeads, headDim: d, intermediate: i, vocabSize: v } = cfg;
  const normSize = cfg.norm.kind === 'layernorm' ? 2 * h : h;
  const attention =
    h * heads * d +
    2 * h * kvHeads * d +
    heads * d * h +
    (cfg.qkvBias ? heads * d + 2 * kvHeads * d : 0) +
    (cfg.outputBias ? h : 0) +
    (cfg.qkNorm ? 2 * d : 0);
  const mlp = cfg.gatedMlp ? 3 * h * i + (cfg.mlpBias ? 2 * i + h : 0) : 2 * h * i + (cfg.mlpBias ? i + h : 0);
  const positions = cfg.position.kind === 'learned' ? cfg.maxPositions * h : 0;
  const head = cfg.tiedEmbeddings ? 0 : v * h;
  return v * h + positions + cfg.layers * (attention + mlp + 2 * normSize) + normSize + head;
}
