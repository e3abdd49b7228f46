// The Hugging Face parameter names and shapes of each family, as transformers' state_dict names them.
import type { TransformerConfig } from './hf-config.js';

/** One parameter of a checkpoint. */
export interface WeightEntry {
  /** The state_dict name, e.g. `model.layers.0.self_attn.q_proj.weight`. */
  name: string;
  /** The stored shape. */
  shape: number[];
  /**
   * True for GPT-2's Conv1D weights, stored [in, out] (y = x W + b); false for nn.Linear's [out, in] (y = x Wᵀ + b)
   * and for non-matrix parameters.
   */
  transposed: boolean;
  /** The block index, or null for parameters outside the blocks (embeddings, final norm, lm_head). */
  layer: number | null;
  /**
   * Other names the same parameter is found under in published checkpoints: openai-community/gpt2 was saved from
   * the bare GPT2Model, without the `transformer.` prefix, and transformers accepts both.
   */
  aliases: string[];
}

/**
 * Every parameter of the model in state_dict order, with its shape. `lm_head.weight` is listed only when the
 * embeddings are untied. Non-parameter buffers some old checkpoints carry (GPT-2's `attn.bias` causal mask,
 * `rotary_emb.inv_freq`) are not listed: loaders should ignore names they do not expect.
 */
export function hfWeightNames(cfg: TransformerConfig): WeightEntry[] {
  return cfg.family === 'gpt2' ? gpt2Names(cfg) : llamaNames(cfg);
}

/** The total number of parameters (elements) of the model. */
export function parameterCount(cfg: TransformerConfig): number {
  return hfWeightNames(cfg).reduce((n, w) => n + w.shape.reduce((a, b) => a * b, 1), 0);
}

/** Names of one block's parameters (Hugging Face naming, per family). */
export interface BlockNames {
  norm1: string;
  norm2: string;
  q?: string;
  k?: string;
  v?: string;
  qkv?: string;
  o: string;
  qNorm?: string;
  kNorm?: string;
  gate?: string;
  up: string;
  down: string;
}

/** The parameter names (without .weight/.bias) of block i. */
export function blockNames(cfg: TransformerConfig, i: number): BlockNames {
  if (cfg.family === 'gpt2') {
    const p = `transformer.h.${i}.`;
    return {
      norm1: `${p}ln_1`,
      norm2: `${p}ln_2`,
      qkv: `${p}attn.c_attn`,
      o: `${p}attn.c_proj`,
      up: `${p}mlp.c_fc`,
      down: `${p}mlp.c_proj`,
    };
  }
  const p = `model.layers.${i}.`;
  return {
    norm1: `${p}input_layernorm`,
    norm2: `${p}post_attention_layernorm`,
    q: `${p}self_attn.q_proj`,
    k: `${p}self_attn.k_proj`,
    v: `${p}self_attn.v_proj`,
    o: `${p}self_attn.o_proj`,
    ...(cfg.qkNorm ? { qNorm: `${p}self_attn.q_norm`, kNorm: `${p}self_attn.k_norm` } : {}),
    gate: `${p}mlp.gate_proj`,
    up: `${p}mlp.up_proj`,
    down: `${p}mlp.down_proj`,
  };
}

/** The embedding tables of `cfg` (token and learned positions), read by lookup (the token table also by a tied head). */
export function embeddingTables(cfg: TransformerConfig): Set<string> {
  const outer = outerNames(cfg);
  return new Set([outer.embed, outer.positions].flatMap((n) => (n === undefined ? [] : [n])));
}

/** The embedding tables no product reads (a tied head's table is multiplied): what copies for products leave out. */
export function lookupOnlyTables(cfg: TransformerConfig): Set<string> {
  const tables = embeddingTables(cfg);
  tables.delete(outerNames(cfg).head);
  return tables;
}

