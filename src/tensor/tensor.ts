import { takeZeroed } from './grad-pool.js';

/**
 * A dense float32 tensor: data in row-major order, a shape, and (for values that need gradients) a gradient buffer
 * allocated on first use. Views made by `reshape` share both the data and the gradient of their base. A frozen weight
 * of a bf16 model may instead hold bfloat16 bits (`bf16`) at half the memory; products widen them per use (bf16.ts).
 */
export class Tensor {
  private readonly values: Float32Array | null;
  /** Row-major bfloat16 bits of a frozen weight stored at half the size, or null for float32 values. */
  readonly bf16: Uint16Array | null;
  /** Number of elements. */
  readonly size: number;
  /** Dimensions; their product equals the number of elements. */
  readonly shape: readonly number[];
  /** Whether gradients flow into this tensor (parameters and everything computed from them). */
  readonly requiresGrad: boolean;
  private ownGrad: Float32Array | null = null;
  private readonly base: Tensor | null;

  /** `data`: float32 values, or bfloat16 bits (a frozen weight: no gradient). */
  constructor(
    data: Float32Array | Uint16Array,
    shape: readonly number[],
    requiresGrad = false,
    base: Tensor | null = null,
  ) {
    const size = shape.reduce((a, b) => a * b, 1);
    if (size !== data.length)
      throw new Error(`Tensor: shape [${shape.join(',')}] needs ${size} elements, the data has ${data.length}`);
    const bits = data instanceof Uint16Array;
    if (bits && requiresGrad) throw new Error('Tensor: bfloat16 storage is for frozen weights, without gradients');
    this.values = bits ? null : data;
    this.bf16 = bits ? data : null;
    this.size = size;
    this.shape = shape;
    this.requiresGrad = requiresGrad;
    this.base = base;
  }

  /** A tensor of zeros. */
  static zeros(shape: readonly number[], requiresGrad = false): Tensor {
    return new Tensor(new Float32Array(shape.reduce((a, b) => a * b, 1)), shape, requiresGrad);
  }

  /** Row-major float32 values; a tensor stored as bfloat16 has none (read its bits through bf16.ts). */
  get data(): Float32Array {
    if (this.values === null)
      throw new Error(
        `a [${this.shape.join(', ')}] weight is stored as bfloat16: only a bf16 product reads it (tensor/bf16.ts)`,
      );
    return this.values;
  }

  /** The gradient accumulated so far, or null before any backward pass reached this tensor. */
  get grad(): Float32Array | null {
    return this.base ? this.base.grad : this.ownGrad;
  }

  /** The gradient buffer, allocated (zero) on first use. */
  ensureGrad(): Float32Array {
    if (this.base) return this.base.ensureGrad();
    this.ownGrad ??= takeZeroed(this.data.length);
    return this.ownGrad;
  }

  /** Forgets the gradient (parameters between optimizer steps). */
  zeroGrad(): void {
    if (this.base) this.base.zeroGrad();
    else this.ownGrad?.fill(0);
  }

  /** Drops the gradient buffer so its memory can be reclaimed. */
  releaseGrad(): void {
    if (!this.base) this.ownGrad = null;
  }

  /**
   * Drops the gradient buffer and returns it (null for a view, or when there is none) for the pool: nothing may hold
   * it any more (see Tape.backward).
   */
  detachGrad(): Float32Array | null {
    if (this.base || !this.ownGrad) return null;
    const g = this.ownGrad;
    this.ownGrad = null;
    return g;
  }

  /** The same elements under another shape (same order); shares data and gradient. */
  reshape(shape: readonly number[]): Tensor {
    return new Tensor(this.bf16 ?? this.data, shape, this.requiresGrad, this.base ?? this);
  }

  /** Size of the last dimension. */
  get lastDim(): number {
    return this.shape[this.shape.length - 1] ?? 1;
  }

  /** Product of all dimensions but the last (the number of rows of a row-wise op). */
  get rows(): number {
    return this.size / Math.max(1, this.lastDim);
  }
}
