// Hugging Face `config.json` <-> one normalized TransformerConfig for the decoder-only families we run.
// Missing optional fields take transformers' defaults for that family, so a config that loads there loads here.
import { join } from 'node:path';
import { z } from 'zod';
import { writeJsonAtomic } from '../util/atomic-write.js';
import { parseWith, readJsonFile } from '../util/json-file.js';

/** The model families supported. */
export type Family = 'llama' | 'qwen2' | 'qwen3' | 'gpt2';

/** The `architectures` value of each family, i.e. the supported architectures. */
export const ARCHITECTURES: Record<Family, string> = {
  llama: 'LlamaForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
  gpt2: 'GPT2LMHeadModel',
};

/** MLP / feed-forward nonlinearities (transformers' ACT2FN names; gelu_new and gelu_pytorch_tanh are the tanh form). */
export type Activation = 'silu' | 'gelu' | 'gelu_new' | 'gelu_pytorch_tanh' | 'relu';
const ACTIVATIONS = ['silu', 'gelu', 'gelu_new', 'gelu_pytorch_tanh', 'relu'] as const;

/** Rotary frequency scaling: none, linear (positions divided by factor), or Llama 3's wavelength-dependent scheme. */
export type RopeScaling =
  | { type: 'none' }
  | { type: 'linear'; factor: number }
  | {
      type: 'llama3';
      /** Divisor for the low frequencies. */
      factor: number;
      /** Wavelengths above originalMaxPositions / lowFreqFactor are fully scaled. */
      lowFreqFactor: number;
      /** Wavelengths below originalMaxPositions / highFreqFactor are left alone. */
      highFreqFactor: number;
      /** The context length (tokens) the model was pretrained with. */
      originalMaxPositions: number;
    };

/** How positions enter the model: rotary embeddings on q/k, or a learned position embedding table (GPT-2). */
export type PositionEncoding = { kind: 'rope'; theta: number; scaling: RopeScaling } | { kind: 'learned' };

/** A decoder-only transformer's architecture, family-independent. */
export interface TransformerConfig {
  /** Which family's layout and weight names. */
  family: Family;
  /** Rows of the token embedding (may exceed the tokenizer's vocabulary: padded). */
  vocabSize: number;
  /** Model width d_model. */
  hidden: number;
  /** Number of transformer blocks. */
  layers: number;
  /** Query heads. */
  heads: number;
  /** Key/value heads (grouped-query attention when < heads; heads is a multiple of it). */
  kvHeads: number;
  /** Width of one head (heads * headDim need not equal hidden, e.g. Qwen3). */
  headDim: number;
  /** Feed-forward inner width. */
  intermediate: number;
  /** Longest context (tokens) the position encoding is meant for. */
  maxPositions: number;
  /** Normalization: RMSNorm (weight only) or LayerNorm (weight and bias), with its epsilon. */
  norm: { kind: 'rmsnorm' | 'layernorm'; eps: number };
  /** Feed-forward nonlinearity. */
  activation: Activation;
  /** True for the gated MLP down(act(gate(x)) * up(x)) (SwiGLU with silu); false for proj(act(fc(x))). */
  gatedMlp: boolean;
  /** Position encoding. */
  position: PositionEncoding;
  /** Biases on the q, k and v projections. */
  qkvBias: boolean;
  /** Bias on the attention output projection. */
  outputBias: boolean;
  /** Biases on the feed-forward projections. */
  mlpBias: boolean;
  /** Per-head RMSNorm of q and k before rotary (Qwen3), with the model's norm eps. */
  qkNorm: boolean;
  /** The output projection shares the token embedding matrix (no separate lm_head.weight). */
  tiedEmbeddings: boolean;
  /** Beginning-of-sequence token id, if the config names one. */
  bosId: number | null;
  /** End-of-sequence token ids (config.json may give one or a list; [] if none). */
  eosIds: number[];
  /** The dtype the checkpoint's weights are stored in ("bfloat16", "float32", ...), if the config says. */
  torchDtype: string | null;
  /**
   * Ids below this are the tokenizer's; the rows above (a padded embedding: Qwen2.5 has 151,936 rows for 151,665 ids)
   * get zero probability in sampling and in the log-probs losses use. Set when a tokenizer is paired with the model
   * (loadPretrained); absent: every row is decodable.
   */
  decodableIds?: number;
}

