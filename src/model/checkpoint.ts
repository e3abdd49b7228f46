// A Hugging Face checkpoint folder's weights: `model.safetensors`, or shards `model-00001-of-0000N.safetensors`
// listed by `model.safetensors.index.json` ({"metadata": {"total_size": bytes}, "weight_map": {tensor: shard}}).
import { mkdir, readdir, unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { z } from 'zod';
import { writeJsonAtomic } from '../util/atomic-write.js';
import { pathExists, readJsonWith } from '../util/json-file.js';
import {
  SafetensorsReader,
  storedBytes,
  writeSafetensors,
  type SafetensorsWriteOptions,
  type Tensor,
  type TensorInfo,
  type TensorToWrite,
} from './safetensors.js';

/** The single-file weights name. */
export const SINGLE_FILE = 'model.safetensors';
/** The shard index name. */
export const INDEX_FILE = 'model.safetensors.index.json';
const SHARD_RE = /^model-\d{5}-of-\d{5}\.safetensors$/;

/** False for the weight files of a checkpoint folder (single file, shards, index): what a new save replaces. */
export function notWeightFile(name: string): boolean {
  return name !== SINGLE_FILE && name !== INDEX_FILE && !SHARD_RE.test(name);
}

const IndexSchema = z.looseObject({
  metadata: z.looseObject({ total_size: z.number().optional() }).optional(),
  weight_map: z.record(z.string(), z.string()),
});

/** Random access to the weights of a checkpoint folder, across shards. */
export class CheckpointReader {
  private constructor(
    /** The folder (used in errors). */
    readonly dir: string,
    private readonly where: Map<string, SafetensorsReader>,
    private readonly files: SafetensorsReader[],
  ) {}

  /**
   * Opens a folder's weights: `model.safetensors` if present (as transformers prefers), else the shard index.
   * Errors name the folder and the missing file, or the tensor whose shard lacks it.
   */
  static async open(dir: string): Promise<CheckpointReader> {
    if (await pathExists(join(dir, SINGLE_FILE))) {
      const r = await SafetensorsReader.open(join(dir, SINGLE_FILE));
      return new CheckpointReader(dir, new Map(r.names().map((n) => [n, r])), [r]);
    }
    const indexPath = join(dir, INDEX_FILE);
    if (!(await pathExists(indexPath))) {
      throw new Error(`no weights in ${dir}: expected ${SINGLE_FILE} or ${INDEX_FILE}`);
    }
    const index = await readJsonWith(indexPath, IndexSchema);
    const byShard = new Map<string, SafetensorsReader>();
    const where = new Map<string, SafetensorsReader>();
    try {
      for (const [name, shard] of Object.entries(index.weight_map)) {
        // A shard name is a file in this folder; anything with a path in it could read outside the checkpoint.
        if (basename(shard) !== shard)
          throw new Error(`${indexPath}: shard "${shard}" of tensor "${name}" is not a plain file name`);
        let r = byShard.get(shard);
        if (!r) {
          r = await SafetensorsReader.open(join(dir, shard));
          byShard.set(shard, r);
        }
        if (!r.header.tensors.has(name))
          throw new Error(`${indexPath} puts tensor "${name}" in ${shard}, which does not contain it`);
        where.set(name, r);
      }
    } catch (e) {
      await Promise.all([...byShard.values()].map((r) => r.close()));
      throw e;
    }
    return new CheckpointReader(dir, where, [...byShard.values()]);
  }

  /** All tensor names. */
  names(): string[] {
    return [...this.where.keys()];
  }

  /** True when the checkpoint has tensor `name`. */
  has(name: string): boolean {
    return this.where.has(name);
  }

  /** Where tensor `name` lies in its file. */
  info(name: string): TensorInfo {
    return this.reader(name).info(name);
  }

  /** Reads and decodes one tensor. */
  async read(name: string): Promise<Tensor> {
    return this.reader(name).read(name);
  }

  /** Reads one float tensor as float32 (F16/BF16/F64 are converted). */
  async readFloat32(name: string): Promise<{ shape: number[]; data: Float32Array }> {
    return this.reader(name).readFloat32(name);
  }

  /** Reads one float tensor as bfloat16 bits (BF16 as stored, other floats rounded). */
  async readBf16(name: string): Promise<{ shape: number[]; data: Uint16Array }> {
    return this.reader(name).readBf16(name);
  }

  /** The raw bytes of tensor `name` as stored. */
  async bytes(name: string): Promise<Uint8Array> {
    return this.reader(name).bytes(name);
  }

  /** The name of the weight file (single file or shard) that holds tensor `name`. */
  fileOf(name: string): string {
    return basename(this.reader(name).path);
  }

  /** Closes every file. */
  async close(): Promise<void> {
    await Promise.all(this.files.map((f) => f.close()));
  }

  private reader(name: string): SafetensorsReader {
    const r = this.where.get(name);
    if (!r) throw new Error(`tensor "${name}" not found in the checkpoint ${this.dir}`);
    return r;
  }
}

/** Reads every tensor of a checkpoint folder (single file or sharded). */
export async function readCheckpoint(dir: string): Promise<Map<string, Tensor>> {
  const r = await CheckpointReader.open(dir);
  try {
    const out = new Map<string, Tensor>();
    for (const name of r.names()) out.set(name, await r.read(name));
    return out;
  } finally {
    await r.close();
  }
}

/** Options for writing a checkpoint folder's weights. */
export interface CheckpointWriteOptions extends SafetensorsWriteOptions {
  /** Largest shard in stored bytes; default none (one `model.safetensors`). A bigger tensor gets a shard of its own. */
  maxShardBytes?: number;
}

/**
 * Writes a checkpoint's weights into `dir` (created if missing): one `model.safetensors`, or, when `maxShardBytes` is
 * given and exceeded, shards filled in the given tensor order plus the index, written last; returns the file names.
 * Weight files of an earlier save that the new one does not use are then deleted, so no loader picks up stale ones.
 */
export async function writeCheckpoint(
  dir: string,
  tensors: Iterable<readonly [string, TensorToWrite]>,
  opts: CheckpointWriteOptions = {},
): Promise<string[]> {
  const items = [...tensors];
  const shards = splitShards(items, opts);
  await mkdir(dir, { recursive: true });
  const written: string[] = [];
  if (shards.length === 1) {
    await writeSafetensors(join(dir, SINGLE_FILE), items, opts);
    written.push(SINGLE_FILE);
  } else {
    const weightMap: Record<string, string> = {};
    let total = 0;
    for (const [i, shard] of shards.entries()) {
      const file = `model-${String(i + 1).padStart(5, '0')}-of-${String(shards.length).padStart(5, '0')}.safetensors`;
      await writeSafetensors(join(dir, file), shard, opts);
      for (const [name, t] of shard) {
        weightMap[name] = file;
        total += storedBytes(t, opts.floatDtype);
      }
      written.push(file);
    }
    const sorted = Object.fromEntries(Object.entries(weightMap).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    await writeJsonAtomic(join(dir, INDEX_FILE), { metadata: { total_size: total }, weight_map: sorted });
    written.push(INDEX_FILE);
  }
  for (const f of await readdir(dir)) {
    if (!notWeightFile(f) && !written.includes(f)) await unlink(join(dir, f));
  }
  return written;
}

// Greedy in the given order, like transformers' shard splitting: start a new shard when the next tensor would
// overflow the current one.
function splitShards(
  items: (readonly [string, TensorToWrite])[],
  opts: CheckpointWriteOptions,
): (readonly [string, TensorToWrite])[][] {
  const max = opts.maxShardBytes;
  if (max === undefined) return [items];
  if (!(max > 0)) throw new Error(`maxShardBytes must be positive, got ${max}`);
  const shards: (readonly [string, TensorToWrite])[][] = [[]];
  let size = 0;
  for (const item of items) {
    const bytes = storedBytes(item[1], opts.floatDtype);
    if (size > 0 && size + bytes > max) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1]!.push(item);
    size += bytes;
  }
  return shards;
}
