/**
 * A checkpoint folder as one GGUF file for llama.cpp (and the tools built on it): the weights under llama.cpp's
 * tensor names, the architecture's hyperparameters, and the tokenizer as llama.cpp's "gpt2" (byte-level BPE) model
 * with its merges, special-token ids and chat template, following what llama.cpp's convert_hf_to_gguf.py writes
 * for the same families.
 */
import { byteLevelString } from '../tokenizer/byte-level.js';
import { HfTokenizer } from '../tokenizer/hf-tokenizer.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import type { TransformerConfig } from '../model/hf-config.js';
import { mergeAdapters } from '../model/peft.js';
import { CheckpointReader } from '../model/checkpoint.js';
import { loadPretrained, modelFolders, type Pretrained } from '../model/pretrained.js';
import { ropeInvFreq } from '../model/rope.js';
import { writeGguf, type GgufTensor, type GgufTensorType, type GgufValue } from './gguf-file.js';

/** What exportGguf wrote. */
export interface GgufExportSummary {
  /** llama.cpp's architecture name: llama, qwen2, qwen3 or gpt2. */
  architecture: string;
  tensors: number;
  /** Tokens in the vocabulary written (the model's rows: tokenizer ids, then unused padding). */
  vocabulary: number;
  /** The storage type of the matrices. */
  type: GgufTensorType;
}

/**
 * The checkpoint folder's own storage type: bf16 when every matrix of its weight files is BF16 (an adapter folder:
 * its base's — `base` when given —, as PEFT's merge keeps the base's dtype), f32 otherwise.
 */
export async function checkpointTensorType(dir: string, base?: string): Promise<GgufTensorType> {
  const folders = await modelFolders(dir, base);
  const reader = await CheckpointReader.open(folders[folders.length - 1]!);
  try {
    const matrices = reader.names().filter((n) => reader.info(n).shape.length === 2);
    return matrices.length > 0 && matrices.every((n) => reader.info(n).dtype === 'BF16') ? 'bf16' : 'f32';
  } finally {
    await reader.close();
  }
}

/**
 * Writes the checkpoint folder `dir` to `out` as GGUF, matrices stored as `type` (default the checkpoint's own,
 * checkpointTensorType; norms, biases stay f32); an adapter folder's base is `base` when given, else the one it
 * records.
 */
export async function exportGguf(
  dir: string,
  out: string,
  type?: GgufTensorType,
  base?: string,
): Promise<GgufExportSummary> {
  const loaded = await loadPretrained(dir, new Map(), { base });
  const stored = type ?? (await checkpointTensorType(dir, base));
  // An adapter folder exports as its merged model.
  const agent = { ...loaded, model: mergeAdapters(loaded.model) };
  try {
    return await writeAgentGguf(agent, out, stored, dir.replace(/\/+$/, '').split('/').pop() ?? 'hacrl');
  } catch (e) {
    throw new Error(`export gguf ${dir}: ${(e as Error).message}`);
  }
}

/** Writes a loaded agent to `out` as GGUF under the model name `name` (see exportGguf). */
export async function writeAgentGguf(
  agent: Pretrained,
  out: string,
  type: GgufTensorType,
  name: string,
): Promise<GgufExportSummary> {
  const metadata = [...modelMetadata(agent, name, type), ...tokenizerMetadata(agent.tokenizer, agent.model.cfg)];
  const tensors = modelTensors(agent, type);
  await writeGguf(out, metadata, tensors);
  return { architecture: agent.model.cfg.family, tensors: tensors.length, vocabulary: agent.model.cfg.vocabSize, type };
}

const u32 = (value: number): GgufValue => ({ type: 'u32', value });
const f32 = (value: number): GgufValue => ({ type: 'f32', value });
const str = (value: string): GgufValue => ({ type: 'string', value });

/** llama.cpp's general.file_type of a file whose matrices are stored as `type`. */
const FILE_TYPE: Record<GgufTensorType, number> = { f32: 0, f16: 1, bf16: 32 };