const dim = z.number().int().positive();
const tokenId = z.number().int().nonnegative();
const optionalId = tokenId.nullable().optional();
const eosField = z
  .union([tokenId, z.array(tokenId)])
  .nullable()
  .optional();
const RopeScalingSchema = z
  .looseObject({
    rope_type: z.string().optional(),
    type: z.string().optional(),
    rope_theta: z.number().positive().optional(),
    factor: z.number().positive().optional(),
    low_freq_factor: z.number().positive().optional(),
    high_freq_factor: z.number().positive().optional(),
    original_max_position_embeddings: dim.optional(),
  })
  .nullable()
  .optional();
const common = {
  architectures: z.array(z.string()).optional(),
  model_type: z.string().optional(),
  vocab_size: dim,
  bos_token_id: optionalId,
  eos_token_id: eosField,
  torch_dtype: z.string().nullable().optional(),
  dtype: z.string().nullable().optional(),
};

// Llama, Qwen2 and Qwen3 share one config layout; defaults differ per family (given at parse time).
const LlamaLikeSchema = z.looseObject({
  ...common,
  hidden_size: dim,
  intermediate_size: dim,
  num_hidden_layers: dim,
  num_attention_heads: dim,
  num_key_value_heads: dim.nullable().optional(),
  head_dim: dim.nullable().optional(),
  max_position_embeddings: dim.optional(),
  rms_norm_eps: z.number().positive().optional(),
  rope_theta: z.number().positive().optional(),
  rope_scaling: RopeScalingSchema,
  rope_parameters: RopeScalingSchema,
  hidden_act: z.enum(ACTIVATIONS).optional(),
  attention_bias: z.boolean().optional(),
  mlp_bias: z.boolean().optional(),
  tie_word_embeddings: z.boolean().optional(),
  use_sliding_window: z.boolean().optional(),
});

const Gpt2Schema = z.looseObject({
  ...common,
  n_embd: dim,
  n_layer: dim,
  n_head: dim,
  n_positions: dim.optional(),
  n_inner: dim.nullable().optional(),
  activation_function: z.enum(ACTIVATIONS).optional(),
  layer_norm_epsilon: z.number().positive().optional(),
  tie_word_embeddings: z.boolean().optional(),
  scale_attn_weights: z.boolean().optional(),
  scale_attn_by_inverse_layer_idx: z.boolean().optional(),
  add_cross_attention: z.boolean().optional(),
});

const ArchSchema = z.looseObject({ architectures: z.array(z.string()).optional(), model_type: z.string().optional() });
const MODEL_TYPES: Record<string, Family> = { llama: 'llama', qwen2: 'qwen2', qwen3: 'qwen3', gpt2: 'gpt2' };

/**
 * Upper bounds on config.json sizes, far above any model this CPU framework can run (the largest published models
 * stay under them), so that a hostile or corrupt config is refused before anything is built from it. Keys are
 * TransformerConfig fields; `fields` names them as each family's config.json does.
 */
export const CONFIG_LIMITS = {
  vocabSize: 4_194_304,
  hidden: 65_536,
  layers: 1024,
  heads: 1024,
  headDim: 4096,
  intermediate: 524_288,
  maxPositions: 4_194_304,
} as const;

/** The config.json field behind each bounded size, per layout. */
const FIELD_NAMES: Record<'llama' | 'gpt2', Record<keyof typeof CONFIG_LIMITS, string>> = {
  llama: {
    vocabSize: 'vocab_size',
    hidden: 'hidden_size',
    layers: 'num_hidden_layers',
    heads: 'num_attention_heads',
    headDim: 'head_dim',
    intermediate: 'intermediate_size',
    maxPositions: 'max_position_embeddings',
  },
  gpt2: {
    vocabSize: 'vocab_size',
    hidden: 'n_embd',
    layers: 'n_layer',
    heads: 'n_head',
    headDim: 'n_embd / n_head',
    intermediate: 'n_inner',
    maxPositions: 'n_positions',
  },
};

