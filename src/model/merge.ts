/**
 * `hacrl lora merge`: a PEFT adapter folder merged into its base as PEFT's merge_and_unload saves it. The base's
 * weight files are streamed one tensor at a time (adapted weights get W + (alpha/rank)·B·A, the rest are copied as
 * stored), so memory stays near the largest tensor rather than the whole model widened to float32; every tensor keeps
 * the base's dtype unless one is asked for; config.json and generation_config.json are the base's as they were.
 */
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeJsonAtomic } from '../util/atomic-write.js';
import { pathExists, readJsonFile } from '../util/json-file.js';
import { replaceDir } from '../util/replace-dir.js';
import { loadTokenizer } from '../tokenizer/load.js';
import { CheckpointReader, INDEX_FILE, SINGLE_FILE } from './checkpoint.js';
import { checkFinite } from './finite.js';
import { readHfConfig, type TransformerConfig } from './hf-config.js';
import { readGenerationConfig, writeGenerationConfig } from './generation-config.js';
import type { LoraAdapters } from './lora.js';
import { ADAPTER_WEIGHTS, adapterBase, readAdapterFiles } from './peft.js';
import { checkLoadable, hasTokenizer, notModelFile } from './pretrained.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import {
  decodeTensorBytes,
  DTYPE_BYTES,
  encodeFloats,
  numel,
  writeSafetensorsStreaming,
  type Dtype,
  type TensorEntry,
} from './safetensors.js';
import { hfWeightNames } from './weight-names.js';
import { storedNames } from './weights.js';

/** The float dtypes a merge may write (safetensors' names). */
export const MERGE_DTYPES = { f32: 'F32', bf16: 'BF16', f16: 'F16' } as const;
/** A merge's output dtype by its flag name. */
export type MergeDtype = keyof typeof MERGE_DTYPES;
const TORCH_DTYPE: Record<(typeof MERGE_DTYPES)[MergeDtype], string> = {
  F32: 'float32',
  BF16: 'bfloat16',
  F16: 'float16',
};
const FLOATS: ReadonlySet<Dtype> = new Set(['F64', 'F32', 'F16', 'BF16']);

/** What a merge wrote. */
export interface MergeSummary {
  /** The base folder merged into. */
  base: string;
  family: TransformerConfig['family'];
  /** Tensors written, and how many of them had adapters merged in. */
  tensors: number;
  merged: number;
  /** The stored dtypes of the written tensors. */
  dtypes: Dtype[];
}

/**
 * Merges the PEFT adapter folder `adapterDir` into its base (`options.base`, default the folder adapterBase finds) and
 * writes `outDir`, whole or not at all: the base's weight files (the same single file or shards) with the adapted
 * weights merged, each tensor in its stored dtype or `options.dtype`; the base's config.json and generation_config.json
 * copied (config.json's dtype key set when `options.dtype` changes it, generation_config.json's keys overlaid by the
 * adapter folder's where the adapter folder has its own tokenizer, as loading it would); the adapter folder's
 * tokenizer where it has one, else the base's. A merged weight that is not finite is refused naming it.
 */
export async function mergeAdapterFolder(
  adapterDir: string,
  outDir: string,
  options: { base?: string; dtype?: MergeDtype } = {},
): Promise<MergeSummary> {
  const base = await adapterBase(adapterDir, options.base);
  const cfg = await readHfConfig(base);
  const adapters = await readAdapterFiles(adapterDir, cfg, base);
  const own = await hasTokenizer(adapterDir);
  const tokenizer = await loadTokenizer(own ? adapterDir : base);
  checkLoadable(adapterDir, cfg.vocabSize, tokenizer, await readGenerationConfig(own ? adapterDir : base));
  const dtype = options.dtype === undefined ? undefined : MERGE_DTYPES[options.dtype];
  const reader = await CheckpointReader.open(base);
  try {
    let summary: MergeSummary | undefined;
    await replaceDir(
      outDir,
      async (tmp) => {
        const written = await writeMergedWeights(tmp, reader, cfg, adapters, adapterDir, dtype);
        summary = { base, family: cfg.family, ...written };
        await writeConfig(base, tmp, dtype);
        await tokenizer.save(tmp);
        await writeGeneration(base, own ? adapterDir : null, tmp, tokenizer);
      },
      notModelFile,
    );
    return summary!;
  } finally {
    await reader.close();
  }
}

