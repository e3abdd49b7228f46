/**
 * A whole checkpoint folder as Hugging Face lays it out: config.json, weights, generation_config.json and the
 * tokenizer files. What an agent is saved as and loaded from.
 */
import { loadTokenizer } from '../tokenizer/load.js';
import { assertVocabCompatible, type Tokenizer } from '../tokenizer/tokenizer.js';
import { readGenerationConfig, writeGenerationConfig, type GenerationConfig } from './generation-config.js';
import { Transformer } from './transformer.js';
import { replaceDir } from '../util/replace-dir.js';
import { notWeightFile } from './checkpoint.js';
import { loadModel, writeModelFiles, type LoadOptions } from './weights.js';
import type { Precision } from '../tensor/bf16.js';
import { join } from 'node:path';
import { pathExists } from '../util/json-file.js';
import type { NamedPath } from '../util/output-paths.js';
import {
  adapt,
  ADAPTER_CONFIG,
  ADAPTER_WEIGHTS,
  adapterBase,
  isAdapterFolder,
  readAdapterFiles,
  writeAdapterFiles,
} from './peft.js';

/** A model with the files that make it usable on its own. */
export interface Pretrained {
  model: Transformer;
  tokenizer: Tokenizer;
  /** The folder's generation defaults, or null when it has no generation_config.json. */
  generation: GenerationConfig | null;
}

/** Throws naming the file and field when a special token id is outside the model's vocabulary. */
function checkSpecialIds(ids: [string, number | null | undefined][], vocabSize: number): void {
  for (const [what, id] of ids)
    if (id !== null && id !== undefined && !(Number.isInteger(id) && id >= 0 && id < vocabSize))
      throw new Error(`${what} ${id} is outside the model's vocabulary (ids 0..${vocabSize - 1})`);
}

/**
 * Frozen base models by folder and precision, loaded once and shared read-only by every LoRA agent on that base (a
 * loading in progress is shared too).
 */
export type BaseModels = Map<string, Promise<Pretrained>>;

/**
 * The base in `dir` at `precision` (default fp32; bf16 holds its matrices as bfloat16 bits) from `bases`, loading and
 * adding it when absent.
 */
export function sharedBase(dir: string, bases: BaseModels, precision: Precision = 'fp32'): Promise<Pretrained> {
  const key = `${precision}:${dir}`;
  let p = bases.get(key);
  if (!p) {
    p = loadPretrained(dir, new Map(), { precision, frozen: true });
    bases.set(key, p);
  }
  return p;
}

/** True when `dir` has tokenizer files of its own (an adapter folder may rely on its base's). */
export async function hasTokenizer(dir: string): Promise<boolean> {
  return (await pathExists(join(dir, 'tokenizer.json'))) || (await pathExists(join(dir, 'vocab.json')));
}

/** The folder whose tokenizer loadPretrained gives `dir` (its own, else an adapter folder's base's), or null if none. */
export async function tokenizerFolder(dir: string): Promise<string | null> {
  if (await hasTokenizer(dir)) return dir;
  return (await isAdapterFolder(dir)) ? tokenizerFolder(await adapterBase(dir)) : null;
}

/** The folders a load of `dir` reads: `dir`, then for an adapter folder its base's (`base` when given; and theirs). */
export async function modelFolders(dir: string, base?: string): Promise<string[]> {
  return (await isAdapterFolder(dir)) ? [dir, ...(await modelFolders(await adapterBase(dir, base)))] : [dir];
}

/** The help of every command's --base flag. */
export const BASE_HELP = 'base checkpoint folder of an adapter folder (default: the base the adapter records)';

/**
 * The folders a command reads when it loads `dir` (named by `flag`), each with the flag that named it (for
 * checkOutput's messages): `dir`, then an adapter folder's base, `base` (--base) when given.
 */
export async function readFolders(flag: string, dir: string, base?: string): Promise<NamedPath[]> {
  return (await modelFolders(dir, base)).map((path, i) => ({
    flag: i === 0 ? flag : i === 1 && base !== undefined ? '--base' : 'its base',
    path,
  }));
}

/** How loadPretrained loads: loadModel's options, and the base folder of an adapter folder. */
export interface PretrainedOptions extends LoadOptions {
  /** The base of an adapter folder, in place of the one it records (a --base flag). */
  base?: string;
}

/**
 * The model alone, as loadPretrained loads it (an adapter folder: its frozen base with the adapters on), for work on
 * token ids: no tokenizer or generation defaults are read, so a folder without them loads.
 */
export async function loadPretrainedModel(dir: string, options: PretrainedOptions = {}): Promise<Transformer> {
  if (!(await isAdapterFolder(dir))) return loadModel(dir, options);
  const baseDir = await adapterBase(dir, options.base);
  const base = await loadPretrainedModel(baseDir, { precision: options.precision, frozen: true });
  return adaptedBy(dir, base, baseDir);
}

/**
 * `base` with the adapters of folder `dir`, refused naming the weight and the adapter file when a merged weight is not
 * finite: every load of an adapter folder (serving, merging, exporting, resuming) goes through here.
 */
