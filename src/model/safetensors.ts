// The safetensors format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N,
// N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?: {string: string}} padded
// with spaces to a multiple of 8, then the raw little-endian tensor bytes (offsets are relative to the data start).
import { endianness } from 'node:os';
import { open, type FileHandle } from 'node:fs/promises';
import { writeFileAtomic } from '../util/atomic-write.js';
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from '../tensor/half.js';

// Typed-array views below reinterpret file bytes directly, which is only right on a little-endian host
// (x86-64 and arm64, i.e. every machine Node ships for).
if (endianness() !== 'LE') throw new Error('hacrl safetensors support needs a little-endian CPU');

/** The safetensors element types this module reads (F64/F16/BF16 widen to float32, small ints to int32). */
export type Dtype = 'F64' | 'F32' | 'F16' | 'BF16' | 'I64' | 'I32' | 'I16' | 'I8' | 'U8' | 'BOOL';

/** Bytes per element of each dtype. */
export const DTYPE_BYTES: Record<Dtype, number> = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U8: 1,
  BOOL: 1,
};

/** The header size limit of the reference implementation (bytes); larger headers are rejected as corrupt. */
export const MAX_HEADER_BYTES = 100_000_000;

/** Decoded tensor values: float dtypes as Float32Array, I64 as BigInt64Array, the other integers as Int32Array. */
export type TensorData = Float32Array | Int32Array | BigInt64Array;

/** A tensor as stored: its dtype in the file, its shape (row-major), and its values. */
export interface Tensor {
  /** The dtype in the file (the values are already converted, see TensorData). */
  dtype: Dtype;
  /** Dimensions, outermost first; [] is a scalar. */
  shape: number[];
  /** The values, row-major. */
  data: TensorData;
}

/** A tensor to write: float32 data is stored as F32 (or BF16 if asked), Int32Array as I32, BigInt64Array as I64. */
export interface TensorToWrite {
  /** Dimensions, outermost first; their product must equal data.length. */
  shape: readonly number[];
  /** The values, row-major. */
  data: TensorData;
}

/** Where one tensor lies in a file, from its header. */
export interface TensorInfo {
  /** The stored element type. */
  dtype: Dtype;
  /** Dimensions, outermost first. */
  shape: number[];
  /** [begin, end) byte offsets relative to the start of the data section. */
  offsets: [number, number];
}

/** A parsed header: the tensors by name (in header order), the free-form metadata, and where the data starts. */
export interface SafetensorsHeader {
  /** Tensor locations by name. */
  tensors: Map<string, TensorInfo>;
  /** The `__metadata__` string map ({} when absent). */
  metadata: Record<string, string>;
  /** Absolute file offset of the data section (8 + header length). */
  dataStart: number;
}

/** Options for writing a safetensors file. */
export interface SafetensorsWriteOptions {
  /** Stored as `__metadata__` (string values only, as the format requires); default none. */
  metadata?: Record<string, string>;
  /** How Float32Array tensors are stored: 'F32' (default, lossless) or 'BF16' (half the size, rounded). */
  floatDtype?: 'F32' | 'BF16';
}

/** Number of elements of a shape (1 for a scalar). */
export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Parses the header of a safetensors file given its first bytes (at least 8 + N) and total size, checking it all. */
export function parseHeader(prefix: Uint8Array, fileSize: number, file: string): SafetensorsHeader {
  if (fileSize < 8) throw new Error(`${file} is not a safetensors file: only ${fileSize} bytes, no header length`);
  const n = readHeaderLength(prefix, file);
  if (8 + n > fileSize) {
    throw new Error(
      `${file} is truncated: the header claims ${n} bytes but the file has only ${fileSize - 8} after it`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(prefix.subarray(8, 8 + n)));
  } catch (e) {
    throw new Error(`${file} has an ill-formed safetensors header (not UTF-8 JSON): ${(e as Error).message}`);
  }
  if (!isRecord(json)) throw new Error(`${file} has an ill-formed safetensors header: it is not a JSON object`);
  const dataBytes = fileSize - 8 - n;
  const tensors = new Map<string, TensorInfo>();
  let metadata: Record<string, string> = {};
  for (const [name, entry] of Object.entries(json)) {
    if (name === '__metadata__') metadata = parseMetadata(entry, file);
    else tensors.set(name, parseEntry(name, entry, dataBytes, file));
  }
  checkNoOverlap(tensors, file);
  return { tensors, metadata, dataStart: 8 + n };
}

