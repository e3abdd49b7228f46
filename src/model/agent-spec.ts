/**
 * Small agents built here from scratch: an architecture and size, and a tokenizer fitted to the task's text. Different
 * specs give the heterogeneity HACPO studies: size (same family and tokenizer, other width/depth) and model (another
 * family and another tokenizer).
 */
import { z } from 'zod';
import { parseHfConfig } from './hf-config.js';
import type { Transformer } from './transformer.js';
import { initModel } from './weights.js';
import { trainBpeTokenizer } from '../tokenizer/bpe-trainer.js';
import { CharTokenizer } from '../tokenizer/char-tokenizer.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';

/** How to build a small agent. */
export const AgentSpecSchema = z.object({
  /** Model family (Hugging Face architecture); default qwen3. */
  arch: z.enum(['qwen3', 'llama', 'qwen2', 'gpt2']).default('qwen3'),
  /** Model width d_model; default 192. */
  hidden: z.number().int().positive().default(192),
  /** Transformer blocks; default 4. */
  layers: z.number().int().positive().default(4),
  /** Query heads; default 6 (hidden must be divisible by heads for GPT-2). */
  heads: z.number().int().positive().default(6),
  /** Key/value heads (ignored for GPT-2); default heads/2 when even, else heads. */
  kvHeads: z.number().int().positive().optional(),
  /** Feed-forward width; default 3·hidden for gated MLPs, 4·hidden for GPT-2. */
  intermediate: z.number().int().positive().optional(),
  /** Longest sequence in tokens (learned positions for GPT-2, rotary elsewhere); default 512. */
  maxPositions: z.number().int().positive().default(512),
  /** Tokenizer: 'char' (one id per character seen in the corpus) or 'bpe' (byte-level BPE trained on the corpus). */
  tokenizer: z.enum(['char', 'bpe']).default('char'),
  /** Vocabulary size of a 'bpe' tokenizer (specials + 256 bytes + merges); default 512. */
  bpeVocab: z.number().int().min(260).default(512),
  /** Seed of the weight initialisation; default 0. */
  seed: z.number().int().default(0),
});
/** A validated agent spec with defaults filled in. */
export type AgentSpec = z.output<typeof AgentSpecSchema>;

const EOS = '<|endoftext|>';
const PAD = '<|pad|>';

/** A tokenizer for `corpus`: character-level over the characters it contains, or byte-level BPE trained on it. */
export function buildTokenizer(spec: AgentSpec, corpus: readonly string[]): Tokenizer {
  if (spec.tokenizer === 'bpe')
    return trainBpeTokenizer(corpus, {
      vocabSize: spec.bpeVocab,
      specialTokens: [EOS, PAD],
      names: { eos: EOS, pad: PAD },
    });
  const chars = [...new Set(corpus.join(''))].sort();
  return new CharTokenizer({ alphabet: chars, specialTokens: [EOS, PAD], names: { eos: EOS, pad: PAD } });
}

/** The Hugging Face config.json of the spec's model for a vocabulary of `vocab` ids. */
export function agentConfigJson(spec: AgentSpec, vocab: number, eosId: number): Record<string, unknown> {
  const { hidden, layers, heads } = spec;
  if (spec.arch === 'gpt2') {
    if (hidden % heads !== 0) throw new Error(`GPT-2 needs hidden (${hidden}) divisible by heads (${heads})`);
    return {
      architectures: ['GPT2LMHeadModel'],
      model_type: 'gpt2',
      vocab_size: vocab,
      n_embd: hidden,
      n_layer: layers,
      n_head: heads,
      n_positions: spec.maxPositions,
      n_inner: spec.intermediate ?? 4 * hidden,
      activation_function: 'gelu_new',
      layer_norm_epsilon: 1e-5,
      tie_word_embeddings: true,
      bos_token_id: eosId,
      eos_token_id: eosId,
    };
  }
  const headDim = Math.floor(hidden / heads);
  if (headDim % 2 !== 0 || headDim * heads !== hidden)
    throw new Error(`hidden (${hidden}) must be heads (${heads}) × an even head dimension`);
  const kvHeads = spec.kvHeads ?? (heads % 2 === 0 ? heads / 2 : heads);
  if (heads % kvHeads !== 0) throw new Error(`heads (${heads}) must be a multiple of kvHeads (${kvHeads})`);
  const archName = { qwen3: 'Qwen3ForCausalLM', llama: 'LlamaForCausalLM', qwen2: 'Qwen2ForCausalLM' }[spec.arch];
  return {
    architectures: [archName],
    model_type: spec.arch,
    vocab_size: vocab,
    hidden_size: hidden,
    num_hidden_layers: layers,
    num_attention_heads: heads,
    num_key_value_heads: kvHeads,
    head_dim: headDim,
    intermediate_size: spec.intermediate ?? 3 * hidden,
    max_position_embeddings: spec.maxPositions,
    rope_theta: 10000,
    rms_norm_eps: 1e-6,
    hidden_act: 'silu',
    tie_word_embeddings: true,
    bos_token_id: eosId,
    eos_token_id: eosId,
  };
}

/** A freshly initialised model for the spec and tokenizer. */
export function buildModel(spec: AgentSpec, tokenizer: Tokenizer): Transformer {
  return initModel(parseHfConfig(agentConfigJson(spec, tokenizer.vocabSize, tokenizer.eosId)), spec.seed);
}
