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
  writeSequence(layer: number, keys: Float32Array, values: Float32Array, seqLen: number): void {
    if (seqLen > this.capacity) throw new Error(`KV cache: ${seqLen} positions exceed its capacity ${this.capacity}`);
    this.scatter(layer, keys, values, seqLen, 0);
  }

  /** Stores one new position's keys and values (rows [B, Hkv·D]) at the current length. */
  writeStep(layer: number, keys: Float32Array, values: Float32Array): void {
    if (this.length >= this.capacity) throw new Error(`KV cache full: capacity ${this.capacity} positions`);
    this.scatter(layer, keys, values, 1, this.length);
  }

  private scatter(layer: number, keys: Float32Array, values: Float32Array, steps: number, at: number): void {
    const { batch, kvHeads: heads, headDim: d, capacity } = this;
    const kc = this.k[layer]!;
    const vc = this.v[layer]!;
    for (let b = 0; b < batch; b++)
      for (let t = 0; t < steps; t++)
        for (let h = 0; h < heads; h++) {
          const src = ((b * steps + t) * heads + h) * d;
          const dst = ((b * heads + h) * capacity + at + t) * d;
          kc.set(keys.subarray(src, src + d), dst);
          vc.set(values.subarray(src, src + d), dst);
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

  /** Marks `n` positions as filled (after a prefill). */
  setLength(n: number): void {
    this.length = n;
  }

  /** Marks one more position as filled (after a decode step wrote every layer). */
  advance(): void {
    this.length++;
  }
}