/** Throws naming the field when a size is past CONFIG_LIMITS or a bos/eos id is outside the vocabulary. */
function checkSizes(cfg: TransformerConfig, source: string): TransformerConfig {
  const names = FIELD_NAMES[cfg.family === 'gpt2' ? 'gpt2' : 'llama'];
  for (const [key, limit] of Object.entries(CONFIG_LIMITS) as [keyof typeof CONFIG_LIMITS, number][]) {
    if (cfg[key] > limit)
      throw new Error(
        `${source}: ${names[key]} is ${cfg[key]}, above the limit of ${limit}; the file is not a usable config`,
      );
  }
  for (const [field, id] of [
    ['bos_token_id', cfg.bosId],
    ...cfg.eosIds.map((e) => ['eos_token_id', e] as const),
  ] as const) {
    if (id !== null && id >= cfg.vocabSize)
      throw new Error(`${source}: ${field} ${id} is outside the vocabulary (vocab_size ${cfg.vocabSize})`);
  }
  return cfg;
}

/** Parses a config.json object (`source` names it in errors) into a TransformerConfig, sizes bounded (CONFIG_LIMITS). */
export function parseHfConfig(json: unknown, source: string = 'config.json'): TransformerConfig {
  const arch = parseWith(ArchSchema, json, source);
  const family = familyOf(arch, source);
  if (family === 'gpt2') return checkSizes(fromGpt2(parseWith(Gpt2Schema, json, source), source), source);
  return checkSizes(fromLlamaLike(family, parseWith(LlamaLikeSchema, json, source), source), source);
}

/** Reads `dir/config.json`. */
export async function readHfConfig(dir: string): Promise<TransformerConfig> {
  const path = join(dir, 'config.json');
  return parseHfConfig(await readJsonFile(path), path);
}

/** Writes `dir/config.json` atomically. */
export async function writeHfConfig(dir: string, cfg: TransformerConfig): Promise<void> {
  await writeJsonAtomic(join(dir, 'config.json'), toHfConfig(cfg));
}

function familyOf(arch: z.output<typeof ArchSchema>, source: string): Family {
  const supported = Object.values(ARCHITECTURES).join(', ');
  const names = arch.architectures ?? [];
  for (const name of names) {
    const f = (Object.keys(ARCHITECTURES) as Family[]).find((k) => ARCHITECTURES[k] === name);
    if (f) return f;
  }
  // A config without `architectures` (older exports) still loads in transformers through model_type.
  if (names.length === 0 && arch.model_type && arch.model_type in MODEL_TYPES) return MODEL_TYPES[arch.model_type]!;
  const got = names.length ? names.join(', ') : `model_type ${JSON.stringify(arch.model_type ?? null)}`;
  throw new Error(`${source}: unsupported architecture ${got}; supported: ${supported}`);
}

function eosList(v: number | number[] | null | undefined): number[] {
  return v === null || v === undefined ? [] : Array.isArray(v) ? [...v] : [v];
}

function fromLlamaLike(family: Family, c: z.output<typeof LlamaLikeSchema>, source: string): TransformerConfig {
  if (c.use_sliding_window)
    throw new Error(`${source}: sliding-window attention (use_sliding_window: true) is not supported`);
  const heads = c.num_attention_heads;
  const kvHeads = c.num_key_value_heads ?? heads;
  if (heads % kvHeads !== 0)
    throw new Error(`${source}: num_attention_heads ${heads} is not a multiple of num_key_value_heads ${kvHeads}`);
  // Qwen3Config defaults head_dim to 128; Llama and Qwen2 derive it from the width.
  const headDim = c.head_dim ?? (family === 'qwen3' ? 128 : c.hidden_size / heads);
  if (!Number.isInteger(headDim))
    throw new Error(`${source}: hidden_size ${c.hidden_size} is not divisible by ${heads} heads`);
  // Qwen2 always has q/k/v biases and none on o_proj; Llama and Qwen3 put attention_bias on all four.
  const attnBias = c.attention_bias ?? false;
  return {
    family,
    vocabSize: c.vocab_size,
    hidden: c.hidden_size,
    layers: c.num_hidden_layers,
    heads,
    kvHeads,
    headDim,
    intermediate: c.intermediate_size,
    maxPositions: c.max_position_embeddings ?? (family === 'llama' ? 2048 : 32768),
    norm: { kind: 'rmsnorm', eps: c.rms_norm_eps ?? 1e-6 },
    activation: c.hidden_act ?? 'silu',
    gatedMlp: true,
    position: { kind: 'rope', ...parseRope(c, source) },
    qkvBias: family === 'qwen2' ? true : attnBias,
    outputBias: family === 'qwen2' ? false : attnBias,
    mlpBias: family === 'llama' ? (c.mlp_bias ?? false) : false,
    qkNorm: family === 'qwen3',
    tiedEmbeddings: c.tie_word_embeddings ?? false,
    bosId: c.bos_token_id ?? null,
    eosIds: eosList(c.eos_token_id),
    torchDtype: c.dtype ?? c.torch_dtype ?? null,
  };
}