async function adaptedBy(dir: string, base: Transformer, baseDir: string): Promise<Transformer> {
  const adapters = await readAdapterFiles(dir, base.cfg, baseDir);
  adapters.checkMergedFinite(base.params, join(dir, ADAPTER_WEIGHTS));
  return adapt(base, adapters);
}

/**
 * Loads model, tokenizer and generation defaults; refuses a tokenizer whose ids do not fit the model's vocabulary,
 * and special token ids (the tokenizer's, generation_config.json's) outside it. A PEFT adapter folder
 * (adapter_config.json) loads as its base (base_model_name_or_path, taken from `bases` when given; frozen, at
 * `options.precision`) with the adapters on it; tokenizer and generation defaults come from the adapter folder where
 * it has them, else from the base. `options`: precision and storage of a whole model (loadModel), default fp32, and
 * an adapter folder's base in place of the one it records.
 */
export async function loadPretrained(
  dir: string,
  bases: BaseModels = new Map(),
  options: PretrainedOptions = {},
): Promise<Pretrained> {
  if (await isAdapterFolder(dir)) {
    const baseDir = await adapterBase(dir, options.base);
    return withAdapterFolder(dir, await sharedBase(baseDir, bases, options.precision), baseDir);
  }
  return checked(dir, {
    model: await loadModel(dir, options),
    tokenizer: await loadTokenizer(dir),
    generation: await readGenerationConfig(dir),
  });
}

/** `base` with the adapters of folder `dir`, and that folder's tokenizer and generation defaults where it has them. */
async function withAdapterFolder(dir: string, base: Pretrained, baseDir: string): Promise<Pretrained> {
  const model = await adaptedBy(dir, base.model, baseDir);
  const own = await hasTokenizer(dir);
  return checked(dir, {
    model,
    tokenizer: own ? await loadTokenizer(dir) : base.tokenizer,
    generation: own ? await readGenerationConfig(dir) : base.generation,
  });
}

/** `p`, once checkLoadable accepts its tokenizer and generation defaults for its model, limited to its tokenizer's ids. */
function checked(dir: string, p: Pretrained): Pretrained {
  checkLoadable(dir, p.model.cfg.vocabSize, p.tokenizer, p.generation);
  return { ...p, model: limitedToTokenizer(p.model, p.tokenizer.vocabSize) };
}

/**
 * Throws, naming `dir`, when the tokenizer's ids do not fit a vocabulary of `vocab` rows or a special token id (the
 * tokenizer's, generation_config.json's) lies outside it.
 */
export function checkLoadable(
  dir: string,
  vocab: number,
  tokenizer: Tokenizer,
  generation: GenerationConfig | null,
): void {
  try {
    assertVocabCompatible(tokenizer, vocab);
    checkSpecialIds(
      [
        ["the tokenizer's eos token id", tokenizer.eosId],
        ["the tokenizer's bos token id", tokenizer.bosId],
        ["the tokenizer's pad token id", tokenizer.padId],
        ...(generation?.eosIds ?? []).map((id) => ['generation_config.json eos_token_id', id] as [string, number]),
        ['generation_config.json bos_token_id', generation?.bosId],
        ['generation_config.json pad_token_id', generation?.padId],
      ],
      vocab,
    );
  } catch (e) {
    throw new Error(`${dir}: ${(e as Error).message}`);
  }
}

/**
 * `model` with the ids ≥ `decodable` (a padded embedding's rows past the tokenizer's ids) marked undecodable, so no
 * sampler draws them and the losses' log-probs leave them out; `model` itself when every row is decodable.
 */
function limitedToTokenizer(model: Transformer, decodable: number): Transformer {
  const limit = decodable < model.cfg.vocabSize ? decodable : undefined;
  if (model.cfg.decodableIds === limit) return model;
  return new Transformer({ ...model.cfg, decodableIds: limit }, model.params, model.adapters, model.precision);
}

/** False for the files a model save writes (weights or adapters): what a new save replaces. */
export const notModelFile = (name: string): boolean =>
  notWeightFile(name) && name !== ADAPTER_CONFIG && name !== ADAPTER_WEIGHTS;

/**
 * Writes a complete Hugging Face checkpoint folder, whole or not at all (like saveModel): config.json,
 * model.safetensors, tokenizer files and generation_config.json (eos from the tokenizer unless `generation` says
 * otherwise). A model with LoRA adapters is saved as a PEFT adapter folder naming its base (adapter_config.json,
 * adapter_model.safetensors) with the tokenizer and generation files.
 */
export async function savePretrained(
  dir: string,
  p: Pretrained,
  options: { maxShardBytes?: number } = {},
): Promise<void> {
  assertVocabCompatible(p.tokenizer, p.model.cfg.vocabSize);
  const generation = p.generation ?? {
    eosIds: [p.tokenizer.eosId],
    bosId: p.tokenizer.bosId,
    padId: p.tokenizer.padId,
  };
  await replaceDir(
    dir,
    async (tmp) => {
      if (p.model.adapters) await writeAdapterFiles(tmp, p.model.adapters);
      else await writeModelFiles(tmp, p.model, options);
      await p.tokenizer.save(tmp);
      await writeGenerationConfig(tmp, generation);
    },
    notModelFile,
  );
}