function readHeaderLength(prefix: Uint8Array, file: string): number {
  const n64 = new DataView(prefix.buffer, prefix.byteOffset, 8).getBigUint64(0, true);
  if (n64 > BigInt(MAX_HEADER_BYTES)) {
    throw new Error(`${file} has a header length of ${n64} bytes, over the ${MAX_HEADER_BYTES}-byte limit (corrupt?)`);
  }
  return Number(n64);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function parseMetadata(entry: unknown, file: string): Record<string, string> {
  if (!isRecord(entry) || !Object.values(entry).every((v) => typeof v === 'string')) {
    throw new Error(`${file}: __metadata__ must be an object of string values`);
  }
  return entry as Record<string, string>;
}

function isCount(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function parseEntry(name: string, entry: unknown, dataBytes: number, file: string): TensorInfo {
  const where = `tensor "${name}" in ${file}`;
  if (!isRecord(entry)) throw new Error(`${where}: header entry is not an object`);
  const { dtype, shape, data_offsets: offs } = entry;
  if (typeof dtype !== 'string' || !(dtype in DTYPE_BYTES)) {
    throw new Error(
      `${where} has unknown or unsupported dtype ${JSON.stringify(dtype)} (supported: ${Object.keys(DTYPE_BYTES).join(', ')})`,
    );
  }
  if (!Array.isArray(shape) || !shape.every(isCount)) {
    throw new Error(`${where}: shape must be an array of non-negative integers, got ${JSON.stringify(shape)}`);
  }
  if (!Array.isArray(offs) || offs.length !== 2 || !isCount(offs[0]) || !isCount(offs[1]) || offs[0] > offs[1]) {
    throw new Error(`${where}: data_offsets must be [begin, end] with 0 <= begin <= end, got ${JSON.stringify(offs)}`);
  }
  const [begin, end] = offs as [number, number];
  const need = numel(shape) * DTYPE_BYTES[dtype as Dtype];
  if (end - begin !== need) {
    throw new Error(
      `${where}: data_offsets [${begin}, ${end}] hold ${end - begin} bytes but ${dtype}${JSON.stringify(shape)} needs ${need}`,
    );
  }
  if (end > dataBytes) {
    throw new Error(
      `${where}: data_offsets [${begin}, ${end}] are out of range, the data section has ${dataBytes} bytes (file truncated or header corrupt)`,
    );
  }
  return { dtype: dtype as Dtype, shape: shape as number[], offsets: [begin, end] };
}

function checkNoOverlap(tensors: Map<string, TensorInfo>, file: string): void {
  const sorted = [...tensors]
    .filter(([, t]) => t.offsets[1] > t.offsets[0])
    .sort((a, b) => a[1].offsets[0] - b[1].offsets[0]);
  for (let i = 1; i < sorted.length; i++) {
    const [prevName, prev] = sorted[i - 1]!;
    const [name, cur] = sorted[i]!;
    if (cur.offsets[0] < prev.offsets[1])
      throw new Error(`${file}: tensors "${prevName}" and "${name}" overlap in the data`);
  }
}

/** Converts a tensor's raw bytes (a fresh, aligned Uint8Array) to its decoded values. */
export function decodeTensorBytes(dtype: Dtype, bytes: Uint8Array): TensorData {
  const n = bytes.byteLength / DTYPE_BYTES[dtype];
  const buf = bytes.buffer;
  const off = bytes.byteOffset;
  switch (dtype) {
    case 'F32':
      return new Float32Array(buf, off, n);
    case 'F64':
      return Float32Array.from(new Float64Array(buf, off, n));
    case 'F16':
      return f16ToF32(new Uint16Array(buf, off, n));
    case 'BF16':
      return bf16ToF32(new Uint16Array(buf, off, n));
    case 'I64':
      return new BigInt64Array(buf, off, n);
    case 'I32':
      return new Int32Array(buf, off, n);
    case 'I16':
      return Int32Array.from(new Int16Array(buf, off, n));
    case 'I8':
      return Int32Array.from(new Int8Array(buf, off, n));
    case 'U8':
    case 'BOOL':
      return Int32Array.from(bytes);
  }
}

/** Random access to one safetensors file: the header is read on open, each tensor only when asked for. */
export class SafetensorsReader {
  private constructor(
    /** The file's path (used in errors). */
    readonly path: string,
    private readonly fh: FileHandle,
    /** The parsed header. */
    readonly header: SafetensorsHeader,
  ) {}

  /** Opens `path` and parses its header; errors name the file. */
  static async open(path: string): Promise<SafetensorsReader> {
    const fh = await open(path, 'r').catch((e: Error) => {
      throw new Error(`cannot open safetensors file ${path}: ${e.message}`);
    });
    try {
      const size = (await fh.stat()).size;
      const first = await readAt(fh, 0, Math.min(8, size));
      const n = size >= 8 ? readHeaderLength(first, path) : 0;
      const prefix = await readAt(fh, 0, Math.min(8 + n, size));
      return new SafetensorsReader(path, fh, parseHeader(prefix, size, path));
    } catch (e) {
      await fh.close();
      throw e;
    }
  }

  /** The `__metadata__` strings. */
  get metadata(): Record<string, string> {
    return this.header.metadata;
  }

  /** Tensor names in header order. */
  names(): string[] {
    return [...this.header.tensors.keys()];
  }

  /** Where tensor `name` lies; throws naming the file when there is no such tensor. */
  info(name: string): TensorInfo {
    const t = this.header.tensors.get(name);
    if (!t) throw new Error(`tensor "${name}" not found in ${this.path}`);
    return t;
  }

  /** Reads and decodes one tensor. */
  async read(name: string): Promise<Tensor> {
    const t = this.info(name);
    return { dtype: t.dtype, shape: [...t.shape], data: decodeTensorBytes(t.dtype, await this.bytes(name)) };
  }

  /**
   * Reads one floating-point tensor as bfloat16 bits: a BF16 tensor as stored (never widened to float32), any other
   * float rounded to nearest even.
   */
  async readBf16(name: string): Promise<{ shape: number[]; data: Uint16Array }> {
    const t = this.info(name);
    if (t.dtype !== 'BF16') {
      const f = await this.readFloat32(name);
      return { shape: f.shape, data: f32ToBf16(f.data) };
    }
    const bytes = await this.bytes(name);
    return { shape: [...t.shape], data: new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2) };
  }

  /** The raw bytes of tensor `name` as stored, in a fresh aligned buffer. */
  async bytes(name: string): Promise<Uint8Array> {
    const t = this.info(name);
    return readAt(this.fh, this.header.dataStart + t.offsets[0], t.offsets[1] - t.offsets[0]).catch((e: Error) => {
      throw new Error(`cannot read tensor "${name}" from ${this.path}: ${e.message}`);
    });
  }

  /** Reads one floating-point tensor as float32; throws naming the tensor and file if it is an integer tensor. */
  async readFloat32(name: string): Promise<{ shape: number[]; data: Float32Array }> {
    const t = await this.read(name);
    if (!(t.data instanceof Float32Array))
      throw new Error(`tensor "${name}" in ${this.path} is ${t.dtype}, not a float tensor`);
    return { shape: t.shape, data: t.data };
  }

  /** Closes the file. */
  async close(): Promise<void> {
    await this.fh.close();
  }
}

// Reads exactly `length` bytes into a fresh buffer (so typed-array views on it are aligned); a short read means the
// file changed or is truncated. Reads go in chunks because a single read is capped at 2 GiB.
async function readAt(fh: FileHandle, position: number, length: number): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  let done = 0;
  while (done < length) {
    const want = Math.min(length - done, 1 << 30);
    const { bytesRead } = await fh.read(out, done, want, position + done);
    if (bytesRead === 0) throw new Error(`unexpected end of file at byte ${position + done} (file truncated?)`);
    done += bytesRead;
  }
  return out;
}