// transformers < 5 keeps rope_theta at top level and scaling in rope_scaling; 5.x moves both into rope_parameters.
function parseRope(c: z.output<typeof LlamaLikeSchema>, source: string): { theta: number; scaling: RopeScaling } {
  const s = c.rope_parameters ?? c.rope_scaling ?? null;
  const theta = c.rope_parameters?.rope_theta ?? c.rope_theta ?? 10000;
  const type = s?.rope_type ?? s?.type ?? 'default';
  const need = (v: number | undefined, field: string): number => {
    if (v === undefined) throw new Error(`${source}: rope scaling "${type}" needs ${field}`);
    return v;
  };
  if (type === 'default') return { theta, scaling: { type: 'none' } };
  if (type === 'linear') return { theta, scaling: { type: 'linear', factor: need(s?.factor, 'factor') } };
  if (type === 'llama3') {
    return {
      theta,
      scaling: {
        type: 'llama3',
        factor: need(s?.factor, 'factor'),
        lowFreqFactor: need(s?.low_freq_factor, 'low_freq_factor'),
        highFreqFactor: need(s?.high_freq_factor, 'high_freq_factor'),
        originalMaxPositions: need(s?.original_max_position_embeddings, 'original_max_position_embeddings'),
      },
    };
  }
  throw new Error(`${source}: unsupported rope scaling type "${type}" (supported: default, linear, llama3)`);
}

function fromGpt2(c: z.output<typeof Gpt2Schema>, source: string): TransformerConfig {
  // These switches change the attention math; transformers' defaults are what every released GPT-2 uses.
  if (c.scale_attn_weights === false || c.scale_attn_by_inverse_layer_idx || c.add_cross_attention) {
    throw new Error(
      `${source}: GPT-2 with scale_attn_weights=false, scale_attn_by_inverse_layer_idx or cross-attention is not supported`,
    );
  }
  if (c.n_embd % c.n_head !== 0)
    throw new Error(`${source}: n_embd ${c.n_embd} is not divisible by n_head ${c.n_head}`);
  return {
    family: 'gpt2',
    vocabSize: c.vocab_size,
    hidden: c.n_embd,
    layers: c.n_layer,
    heads: c.n_head,
    kvHeads: c.n_head,
    headDim: c.n_embd / c.n_head,
    intermediate: c.n_inner ?? 4 * c.n_embd,
    maxPositions: c.n_positions ?? 1024,
    norm: { kind: 'layernorm', eps: c.layer_norm_epsilon ?? 1e-5 },
    activation: c.activation_function ?? 'gelu_new',
    gatedMlp: false,
    position: { kind: 'learned' },
    qkvBias: true,
    outputBias: true,
    mlpBias: true,
    qkNorm: false,
    tiedEmbeddings: c.tie_word_embeddings ?? true,
    bosId: c.bos_token_id ?? null,
    eosIds: eosList(c.eos_token_id),
    torchDtype: c.dtype ?? c.torch_dtype ?? null,
  };
}

// The flags each family's HF code hard-wires; a TransformerConfig that differs cannot be expressed as its config.json.
const FIXED: Record<Family, Partial<Record<keyof TransformerConfig, unknown>>> = {
  llama: { gatedMlp: true, qkNorm: false },
  qwen2: { gatedMlp: true, qkNorm: false, qkvBias: true, outputBias: false, mlpBias: false },
  qwen3: { gatedMlp: true, qkNorm: true, mlpBias: false },
  gpt2: { gatedMlp: false, qkNorm: false, qkvBias: true, outputBias: true, mlpBias: true },
};

