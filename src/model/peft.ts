/**
 * LoRA adapters in PEFT's folder format, so that `PeftModel.from_pretrained(base, dir)` loads what we save and we load
 * what PEFT saves: adapter_config.json (peft_type LORA, r, lora_alpha, lora_dropout, target_modules, …) and
 * adapter_model.safetensors with tensors `base_model.model.<module>.lora_A.weight` [r, in] and `.lora_B.weight`
 * [out, r] (GPT-2's Conv1D modules too, with fan_in_fan_out true). Adapter folders come from anywhere: the config is
 * validated field by field and every tensor's name and shape is checked against the base before any is read.
 */
import { mkdir } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { z } from 'zod';
import { Tensor } from '../tensor/tensor.js';
import { writeJsonAtomic } from '../util/atomic-write.js';
import { pathExists, readJsonWith } from '../util/json-file.js';
import type { TransformerConfig } from './hf-config.js';
import {
  adaptedModules,
  ALL_LINEAR,
  frozen,
  LoraAdapters,
  loraParamNames,
  projectionName,
  type LoraSettings,
} from './lora.js';
import { SafetensorsReader, writeSafetensors } from './safetensors.js';
import { Transformer } from './transformer.js';

/** The adapter's config file. */
export const ADAPTER_CONFIG = 'adapter_config.json';
/** The adapter's weights file. */
export const ADAPTER_WEIGHTS = 'adapter_model.safetensors';
/** PEFT's prefix of every tensor name (LoraModel wraps the model as base_model.model). */
const PREFIX = 'base_model.model.';

const AdapterConfigSchema = z.looseObject({
  peft_type: z.literal('LORA', 'only LoRA adapters (peft_type "LORA") are supported'),
  task_type: z.string().nullish(),
  r: z.number().int().min(1, 'r must be at least 1'),
  lora_alpha: z.number().positive(),
  lora_dropout: z.number().min(0).lt(1).default(0),
  target_modules: z.union([z.array(z.string().min(1)).min(1), z.literal(ALL_LINEAR)], {
    error: `target_modules must be a list of module names or "${ALL_LINEAR}" (regular expressions are not supported)`,
  }),
  bias: z.literal('none', 'adapters with trained biases (bias other than "none") are not supported').default('none'),
  fan_in_fan_out: z.boolean().default(false),
  base_model_name_or_path: z.string().nullish(),
  use_rslora: z.literal(false, 'rank-stabilised LoRA (use_rslora) is not supported').default(false),
  use_dora: z.literal(false, 'DoRA (use_dora) is not supported').default(false),
  modules_to_save: z.null('modules_to_save is not supported: only adapter tensors are loaded').nullish(),
  layers_to_transform: z.null('layers_to_transform is not supported: adapt every block').nullish(),
  rank_pattern: z.record(z.string(), z.never('per-module ranks (rank_pattern) are not supported')).default({}),
  alpha_pattern: z.record(z.string(), z.never('per-module alphas (alpha_pattern) are not supported')).default({}),
});

/** True when `dir` holds a PEFT adapter (adapter_config.json) rather than a whole model. */
export async function isAdapterFolder(dir: string): Promise<boolean> {
  return pathExists(join(dir, ADAPTER_CONFIG));
}

/** A validated adapter folder's settings and base (resolved against `dir`'s working directory, as PEFT does). */
export async function readAdapterConfig(dir: string): Promise<{ settings: LoraSettings; base: string | null }> {
  const path = join(dir, ADAPTER_CONFIG);
  const c = await readJsonWith(path, AdapterConfigSchema);
  if (c.task_type !== undefined && c.task_type !== null && c.task_type !== 'CAUSAL_LM')
    throw new Error(`${path}: task_type "${c.task_type}" is not a causal language model's (CAUSAL_LM)`);
  const settings = { rank: c.r, alpha: c.lora_alpha, dropout: c.lora_dropout, targets: c.target_modules };
  return { settings, base: c.base_model_name_or_path ?? null };
}

