/**
 * `node dist/bench/sampling-digest.js [--threads=N]`: digests of what seeded generate() samples, to check that a
 * change to the decode path keeps the tokens. Five small models (Qwen3-style with head dims 64 and 32, a Llama with
 * biases, GPT-2) × four settings (temperature 1, greedy, top-k, top-p) × 64 left-padded prompts × 64 new tokens, at
 * seed 5; one line per case with the sha256 of the ids and of the log-probs, then one digest of all ids. Run it in two
 * builds (e.g. an older commit's worktree and yours) and diff the outputs: the ids must match; the log-probs match too unless a
 * change reorders a sum (then compare the log-probs against PyTorch instead).
 */
import { createHash } from 'node:crypto';
import { engine } from '../src/backend/engine.js';
import { generate, type SamplingOptions } from '../src/model/generate.js';
import { parseHfConfig, type TransformerConfig } from '../src/model/hf-config.js';
import { initModel } from '../src/model/weights.js';
import { Rng } from '../src/util/rng.js';

const threads = process.argv.find((a) => a.startsWith('--threads='))?.split('=')[1];
if (threads !== undefined) process.env.HACRL_THREADS = threads;

/** A Qwen3-style config: grouped-query attention with half as many kv heads, tied embeddings. */
function qwen3(hidden: number, layers: number, heads: number, intermediate: number, vocab: number, headDim: number) {
  return parseHfConfig({
    architectures: ['Qwen3ForCausalLM'],
    model_type: 'qwen3',
    vocab_size: vocab,
    hidden_size: hidden,
    intermediate_size: intermediate,
    num_hidden_layers: layers,
    num_attention_heads: heads,
    num_key_value_heads: heads / 2,
    head_dim: headDim,
    max_position_embeddings: 512,
    rms_norm_eps: 1e-6,
    rope_theta: 1e6,
    hidden_act: 'silu',
    attention_bias: false,
    tie_word_embeddings: true,
  });
}

const MODELS: Record<string, TransformerConfig> = {
  qwen3_10M: qwen3(320, 6, 4, 960, 8192, 64),
  qwen3_1M: qwen3(128, 4, 2, 384, 4096, 64),
  qwen3_hd32: qwen3(96, 2, 6, 256, 1000, 32),
  llama_bias: parseHfConfig({
    architectures: ['LlamaForCausalLM'],
    model_type: 'llama',
    vocab_size: 500,
    hidden_size: 64,
    intermediate_size: 128,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 16,
    max_position_embeddings: 512,
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    hidden_act: 'silu',
    attention_bias: true,
    mlp_bias: true,
    tie_word_embeddings: true,
  }),
  gpt2: parseHfConfig({
    architectures: ['GPT2LMHeadModel'],
    model_type: 'gpt2',
    vocab_size: 500,
    n_embd: 64,
    n_layer: 2,
    n_head: 4,
    n_positions: 512,
    activation_function: 'gelu_new',
    layer_norm_epsilon: 1e-5,
  }),
};

const SETTINGS: Record<string, SamplingOptions> = {
  t1: { temperature: 1 },
  greedy: { temperature: 0 },
  topk: { temperature: 0.8, topK: 20 },
  topp: { temperature: 1, topP: 0.9 },
};

const sha = (x: unknown): string => createHash('sha256').update(JSON.stringify(x)).digest('hex').slice(0, 12);

const k = engine();
const all = createHash('sha256');
for (const [name, cfg] of Object.entries(MODELS)) {
  const model = initModel(cfg, 7);
  const rng = new Rng(99);
  // Lengths 4..16: every batch is left-padded.
  const prompts = Array.from({ length: 64 }, (_, i) =>
    Array.from({ length: 4 + (i % 13) }, () => rng.int(cfg.vocabSize)),
  );
  for (const [setting, options] of Object.entries(SETTINGS)) {
    const out = generate(model, k, prompts, { maxNewTokens: 64, seed: 5, ...options });
    const ids = sha(out.map((g) => g.ids));
    all.update(ids);
    const tokens = out.reduce((n, g) => n + g.ids.length, 0);
    console.log(`${name} ${setting}: ${tokens} tokens, ids ${ids}, log-probs ${sha(out.map((g) => g.logProbs))}`);
  }
}
console.log(`all ids ${all.digest('hex').slice(0, 16)}`);
