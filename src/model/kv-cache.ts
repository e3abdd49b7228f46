import type { Kernels } from '../backend/kernels.js';

/**
 * Keys and values of every layer for a batch of sequences being decoded, laid out [B, Hkv, S, D] per layer so one
 * head's keys are contiguous for the decode kernel. All sequences share one length (left padding aligns them).
 */
export class KVCache {
  /** Keys per layer, [B, Hkv, capacity, D]. */
  readonly k: Float32Array[];
  /** Values per layer, same layout. */
  readonly v: Float32Array[];
  /** Positions filled so far (the same for every sequence). */
  length = 0;
  /** Work buffers of the decode steps over this cache, by name: allocated on the first step, reused by the others. */
  private readonly scratch = new Map<string, Float32Array>();

  constructor(
    readonly layers: number,
    readonly batch: number,
    readonly kvHeads: number,
    readonly headDim: number,
    /** Most positions the cache can hold (prompt + new tokens). */
    readonly capacity: number,
    /** Per sequence, the first real position (left padding before it is masked); null when unpadded. */
    readonly keyStart: Int32Array | null = null,
  ) {
    const size = batch * kvHeads * capacity * headDim;
    this.k = Array.from({ length: layers }, () => new Float32Array(size));
    this.v = Array.from({ length: layers }, () => new Float32Array(size));
  }

  /** Stores keys and values of whole sequences (rows [B·T, Hkv·D]) at positions 0..T-1 of `layer` (prefill). */
  writeSequence(k: Kernels, layer: number, keys: Float32Array, values: Float32Array, seqLen: number): void {
    if (seqLen > this.capacity) throw new Error(`KV cache: ${seqLen} positions exceed its capacity ${this.capacity}`);
    this.scatter(k, layer, keys, values, seqLen, 0);
  }

  /** Stores one new position's keys and values (rows [B, Hkv·D]) at the current length. */
  writeStep(k: Kernels, layer: number, keys: Float32Array, values: Float32Array): void {
    if (this.length >= this.capacity) throw new Error(`KV cache full: capacity ${this.capacity} positions`);
    this.scatter(k, layer, keys, values, 1, this.length);
  }

  /** Row (b·T + t)·Hkv + h of keys/values goes to position at + t of head h of sequence b. */
  private scatter(
    k: Kernels,
    layer: number,
    keys: Float32Array,
    values: Float32Array,
    steps: number,
    at: number,
  ): void {
    const { batch, kvHeads: heads, headDim: d, capacity } = this;
    for (const [src, dst] of [
      [keys, this.k[layer]!],
      [values, this.v[layer]!],
    ] as const) {
      // One step: the B·Hkv rows land capacity·D apart, one copy in all (a decode step makes two per layer).
      if (steps === 1) k.copyRows(src, 0, d, dst, at * d, capacity * d, batch * heads, d);
      else
        for (let b = 0; b < batch; b++)
          for (let h = 0; h < heads; h++)
            k.copyRows(
              src,
              (b * steps * heads + h) * d,
              heads * d,
              dst,
              ((b * heads + h) * capacity + at) * d,
              d,
              steps,
              d,
            );
    }
  }

  /**
   * The work buffer `name` of `size` floats, the same array on every call (a decode step's activations live in these,
   * so steps allocate nothing); its contents are whatever the last step left.
   */
  buffer(name: string, size: number): Float32Array {
    let b = this.scratch.get(name);
    if (!b || b.length !== size) this.scratch.set(name, (b = new Float32Array(size)));
    return b;
  }

  /**
   * Copies `n` filled positions of sequence `fromRow` of `from`, starting at position `fromAt`, into sequence `toRow`
   * of this cache at position `toAt`, in every layer (both caches have the same layers, kv heads and head size).
   */
  copySequence(from: KVCache, fromRow: number, fromAt: number, toRow: number, toAt: number, n: number): void {
    const { kvHeads: heads, headDim: d } = this;
    for (let l = 0; l < this.layers; l++)
      for (const [src, dst] of [
        [from.k[l]!, this.k[l]!],
        [from.v[l]!, this.v[l]!],
      ] as const)
        for (let h = 0; h < heads; h++) {
          const at = ((fromRow * heads + h) * from.capacity + fromAt) * d;
          dst.set(src.subarray(at, at + n * d), ((toRow * heads + h) * this.capacity + toAt) * d);
        }
  }

  /** Marks `n` positions as filled (after a prefill). */
  setLength(n: number): void {
    this.length = n;
  }

  /** Marks one more position as filled (after a decode step wrote every layer). */
  advance(): void {
    this.length++;
  }
}
