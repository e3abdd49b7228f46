/**
 * Moving a Transformer's parameters to and from a Hugging Face checkpoint folder (config.json, model.safetensors or
 * shards, generation_config.json), and fresh random initialisation for agents trained here from scratch.
 */
import { CheckpointReader, INDEX_FILE, notWeightFile, SINGLE_FILE, writeCheckpoint } from './checkpoint.js';
import { join } from 'node:path';
import { pathExists } from '../util/json-file.js';
import { checkFinite } from './finite.js';
import { readHfConfig, writeHfConfig, type TransformerConfig } from './hf-config.js';
import type { Precision } from '../tensor/bf16.js';
import { Tensor } from '../tensor/tensor.js';
import { replaceDir } from '../util/replace-dir.js';
import { Rng } from '../util/rng.js';
import { Transformer } from './transformer.js';
import { embeddingTables, hfWeightNames } from './weight-names.js';
import { f32ToBf16 } from '../tensor/half.js';

/** [rows, cols] → [cols, rows]. */
function transpose<T extends Float32Array | Uint16Array>(data: T, rows: number, cols: number): T {
  const out = (data instanceof Float32Array ? new Float32Array(data.length) : new Uint16Array(data.length)) as T;
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = data[r * cols + c]!;
  return out;
}

/**
 * Builds the model from checkpoint tensors (as read from safetensors: float32, or bfloat16 bits kept as they are for a
 * frozen bf16 model): names are matched with their published aliases, GPT-2's Conv1D weights are transposed to
 * [out, in], and non-parameter buffers are ignored. A missing or mis-shaped tensor raises an error naming it.
 * `precision`: of the model's products (tensor/bf16.ts), default fp32; bfloat16 bits need bf16.
 */
export function modelFromTensors(
  cfg: TransformerConfig,
  tensors: ReadonlyMap<string, { readonly shape: readonly number[]; readonly data: unknown }>,
  source = 'checkpoint',
  precision: Precision = 'fp32',
): Transformer {
  const params = new Map<string, Tensor>();
  for (const w of hfWeightNames(cfg)) {
    const found = [w.name, ...w.aliases].map((n) => tensors.get(n)).find((t) => t !== undefined);
    if (!found) throw new Error(`${source}: missing tensor "${w.name}" (shape [${w.shape.join(', ')}])`);
    if (found.shape.length !== w.shape.length || found.shape.some((s, i) => s !== w.shape[i]))
      throw new Error(
        `${source}: tensor "${w.name}" has shape [${found.shape.join(', ')}], the config needs [${w.shape.join(', ')}]`,
      );
    const bits = found.data instanceof Uint16Array;
    if (!(found.data instanceof Float32Array) && !bits)
      throw new Error(`${source}: tensor "${w.name}" is not floating point`);
    const data = w.transposed ? transpose(found.data, w.shape[0]!, w.shape[1]!) : found.data.slice();
    const shape = w.transposed ? [w.shape[1]!, w.shape[0]!] : w.shape;
    params.set(w.name, new Tensor(data, shape, !bits));
  }
  return new Transformer(cfg, params, null, precision);
}

/** The model's tensors under their Hugging Face names and layouts, ready to write. */
export function tensorsForCheckpoint(model: Transformer): [string, { shape: number[]; data: Float32Array }][] {
  return hfWeightNames(model.cfg).map((w) => {
    const t = model.p(w.name);
    return [w.name, { shape: w.shape, data: w.transposed ? transpose(t.data, w.shape[1]!, w.shape[0]!) : t.data }];
  });
}

/** How loadModel holds a checkpoint's weights. */
export interface LoadOptions {
  /** Precision of the model's products (tensor/bf16.ts); default fp32. */
  precision?: Precision;
  /**
   * A frozen model (a LoRA agent's base, a KL reference): at bf16 its matrices stay bfloat16 bits in memory (a BF16
   * checkpoint's as stored, never widened; other dtypes rounded), its 1-D weights float32, and so do embedding tables
   * stored in another dtype: a lookup reads a table without a product's rounding, so a whole-model agent's fp32
   * lookups and its frozen KL reference's would otherwise differ. Default false: float32 weights (the master copies
   * training updates).
   */
  frozen?: boolean;
}

/**
 * The name each weight of `cfg` (hfWeightNames' order) has in the checkpoint `reader` opened (its own or an alias),
 * from the headers alone; throws naming the folder and the tensor when one is missing or not of the config's shape.
 */
export function storedNames(cfg: TransformerConfig, reader: CheckpointReader): string[] {
  return hfWeightNames(cfg).map((w) => {
    const name = [w.name, ...w.aliases].find((n) => reader.has(n));
    if (name === undefined)
      throw new Error(`${reader.dir}: missing tensor "${w.name}" (shape [${w.shape.join(', ')}])`);
    const shape = reader.info(name).shape;
    if (shape.length !== w.shape.length || shape.some((d, i) => d !== w.shape[i]))
      throw new Error(
        `${reader.dir}: tensor "${w.name}" has shape [${shape.join(', ')}] in the weight files, config.json needs ` +
          `[${w.shape.join(', ')}]`,
      );
    return name;
  });
}