/** Reads every tensor of a safetensors file. */
export async function readSafetensors(
  path: string,
): Promise<{ tensors: Map<string, Tensor>; metadata: Record<string, string> }> {
  const r = await SafetensorsReader.open(path);
  try {
    const tensors = new Map<string, Tensor>();
    for (const name of r.names()) tensors.set(name, await r.read(name));
    return { tensors, metadata: r.metadata };
  } finally {
    await r.close();
  }
}

/** Decodes a whole safetensors file held in memory; `file` names it in errors. */
export function parseSafetensors(
  bytes: Uint8Array,
  file: string = '<buffer>',
): { tensors: Map<string, Tensor>; metadata: Record<string, string> } {
  const header = parseHeader(bytes, bytes.byteLength, file);
  const tensors = new Map<string, Tensor>();
  for (const [name, t] of header.tensors) {
    const raw = bytes.slice(header.dataStart + t.offsets[0], header.dataStart + t.offsets[1]);
    tensors.set(name, { dtype: t.dtype, shape: [...t.shape], data: decodeTensorBytes(t.dtype, raw) });
  }
  return { tensors, metadata: header.metadata };
}

/** The stored size in bytes of a tensor written with `floatDtype`. */
export function storedBytes(t: TensorToWrite, floatDtype: 'F32' | 'BF16' = 'F32'): number {
  return t.data.length * DTYPE_BYTES[storedDtype(t, floatDtype)];
}