/** Names of the parameters outside the blocks. */
export function outerNames(cfg: TransformerConfig): {
  embed: string;
  positions?: string;
  finalNorm: string;
  head: string;
} {
  if (cfg.family === 'gpt2')
    return {
      embed: 'transformer.wte.weight',
      positions: 'transformer.wpe.weight',
      finalNorm: 'transformer.ln_f',
      head: cfg.tiedEmbeddings ? 'transformer.wte.weight' : 'lm_head.weight',
    };
  return {
    embed: 'model.embed_tokens.weight',
    finalNorm: 'model.norm',
    head: cfg.tiedEmbeddings ? 'model.embed_tokens.weight' : 'lm_head.weight',
  };
}

function entry(
  name: string,
  shape: number[],
  layer: number | null,
  transposed: boolean = false,
  aliases: string[] = [],
): WeightEntry {
  return { name, shape, transposed, layer, aliases };
}

function lmHead(cfg: TransformerConfig): WeightEntry[] {
  return cfg.tiedEmbeddings ? [] : [entry('lm_head.weight', [cfg.vocabSize, cfg.hidden], null)];
}

function llamaNames(cfg: TransformerConfig): WeightEntry[] {
  const { hidden: h, heads, kvHeads, headDim: d, intermediate: f } = cfg;
  const out = [entry('model.embed_tokens.weight', [cfg.vocabSize, h], null)];
  for (let l = 0; l < cfg.layers; l++) {
    const p = `model.layers.${l}.`;
    const linear = (name: string, outDim: number, inDim: number, bias: boolean): void => {
      out.push(entry(`${p}${name}.weight`, [outDim, inDim], l));
      if (bias) out.push(entry(`${p}${name}.bias`, [outDim], l));
    };
    out.push(entry(`${p}input_layernorm.weight`, [h], l));
    linear('self_attn.q_proj', heads * d, h, cfg.qkvBias);
    linear('self_attn.k_proj', kvHeads * d, h, cfg.qkvBias);
    linear('self_attn.v_proj', kvHeads * d, h, cfg.qkvBias);
    linear('self_attn.o_proj', h, heads * d, cfg.outputBias);
    if (cfg.qkNorm)
      out.push(entry(`${p}self_attn.q_norm.weight`, [d], l), entry(`${p}self_attn.k_norm.weight`, [d], l));
    out.push(entry(`${p}post_attention_layernorm.weight`, [h], l));
    linear('mlp.gate_proj', f, h, cfg.mlpBias);
    linear('mlp.up_proj', f, h, cfg.mlpBias);
    linear('mlp.down_proj', h, f, cfg.mlpBias);
  }
  out.push(entry('model.norm.weight', [h], null), ...lmHead(cfg));
  return out;
}

function gpt2Names(cfg: TransformerConfig): WeightEntry[] {
  const { hidden: h, intermediate: f } = cfg;
  const out: WeightEntry[] = [];
  const add = (name: string, shape: number[], layer: number | null, transposed: boolean = false): void => {
    out.push(entry(`transformer.${name}`, shape, layer, transposed, [name]));
  };
  const layerNorm = (name: string, layer: number | null): void => {
    add(`${name}.weight`, [h], layer);
    add(`${name}.bias`, [h], layer);
  };
  const conv1d = (name: string, inDim: number, outDim: number, layer: number): void => {
    add(`${name}.weight`, [inDim, outDim], layer, true);
    add(`${name}.bias`, [outDim], layer);
  };
  add('wte.weight', [cfg.vocabSize, h], null);
  add('wpe.weight', [cfg.maxPositions, h], null);
  for (let l = 0; l < cfg.layers; l++) {
    const p = `h.${l}.`;
    layerNorm(`${p}ln_1`, l);
    conv1d(`${p}attn.c_attn`, h, 3 * h, l);
    conv1d(`${p}attn.c_proj`, h, h, l);
    layerNorm(`${p}ln_2`, l);
    conv1d(`${p}mlp.c_fc`, h, f, l);
    conv1d(`${p}mlp.c_proj`, f, h, l);
  }
  layerNorm('ln_f', null);
  out.push(...lmHead(cfg));
  return out;
}