/** Refuses what llama.cpp's loader for the family would not read, naming the setting. */
function checkSupported(cfg: TransformerConfig): void {
  const refuse = (what: string): never => {
    throw new Error(`llama.cpp's ${cfg.family} architecture has no ${what}; this checkpoint cannot be exported`);
  };
  if (cfg.family === 'qwen2' && (cfg.outputBias || cfg.mlpBias)) refuse('output-projection or MLP biases');
  if (cfg.family === 'qwen2' && !cfg.qkvBias) refuse('Qwen2 attention without q/k/v biases');
  if (cfg.family === 'qwen3' && (cfg.qkvBias || cfg.outputBias || cfg.mlpBias)) refuse('biases');
  if (cfg.position.kind === 'rope' && cfg.position.scaling.type === 'llama3' && cfg.family !== 'llama')
    refuse('llama3 rope scaling');
  if (cfg.family !== 'gpt2' && (!cfg.gatedMlp || cfg.activation !== 'silu' || cfg.norm.kind !== 'rmsnorm'))
    refuse(`MLP ${cfg.activation}${cfg.gatedMlp ? ' gated' : ''} with ${cfg.norm.kind}`);
}

function modelMetadata(agent: Pretrained, name: string, type: GgufTensorType): [string, GgufValue][] {
  const cfg = agent.model.cfg;
  checkSupported(cfg);
  const arch = cfg.family;
  const meta: [string, GgufValue][] = [
    ['general.architecture', str(arch)],
    ['general.name', str(name)],
    ['general.file_type', u32(FILE_TYPE[type])],
    [`${arch}.context_length`, u32(cfg.maxPositions)],
    [`${arch}.embedding_length`, u32(cfg.hidden)],
    [`${arch}.block_count`, u32(cfg.layers)],
    [`${arch}.feed_forward_length`, u32(cfg.intermediate)],
    [`${arch}.attention.head_count`, u32(cfg.heads)],
    [`${arch}.attention.head_count_kv`, u32(cfg.kvHeads)],
    [`${arch}.attention.key_length`, u32(cfg.headDim)],
    [`${arch}.attention.value_length`, u32(cfg.headDim)],
    [`${arch}.vocab_size`, u32(cfg.vocabSize)],
  ];
  if (cfg.norm.kind === 'layernorm') meta.push([`${arch}.attention.layer_norm_epsilon`, f32(cfg.norm.eps)]);
  else meta.push([`${arch}.attention.layer_norm_rms_epsilon`, f32(cfg.norm.eps)]);
  if (cfg.position.kind === 'rope') {
    meta.push([`${arch}.rope.freq_base`, f32(cfg.position.theta)], [`${arch}.rope.dimension_count`, u32(cfg.headDim)]);
    if (cfg.position.scaling.type === 'linear')
      meta.push(
        [`${arch}.rope.scaling.type`, str('linear')],
        [`${arch}.rope.scaling.factor`, f32(cfg.position.scaling.factor)],
      );
  }
  return meta;
}

/** Rows of a [heads·d, …] projection reordered from transformers' rotate-half pairs to llama.cpp's adjacent pairs. */
function permuteRope(data: Float32Array, heads: number, headDim: number): Float32Array {
  const cols = data.length / (heads * headDim);
  const out = new Float32Array(data.length);
  const half = headDim / 2;
  for (let h = 0; h < heads; h++)
    for (let i = 0; i < half; i++)
      for (let j = 0; j < 2; j++) {
        const from = (h * headDim + j * half + i) * cols;
        out.set(data.subarray(from, from + cols), (h * headDim + 2 * i + j) * cols);
      }
  return out;
}