function checkExpressible(cfg: TransformerConfig): void {
  const fail = (why: string): never => {
    throw new Error(`cannot write a ${cfg.family} config.json: ${why}`);
  };
  for (const [k, v] of Object.entries(FIXED[cfg.family])) {
    if (cfg[k as keyof TransformerConfig] !== v) fail(`${ARCHITECTURES[cfg.family]} always has ${k} = ${String(v)}`);
  }
  const gpt2 = cfg.family === 'gpt2';
  if (cfg.norm.kind !== (gpt2 ? 'layernorm' : 'rmsnorm')) fail(`it uses ${gpt2 ? 'LayerNorm' : 'RMSNorm'}`);
  if (cfg.position.kind !== (gpt2 ? 'learned' : 'rope')) fail(`it uses ${gpt2 ? 'learned' : 'rotary'} positions`);
  if (gpt2 && (cfg.kvHeads !== cfg.heads || cfg.heads * cfg.headDim !== cfg.hidden))
    fail('GPT-2 has heads * headDim = hidden, no GQA');
  if ((cfg.family === 'llama' || cfg.family === 'qwen3') && cfg.qkvBias !== cfg.outputBias) {
    fail('attention_bias covers q, k, v and o together');
  }
}

/** The family's config.json for `cfg` (architectures, model_type and every field transformers needs to load it). */
export function toHfConfig(cfg: TransformerConfig): Record<string, unknown> {
  checkExpressible(cfg);
  const ids: Record<string, unknown> = { bos_token_id: cfg.bosId };
  if (cfg.eosIds.length > 0) ids['eos_token_id'] = cfg.eosIds.length === 1 ? cfg.eosIds[0] : [...cfg.eosIds];
  const head = { architectures: [ARCHITECTURES[cfg.family]], model_type: cfg.family };
  const tail = {
    ...ids,
    tie_word_embeddings: cfg.tiedEmbeddings,
    vocab_size: cfg.vocabSize,
    ...(cfg.torchDtype ? { torch_dtype: cfg.torchDtype } : {}),
  };
  if (cfg.family === 'gpt2') {
    return {
      ...head,
      activation_function: cfg.activation,
      layer_norm_epsilon: cfg.norm.eps,
      n_ctx: cfg.maxPositions,
      n_embd: cfg.hidden,
      n_head: cfg.heads,
      n_inner: cfg.intermediate === 4 * cfg.hidden ? null : cfg.intermediate,
      n_layer: cfg.layers,
      n_positions: cfg.maxPositions,
      ...tail,
    };
  }
  const rope = cfg.position;
  if (rope.kind !== 'rope') throw new Error('unreachable: checked above');
  return {
    ...head,
    ...(cfg.family === 'qwen2' ? {} : { attention_bias: cfg.qkvBias }),
    ...(cfg.family === 'llama' ? { mlp_bias: cfg.mlpBias } : {}),
    head_dim: cfg.headDim,
    hidden_act: cfg.activation,
    hidden_size: cfg.hidden,
    intermediate_size: cfg.intermediate,
    max_position_embeddings: cfg.maxPositions,
    num_attention_heads: cfg.heads,
    num_hidden_layers: cfg.layers,
    num_key_value_heads: cfg.kvHeads,
    rms_norm_eps: cfg.norm.eps,
    rope_scaling: ropeScalingJson(rope.scaling),
    rope_theta: rope.theta,
    ...(cfg.family === 'llama'
      ? {}
      : { use_sliding_window: false, sliding_window: null, max_window_layers: cfg.layers }),
    ...tail,
  };
}

function ropeScalingJson(s: RopeScaling): Record<string, unknown> | null {
  if (s.type === 'none') return null;
  if (s.type === 'linear') return { rope_type: 'linear', factor: s.factor };
  return {
    rope_type: 'llama3',
    factor: s.factor,
    low_freq_factor: s.lowFreqFactor,
    high_freq_factor: s.highFreqFactor,
    original_max_position_embeddings: s.originalMaxPositions,
  };
}
