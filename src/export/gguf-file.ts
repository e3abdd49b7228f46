/**
 * Writes GGUF files (version 3, little-endian), llama.cpp's model format: a header of typed key/value metadata, one
 * info record per tensor (name, dimensions innermost first, type, offset), then the tensor data, each tensor aligned
 * to 32 bytes. Written here rather than with @huggingface/gguf: that library (0.4) parses GGUF and re-serialises
 * the metadata of an existing file, but writes no tensor infos or data, which is most of a new file; the format is
 * small and the export tests check every file against llama.cpp itself.
 */
import { writeFileAtomic } from '../util/atomic-write.js';
import { checkFinite } from '../model/finite.js';
import { f32ToBf16, f32ToF16 } from '../tensor/half.js';

/** A metadata value with its GGUF type. */
export type GgufValue =
  | { type: 'u32' | 'i32' | 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'i32[]' | 'f32[]'; value: readonly number[] }
  | { type: 'string[]'; value: readonly string[] };

/** Tensor storage types this writer produces. */
export type GgufTensorType = 'f32' | 'f16' | 'bf16';

/** One tensor to write. */
export interface GgufTensor {
  name: string;
  /** Dimensions innermost first (GGUF's ne order): a row-major [rows, cols] matrix is [cols, rows]. */
  dims: readonly number[];
  type: GgufTensorType;
  data: Float32Array;
}

const ALIGNMENT = 32;
const VALUE_TYPE = { u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9 } as const;
const TENSOR_TYPE: Record<GgufTensorType, number> = { f32: 0, f16: 1, bf16: 30 };
const BYTES: Record<GgufTensorType, number> = { f32: 4, f16: 2, bf16: 2 };

/** Little-endian byte builder for the header. */
class Bytes {
  private readonly parts: Uint8Array[] = [];
  length = 0;

  private push(b: Uint8Array): void {
    this.parts.push(b);
    this.length += b.length;
  }
  u32(x: number): void {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(x);
    this.push(b);
  }
  i32(x: number): void {
    const b = Buffer.alloc(4);
    b.writeInt32LE(x);
    this.push(b);
  }
  f32(x: number): void {
    const b = Buffer.alloc(4);
    b.writeFloatLE(x);
    this.push(b);
  }
  u64(x: number): void {
    const b = Buffer.alloc(8);
    b.writeBigUInt64LE(BigInt(x));
    this.push(b);
  }
  u8(x: number): void {
    this.push(Uint8Array.of(x));
  }
  string(s: string): void {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    this.push(b);
  }
  pad(): void {
    const n = (ALIGNMENT - (this.length % ALIGNMENT)) % ALIGNMENT;
    if (n > 0) this.push(new Uint8Array(n));
  }
  concat(): Uint8Array {
    return Buffer.concat(this.parts);
  }
}

function writeValue(out: Bytes, v: GgufValue): void {
  switch (v.type) {
    case 'u32':
    case 'i32':
    case 'f32':
      out.u32(VALUE_TYPE[v.type]);
      out[v.type](v.value);
      return;
    case 'bool':
      out.u32(VALUE_TYPE.bool);
      out.u8(v.value ? 1 : 0);
      return;
    case 'string':
      out.u32(VALUE_TYPE.string);
      out.string(v.value);
      return;
    case 'string[]':
      out.u32(VALUE_TYPE.array);
      out.u32(VALUE_TYPE.string);
      out.u64(v.value.length);
      for (const s of v.value) out.string(s);
      return;
    case 'i32[]':
    case 'f32[]': {
      const elem = v.type === 'i32[]' ? 'i32' : 'f32';
      out.u32(VALUE_TYPE.array);
      out.u32(VALUE_TYPE[elem]);
      out.u64(v.value.length);
      for (const x of v.value) out[elem](x);
      return;
    }
  }
}

/**
 * The bytes of a tensor's data in its storage type; throws naming the tensor when a value is NaN or infinite as
 * stored (f16 also turns values beyond ±65504 into infinities), since llama.cpp would load them without a word.
 */
function tensorBytes(t: GgufTensor): Uint8Array {
  const data = t.type === 'f32' ? t.data : t.type === 'f16' ? f32ToF16(t.data) : f32ToBf16(t.data);
  checkFinite(t.name, data, `refusing to write non-finite weights as ${t.type}`, t.type === 'f16' ? 'f16' : 'bf16');
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** Writes a GGUF file atomically: `metadata` in the given order, then `tensors` in order. */
export async function writeGguf(
  path: string,
  metadata: readonly (readonly [string, GgufValue])[],
  tensors: readonly GgufTensor[],
): Promise<void> {
  const head = new Bytes();
  head.u32(0x46554747); // "GGUF"
  head.u32(3);
  head.u64(tensors.length);
  head.u64(metadata.length);
  for (const [key, value] of metadata) {
    head.string(key);
    writeValue(head, value);
  }
  let offset = 0;
  for (const t of tensors) {
    const elements = t.dims.reduce((a, b) => a * b, 1);
    if (elements !== t.data.length)
      throw new Error(
        `GGUF tensor ${t.name}: dims [${t.dims.join(', ')}] hold ${elements} values, got ${t.data.length}`,
      );
    head.string(t.name);
    head.u32(t.dims.length);
    for (const d of t.dims) head.u64(d);
    head.u32(TENSOR_TYPE[t.type]);
    head.u64(offset);
    offset += Math.ceil((elements * BYTES[t.type]) / ALIGNMENT) * ALIGNMENT;
  }
  head.pad();
  const chunks: Uint8Array[] = [head.concat()];
  for (const t of tensors) {
    const bytes = tensorBytes(t);
    chunks.push(bytes);
    const pad = (ALIGNMENT - (bytes.length % ALIGNMENT)) % ALIGNMENT;
    if (pad > 0) chunks.push(new Uint8Array(pad));
  }
  await writeFileAtomic(path, chunks);
}