function modelTensors(agent: Pretrained, type: GgufTensorType): GgufTensor[] {
  const { model } = agent;
  const cfg = model.cfg;
  const out: GgufTensor[] = [];
  // Matrices take the chosen type; 1-D tensors (norms, biases) stay f32, as llama.cpp's converter keeps them.
  const add = (name: string, hfName: string, transform?: (d: Float32Array) => Float32Array): void => {
    const t = model.p(hfName);
    const data = transform ? transform(t.data) : t.data;
    out.push({ name, dims: [...t.shape].reverse(), type: t.shape.length > 1 ? type : 'f32', data });
  };
  const has = (hfName: string): boolean => model.params.has(hfName);
  if (cfg.family === 'gpt2') {
    add('token_embd.weight', 'transformer.wte.weight');
    add('position_embd.weight', 'transformer.wpe.weight');
    for (let l = 0; l < cfg.layers; l++) {
      const p = `transformer.h.${l}.`;
      for (const [gg, hf] of [
        ['attn_norm', 'ln_1'],
        ['attn_qkv', 'attn.c_attn'],
        ['attn_output', 'attn.c_proj'],
        ['ffn_norm', 'ln_2'],
        ['ffn_up', 'mlp.c_fc'],
        ['ffn_down', 'mlp.c_proj'],
      ])
        for (const part of ['weight', 'bias']) add(`blk.${l}.${gg}.${part}`, `${p}${hf}.${part}`);
    }
    add('output_norm.weight', 'transformer.ln_f.weight');
    add('output_norm.bias', 'transformer.ln_f.bias');
  } else {
    // llama.cpp rotates Llama's q/k in adjacent pairs (convert_hf_to_gguf.py permutes them); Qwen's in halves.
    const rope = (heads: number) =>
      cfg.family === 'llama' ? (d: Float32Array) => permuteRope(d, heads, cfg.headDim) : undefined;
    add('token_embd.weight', 'model.embed_tokens.weight');
    for (let l = 0; l < cfg.layers; l++) {
      const p = `model.layers.${l}.`;
      const linear = (gg: string, hf: string, transform?: (d: Float32Array) => Float32Array): void => {
        add(`blk.${l}.${gg}.weight`, `${p}${hf}.weight`, transform);
        if (has(`${p}${hf}.bias`)) add(`blk.${l}.${gg}.bias`, `${p}${hf}.bias`, transform);
      };
      add(`blk.${l}.attn_norm.weight`, `${p}input_layernorm.weight`);
      linear('attn_q', 'self_attn.q_proj', rope(cfg.heads));
      linear('attn_k', 'self_attn.k_proj', rope(cfg.kvHeads));
      linear('attn_v', 'self_attn.v_proj');
      linear('attn_output', 'self_attn.o_proj');
      if (cfg.qkNorm) {
        add(`blk.${l}.attn_q_norm.weight`, `${p}self_attn.q_norm.weight`);
        add(`blk.${l}.attn_k_norm.weight`, `${p}self_attn.k_norm.weight`);
      }
      add(`blk.${l}.ffn_norm.weight`, `${p}post_attention_layernorm.weight`);
      linear('ffn_gate', 'mlp.gate_proj');
      linear('ffn_up', 'mlp.up_proj');
      linear('ffn_down', 'mlp.down_proj');
    }
    add('output_norm.weight', 'model.norm.weight');
    if (cfg.position.kind === 'rope' && cfg.position.scaling.type === 'llama3') {
      // llama.cpp applies llama3 scaling as per-frequency divisors of the base frequencies.
      const scaled = ropeInvFreq(cfg);
      const base = ropeInvFreq({ ...cfg, position: { ...cfg.position, scaling: { type: 'none' } } });
      const data = Float32Array.from(base, (f, i) => f / scaled[i]!);
      out.push({ name: 'rope_freqs.weight', dims: [data.length], type: 'f32', data });
    }
  }
  if (!cfg.tiedEmbeddings) add('output.weight', 'lm_head.weight');
  return out;
}

// llama.cpp names the pre-tokenizer (the regex that splits text before BPE) instead of storing it; these are the
// splits of tokenizer.json files it recognises, by the name it gives them.
const KNOWN_SPLITS: Record<string, string> = {
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+":
    'qwen2',
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+":
    'llama-bpe',
};

/** llama.cpp's token types. */
const NORMAL = 1;
const CONTROL = 3;
const USER_DEFINED = 4;
const UNUSED = 5;