/**
 * Loads config.json and the weights of a Hugging Face checkpoint folder. Every tensor the config needs is checked
 * against the weight files' headers (present, same shape) before any tensor is read, so a config.json that claims
 * more than the files hold is refused without allocating; weights that are NaN or infinite are refused at load.
 */
export async function loadModel(dir: string, options: LoadOptions = {}): Promise<Transformer> {
  const precision = options.precision ?? 'fp32';
  const bits = precision === 'bf16' && options.frozen === true;
  const cfg = await readHfConfig(dir);
  const reader = await CheckpointReader.open(dir);
  try {
    const wanted = hfWeightNames(cfg);
    const found = storedNames(cfg, reader);
    const tensors = new Map<string, { shape: number[]; data: Float32Array | Uint16Array }>();
    const lookups = embeddingTables(cfg);
    for (const [i, name] of found.entries()) {
      const { shape, dtype } = reader.info(name);
      const asBits = bits && shape.length === 2 && (dtype === 'BF16' || !lookups.has(wanted[i]!.name));
      const t = asBits ? await reader.readBf16(name) : await reader.readFloat32(name);
      checkFinite(name, t.data, dir);
      tensors.set(name, t);
    }
    return modelFromTensors(cfg, tensors, dir, precision);
  } finally {
    await reader.close();
  }
}

/**
 * Whether the checkpoint folder `dir` stores every embedding table as BF16, from its weight files' headers alone: a
 * frozen bf16 load (loadModel) keeps such tables as stored, others widened to fp32. False for a folder without
 * weight files (a config.json alone, as the memory plan may be given).
 */
export async function tablesStoredBf16(dir: string): Promise<boolean> {
  if (!(await pathExists(join(dir, SINGLE_FILE))) && !(await pathExists(join(dir, INDEX_FILE)))) return false;
  const cfg = await readHfConfig(dir);
  const reader = await CheckpointReader.open(dir);
  try {
    const lookups = embeddingTables(cfg);
    const stored = hfWeightNames(cfg)
      .filter((w) => lookups.has(w.name))
      .map((w) => [w.name, ...w.aliases].find((n) => reader.has(n)));
    return stored.length > 0 && stored.every((n) => n !== undefined && reader.info(n).dtype === 'BF16');
  } finally {
    await reader.close();
  }
}

/**
 * Writes config.json and model.safetensors (float32) into `dir`, which must be a fresh folder of a save in progress
 * (see saveModel). Refuses weights that are NaN or infinite: a diverged model is never saved.
 */
export async function writeModelFiles(
  dir: string,
  model: Transformer,
  options: { maxShardBytes?: number } = {},
): Promise<void> {
  const tensors = tensorsForCheckpoint(model);
  for (const [name, t] of tensors)
    checkFinite(name, t.data, 'refusing to save non-finite weights (a diverged training?)');
  await writeHfConfig(dir, model.cfg);
  await writeCheckpoint(dir, tensors, options);
}

/**
 * Saves the model as a Hugging Face checkpoint folder, whole or not at all: the files are written into a fresh
 * folder that then takes `dir`'s place (other files already in `dir` are kept, weight files of an earlier save are
 * not), so a failed save (a full disk, a file size limit, non-finite weights) leaves `dir` as it was.
 */
export async function saveModel(
  dir: string,
  model: Transformer,
  options: { maxShardBytes?: number } = {},
): Promise<void> {
  await replaceDir(dir, (tmp) => writeModelFiles(tmp, model, options), notWeightFile);
}

/**
 * Fresh weights, GPT-2 style: linear and embedding weights N(0, 0.02²), output projections of each residual branch
 * scaled by 1/sqrt(2·layers) so the residual stream keeps its scale with depth, biases 0, norm scales 1. `frozenBf16`
 * (default false) makes a frozen bf16 model, as loadModel holds a BF16 checkpoint frozen: each matrix rounded to
 * bfloat16 bits as soon as it is drawn (never a whole fp32 copy in memory), the same values an fp32 init rounds to.
 */
export function initModel(cfg: TransformerConfig, seed: number, std = 0.02, frozenBf16 = false): Transformer {
  const rng = new Rng(seed);
  const params = new Map<string, Tensor>();
  const residualOut = /(o_proj|attn\.c_proj|down_proj|mlp\.c_proj)\.weight$/;
  for (const w of hfWeightNames(cfg)) {
    const shape = w.transposed ? [w.shape[1]!, w.shape[0]!] : w.shape;
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    if (/(norm|ln_\d|ln_f)[^.]*\.weight$/.test(w.name)) data.fill(1);
    else if (!w.name.endsWith('.bias')) {
      const s = residualOut.test(w.name) ? std / Math.sqrt(2 * cfg.layers) : std;
      for (let i = 0; i < data.length; i++) data[i] = rng.normal() * s;
    }
    params.set(
      w.name,
      frozenBf16 && shape.length === 2 ? new Tensor(f32ToBf16(data), shape) : new Tensor(data, shape, !frozenBf16),
    );
  }
  return new Transformer(cfg, params, null, frozenBf16 ? 'bf16' : 'fp32');
}