/**
 * Writes adapter_config.json and adapter_model.safetensors (float32) of `adapters` into `dir` (created if missing).
 * target_modules lists projection names (`q_proj`, …), or full module names when the adapters cover some blocks only.
 */
export async function writeAdapterFiles(dir: string, adapters: LoraAdapters): Promise<void> {
  const s = adapters.settings;
  await mkdir(dir, { recursive: true });
  // Projection names when they pick exactly these modules, else the modules' full names (adapters read from a PEFT
  // folder that adapted some blocks only).
  const short = [...new Set(adapters.modules.map((m) => projectionName(m.module)))].sort();
  const same = adaptedModules(adapters.cfg, { ...s, targets: short }).length === adapters.modules.length;
  const targets = same ? short : adapters.modules.map((m) => m.module);
  // `dir` may be the fresh sibling folder of a save in progress (replaceDir): the same parent, so the same path.
  const metadata: Record<string, string> = { format: 'pt' };
  if (await isCheckpoint(adapters.base)) {
    metadata[BASE_HINT_KEY] = relative(resolve(dir), resolve(adapters.base));
    metadata[BASE_WRITTEN_KEY] = adapters.base;
  }
  await writeSafetensors(
    join(dir, ADAPTER_WEIGHTS),
    [...adapters.params].map(([name, t]) => [PREFIX + name, { shape: [...t.shape], data: t.data }] as const),
    { metadata },
  );
  await writeJsonAtomic(join(dir, ADAPTER_CONFIG), {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: adapters.base,
    r: s.rank,
    lora_alpha: s.alpha,
    lora_dropout: s.dropout,
    target_modules: targets,
    bias: 'none',
    fan_in_fan_out: adapters.cfg.family === 'gpt2',
    inference_mode: true,
    init_lora_weights: true,
    modules_to_save: null,
    layers_to_transform: null,
    rank_pattern: {},
    alpha_pattern: {},
    use_rslora: false,
    use_dora: false,
  });
}

/**
 * Reads the adapters of `dir` for a base model of config `cfg`: the tensor names must be exactly the adapted modules'
 * (by target_modules), with shapes [r, in] and [out, r], checked before any tensor is read; values must be finite.
 */
export async function readAdapterFiles(dir: string, cfg: TransformerConfig, base: string): Promise<LoraAdapters> {
  const { settings } = await readAdapterConfig(dir);
  const path = join(dir, ADAPTER_WEIGHTS);
  let modules;
  try {
    modules = adaptedModules(cfg, settings);
  } catch (e) {
    throw new Error(`${join(dir, ADAPTER_CONFIG)} does not fit the base model ${base}: ${(e as Error).message}`);
  }
  const expected = new Map<string, number[]>();
  for (const m of modules) {
    const n = loraParamNames(m.module);
    expected.set(n.a, [settings.rank, m.inF]).set(n.b, [m.outF, settings.rank]);
  }
  const reader = await SafetensorsReader.open(path);
  try {
    const names = new Set(reader.names());
    for (const [name, want] of expected) {
      const stored = PREFIX + name;
      if (!names.has(stored)) throw new Error(`${path}: missing tensor "${stored}" (shape [${want.join(', ')}])`);
      const shape = reader.info(stored).shape;
      if (shape.length !== 2 || shape[0] !== want[0] || shape[1] !== want[1])
        throw new Error(
          `${path}: tensor "${stored}" has shape [${shape.join(', ')}], r=${settings.rank} on this base needs ` +
            `[${want.join(', ')}]`,
        );
      names.delete(stored);
    }
    if (names.size > 0)
      throw new Error(
        `${path}: unexpected tensors ${[...names].slice(0, 3).join(', ')}${names.size > 3 ? ', …' : ''} (only ` +
          `lora_A/lora_B of target_modules ${JSON.stringify(settings.targets)} belong here)`,
      );
    const params = new Map<string, Tensor>();
    for (const [name, shape] of expected) {
      const { data } = await reader.readFloat32(PREFIX + name);
      if (!data.every(Number.isFinite)) throw new Error(`${path}: tensor "${PREFIX + name}" is not finite`);
      params.set(name, new Tensor(data, shape, true));
    }
    return new LoraAdapters(cfg, settings, params, base);
  } finally {
    await reader.close();
  }
}