/** Writes the merged weights into `dir`, file by file as the base lays them out, one tensor in memory at a time. */
async function writeMergedWeights(
  dir: string,
  reader: CheckpointReader,
  cfg: TransformerConfig,
  adapters: LoraAdapters,
  adapterDir: string,
  dtype: Dtype | undefined,
): Promise<Omit<MergeSummary, 'base' | 'family'>> {
  // Checkpoint tensor name → the adapted module whose update it gets, and whether it is stored [in, out].
  const adapted = new Map<string, { module: string; name: string; transposed: boolean }>();
  const modules = new Set(adapters.modules.map((m) => m.module));
  const stored = storedNames(cfg, reader);
  for (const [i, w] of hfWeightNames(cfg).entries()) {
    const module = w.name.slice(0, -'.weight'.length);
    if (w.name.endsWith('.weight') && modules.has(module))
      adapted.set(stored[i]!, { module, name: w.name, transposed: w.transposed });
  }
  const files = new Map<string, TensorEntry[]>();
  for (const name of reader.names()) {
    const info = reader.info(name);
    const entry = { name, shape: info.shape, dtype: dtype && FLOATS.has(info.dtype) ? dtype : info.dtype };
    const file = reader.fileOf(name);
    if (!files.has(file)) files.set(file, []);
    files.get(file)!.push(entry);
  }
  const merged = `${join(adapterDir, ADAPTER_WEIGHTS)} (merged with its base)`;
  const bytes = async (e: TensorEntry): Promise<Uint8Array> => {
    const stored = reader.info(e.name).dtype;
    const raw = await reader.bytes(e.name);
    const a = adapted.get(e.name);
    if (!a && e.dtype === stored) {
      if (stored === 'BF16' || stored === 'F16')
        checkFinite(e.name, new Uint16Array(raw.buffer, raw.byteOffset, raw.byteLength / 2), reader.dir, f16(stored));
      else if (stored === 'F32') checkFinite(e.name, decodeTensorBytes(stored, raw) as Float32Array, reader.dir);
      return raw;
    }
    const values = decodeTensorBytes(stored, raw) as Float32Array;
    if (a) adapters.addToWeight(a.module, values, a.transposed);
    const name = a?.name ?? e.name;
    checkFinite(name, values, a ? merged : reader.dir);
    const out = encodeFloats(values, e.dtype as (typeof MERGE_DTYPES)[MergeDtype]);
    // Rounding to a narrower float can overflow what was finite.
    if (e.dtype !== 'F32')
      checkFinite(name, new Uint16Array(out.buffer), `${a ? merged : reader.dir} as ${e.dtype}`, f16(e.dtype));
    return out;
  };
  for (const [file, entries] of files)
    await writeSafetensorsStreaming(join(dir, file), entries, bytes, { format: 'pt' });
  const all = [...files.values()].flat();
  if (!files.has(SINGLE_FILE)) {
    const weightMap = Object.fromEntries(
      [...files]
        .flatMap(([file, entries]) => entries.map((e) => [e.name, file] as const))
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    );
    const total = all.reduce((s, e) => s + numel(e.shape) * DTYPE_BYTES[e.dtype], 0);
    await writeJsonAtomic(join(dir, INDEX_FILE), { metadata: { total_size: total }, weight_map: weightMap });
  }
  return { tensors: all.length, merged: adapted.size, dtypes: [...new Set(all.map((e) => e.dtype))] };
}

/** checkFinite's name for the half type of `dtype`. */
const f16 = (dtype: Dtype): 'f16' | 'bf16' => (dtype === 'F16' ? 'f16' : 'bf16');

/** The base's config.json as it was, or with its dtype key (dtype or torch_dtype) set to a `dtype` asked for. */
async function writeConfig(base: string, dir: string, dtype: Dtype | undefined): Promise<void> {
  if (dtype === undefined) return copyFile(join(base, 'config.json'), join(dir, 'config.json'));
  const config = (await readJsonFile(join(base, 'config.json'))) as Record<string, unknown>;
  const name = TORCH_DTYPE[dtype as keyof typeof TORCH_DTYPE];
  const keys = ['dtype', 'torch_dtype'].filter((k) => k in config);
  for (const k of keys.length > 0 ? keys : ['torch_dtype']) config[k] = name;
  await writeJsonAtomic(join(dir, 'config.json'), config);
}

/**
 * generation_config.json: the base's as it was, with the keys of `adapterDir`'s own laid over it when given (every key
 * of the base kept: an adapter saved here writes only the keys it reads); without either, the tokenizer's ids.
 */
async function writeGeneration(
  base: string,
  adapterDir: string | null,
  dir: string,
  tokenizer: Tokenizer,
): Promise<void> {
  const file = 'generation_config.json';
  const own = adapterDir !== null && (await pathExists(join(adapterDir, file)));
  const inBase = await pathExists(join(base, file));
  if (inBase && !own) return copyFile(join(base, file), join(dir, file));
  if (own) {
    const over = (await readJsonFile(join(adapterDir, file))) as Record<string, unknown>;
    const under = inBase ? ((await readJsonFile(join(base, file))) as Record<string, unknown>) : {};
    return writeJsonAtomic(join(dir, file), { ...under, ...over });
  }
  await writeGenerationConfig(dir, { eosIds: [tokenizer.eosId], bosId: tokenizer.bosId, padId: tokenizer.padId });
}