function storedDtype(t: TensorToWrite, floatDtype: 'F32' | 'BF16'): Dtype {
  return t.data instanceof Float32Array ? floatDtype : t.data instanceof Int32Array ? 'I32' : 'I64';
}

/** Float32 values as the stored bytes of a float dtype (BF16 and F16 rounded to nearest even). */
export function encodeFloats(data: Float32Array, dtype: 'F32' | 'BF16' | 'F16'): Uint8Array {
  const out = dtype === 'F32' ? data : dtype === 'BF16' ? f32ToBf16(data) : f32ToF16(data);
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

function toBytes(t: TensorToWrite, dtype: Dtype): Uint8Array {
  const src = dtype === 'BF16' ? f32ToBf16(t.data as Float32Array) : t.data;
  return new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
}

/**
 * Serializes tensors to safetensors bytes, as chunks (header, then each tensor's bytes, F32 without copying).
 * Like the reference implementation, tensors are laid out by decreasing element size then by name, the JSON is
 * compact with `__metadata__` first, and it is padded with spaces to a multiple of 8 bytes.
 */
export function serializeSafetensors(
  tensors: Iterable<readonly [string, TensorToWrite]>,
  opts: SafetensorsWriteOptions = {},
): Uint8Array[] {
  const floatDtype = opts.floatDtype ?? 'F32';
  const items = [...tensors].map(([name, t]) => {
    if (numel(t.shape) !== t.data.length) {
      throw new Error(
        `tensor "${name}": shape ${JSON.stringify(t.shape)} has ${numel(t.shape)} elements but data has ${t.data.length}`,
      );
    }
    return { name, t, dtype: storedDtype(t, floatDtype), shape: t.shape };
  });
  const { header, order } = safetensorsLayout(items, opts.metadata);
  return [header, ...order.map(({ t, dtype }) => toBytes(t, dtype))];
}

/** A tensor of a file being laid out: its name, stored dtype and shape. */
export interface TensorEntry {
  name: string;
  dtype: Dtype;
  shape: readonly number[];
}

/**
 * The header bytes of a safetensors file holding `entries`, and the order their bytes follow it in (see
 * serializeSafetensors); refuses a reserved or repeated name.
 */
export function safetensorsLayout<T extends TensorEntry>(
  entries: readonly T[],
  metadata?: Record<string, string>,
): { header: Uint8Array; order: T[] } {
  const names = new Set<string>();
  for (const { name } of entries) {
    if (name === '__metadata__') throw new Error('"__metadata__" is reserved and cannot name a tensor');
    if (names.has(name)) throw new Error(`tensor "${name}" is given twice`);
    names.add(name);
  }
  const order = [...entries].sort(
    (a, b) => DTYPE_BYTES[b.dtype] - DTYPE_BYTES[a.dtype] || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0),
  );
  const json: Record<string, unknown> = {};
  if (metadata) json['__metadata__'] = metadata;
  let offset = 0;
  for (const { name, dtype, shape } of order) {
    const bytes = numel(shape) * DTYPE_BYTES[dtype];
    json[name] = { dtype, shape: [...shape], data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const text = Buffer.from(JSON.stringify(json), 'utf8');
  const header = Buffer.alloc(8 + Math.ceil(text.byteLength / 8) * 8, 0x20);
  header.writeBigUInt64LE(BigInt(header.byteLength - 8), 0);
  text.copy(header, 8);
  return { header, order };
}

/**
 * Writes a safetensors file of `entries` atomically, asking `bytes` for each tensor's stored bytes only when its turn
 * comes: one tensor in memory at a time, however large the file.
 */
export async function writeSafetensorsStreaming(
  path: string,
  entries: readonly TensorEntry[],
  bytes: (entry: TensorEntry) => Promise<Uint8Array>,
  metadata?: Record<string, string>,
): Promise<void> {
  const { header, order } = safetensorsLayout(entries, metadata);
  async function* chunks(): AsyncGenerator<Uint8Array> {
    yield header;
    for (const e of order) {
      const b = await bytes(e);
      const want = numel(e.shape) * DTYPE_BYTES[e.dtype];
      if (b.byteLength !== want) throw new Error(`tensor "${e.name}": ${b.byteLength} bytes given, ${want} expected`);
      yield b;
    }
  }
  await writeFileAtomic(path, chunks());
}

/** Writes tensors to a safetensors file atomically (see serializeSafetensors for the layout). */
export async function writeSafetensors(
  path: string,
  tensors: Iterable<readonly [string, TensorToWrite]>,
  opts: SafetensorsWriteOptions = {},
): Promise<void> {
  await writeFileAtomic(path, serializeSafetensors(tensors, opts));
}