/**
 * The key of adapter_model.safetensors' metadata that holds the base folder relative to the adapter folder. Kept out of
 * adapter_config.json, whose base_model_name_or_path stays what PEFT reads (a Hub id, or a path from PEFT's working
 * directory): older PEFT releases refuse a config with keys they do not know.
 */
export const BASE_HINT_KEY = 'hacrl_base_relative';
/** The metadata key holding base_model_name_or_path as written beside BASE_HINT_KEY (to tell whether it was edited). */
const BASE_WRITTEN_KEY = 'hacrl_base_written';

/**
 * The base folder recorded relative to adapter folder `dir` (BASE_HINT_KEY) and the base_model_name_or_path written
 * with it, or nulls when none is recorded.
 */
async function baseHint(dir: string): Promise<{ relative: string | null; written: string | null }> {
  const path = join(dir, ADAPTER_WEIGHTS);
  if (!(await pathExists(path))) return { relative: null, written: null };
  const reader = await SafetensorsReader.open(path);
  try {
    return { relative: reader.metadata[BASE_HINT_KEY] ?? null, written: reader.metadata[BASE_WRITTEN_KEY] ?? null };
  } finally {
    await reader.close();
  }
}

/** True when `dir` is a checkpoint folder (has config.json). */
const isCheckpoint = (dir: string): Promise<boolean> => pathExists(join(dir, 'config.json'));

/**
 * The base folder of adapter folder `dir`, as an absolute path: `override` (a --base flag) when given; else the folder
 * recorded relative to `dir` when it is a checkpoint there, tried first so that an adapter moved together with its
 * base keeps that base rather than one left at the old absolute path; else base_model_name_or_path as PEFT reads it
 * (absolute, or from the working directory), tried first instead when it is no longer what was written beside the
 * relative record (someone pointed the adapter at another base). Throws saying how to point elsewhere when none is a
 * checkpoint folder.
 */
export async function adapterBase(dir: string, override?: string): Promise<string> {
  if (override !== undefined) {
    if (!(await isCheckpoint(override)))
      throw new Error(`--base ${override} is not a checkpoint folder (no config.json)`);
    return resolve(override);
  }
  const { base } = await readAdapterConfig(dir);
  const hint = await baseHint(dir);
  const recorded = hint.relative === null ? [] : [resolve(dir, hint.relative)];
  const named = base ? [resolve(base)] : [];
  const tried = hint.written === (base ?? null) ? [...recorded, ...named] : [...named, ...recorded];
  for (const candidate of tried) if (await isCheckpoint(candidate)) return candidate;
  throw new Error(
    `${join(dir, ADAPTER_CONFIG)}: ` +
      (tried.length === 0
        ? 'names no base_model_name_or_path'
        : `its base ${tried.map((t) => `"${t}"`).join(' or ')} is not a checkpoint folder here (no config.json)`) +
      ': pass the base folder with --base DIR',
  );
}

/** `base` with `adapters` on it: the base's parameters frozen (shared, not copied). */
export function adapt(base: Transformer, adapters: LoraAdapters): Transformer {
  return new Transformer(base.cfg, frozen(base.params), adapters, base.precision);
}

/** The model without its adapters (a LoRA agent's KL reference): the same frozen parameters. */
export function withoutAdapters(model: Transformer): Transformer {
  return model.adapters ? new Transformer(model.cfg, model.params, null, model.precision) : model;
}

/** A plain model equal to `model` with its adapters merged into the weights (W + (alpha/rank)·B·A). */
export function mergeAdapters(model: Transformer): Transformer {
  if (!model.adapters) return model;
  return new Transformer(model.cfg, model.adapters.merged(model.params), null, model.precision);
}