/**
 * The tokenizer as llama.cpp's byte-level BPE ("gpt2") model. Byte-level BPE tokenizer.json files (GPT-2's split, or
 * Qwen2's or Llama 3's) are written as they are; hacrl's character tokenizers (BPE without merges or pre-tokenizer)
 * become a merge-free byte-level vocabulary, which encodes the same as long as every character is one byte (ASCII).
 */
function tokenizerMetadata(tok: Tokenizer, cfg: TransformerConfig): [string, GgufValue][] {
  if (!(tok instanceof HfTokenizer)) throw new Error('the tokenizer must be loaded from tokenizer.json');
  const json = tok.json;
  const model = json.model as { type?: string; vocab: Record<string, number>; merges?: unknown[] };
  if (model.type !== 'BPE') throw new Error(`tokenizer.json has a ${model.type} model; only BPE exports to GGUF`);
  const merges = (model.merges ?? []).map((m) => (Array.isArray(m) ? m.join(' ') : String(m)));
  const pre = json.pre_tokenizer as { type?: string; pretokenizers?: { type: string; pattern?: { Regex?: string } }[] };
  let preName: string;
  let spell = (t: string): string => t;
  if (pre?.type === 'ByteLevel') preName = 'gpt-2';
  else if (pre?.type === 'Sequence') {
    const regex = pre.pretokenizers?.find((p) => p.type === 'Split')?.pattern?.Regex;
    const name = regex === undefined ? undefined : KNOWN_SPLITS[regex];
    if (!name)
      throw new Error(`the tokenizer's pre-tokenizer split ${JSON.stringify(regex)} is not one llama.cpp knows`);
    preName = name;
  } else if (pre === null && merges.length === 0) {
    preName = 'gpt-2';
    spell = (t) => {
      const bytes = Buffer.from(t, 'utf8');
      if (bytes.length !== 1)
        throw new Error(
          `the character tokenizer's token ${JSON.stringify(t)} is not one byte; llama.cpp's byte-level model ` +
            'can only hold single-byte (ASCII) characters without merges',
        );
      return byteLevelString(bytes);
    };
  } else throw new Error(`the tokenizer's pre-tokenizer ${JSON.stringify(pre?.type)} does not export to GGUF`);
  const tokens = new Array<string | undefined>(cfg.vocabSize);
  const types = new Array<number>(cfg.vocabSize).fill(UNUSED);
  const added = new Set(json.added_tokens.map((t) => t.id));
  for (const [text, id] of Object.entries(model.vocab)) {
    if (id >= cfg.vocabSize) throw new Error(`token id ${id} is outside the model's ${cfg.vocabSize} rows`);
    if (added.has(id)) continue;
    tokens[id] = spell(text);
    types[id] = NORMAL;
  }
  for (const t of json.added_tokens) {
    tokens[t.id] = t.content;
    types[t.id] = t.special ? CONTROL : USER_DEFINED;
  }
  // Rows past the tokenizer's ids get placeholder tokens, as convert_hf_to_gguf.py writes them.
  for (let i = 0; i < tokens.length; i++) tokens[i] ??= `[PAD${i}]`;
  const meta: [string, GgufValue][] = [
    ['tokenizer.ggml.model', str('gpt2')],
    ['tokenizer.ggml.pre', str(preName)],
    ['tokenizer.ggml.tokens', { type: 'string[]', value: tokens as string[] }],
    ['tokenizer.ggml.token_type', { type: 'i32[]', value: types }],
    ['tokenizer.ggml.merges', { type: 'string[]', value: merges }],
    ['tokenizer.ggml.eos_token_id', u32(tok.eosId)],
    // hacrl encodes prompts without the tokenizer's own special tokens; llama.cpp should do the same.
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: false }],
  ];
  if (tok.bosId !== undefined) meta.push(['tokenizer.ggml.bos_token_id', u32(tok.bosId)]);
  if (tok.padId !== undefined) meta.push(['tokenizer.ggml.padding_token_id', u32(tok.padId)]);
  if (tok.chatTemplate !== null) meta.push(['tokenizer.chat_template', str(tok.chatTemplate)]);
  return meta;
}
