/**
 * bf16 compute (agents[].precision: bf16). Every product of a model's linear projections and of its language-model
 * head rounds both operands to bfloat16 (round to nearest even, f32ToBf16) and accumulates in fp32; its output stays
 * fp32. Norms, softmax, attention, residuals, the LoRA adapters' rank-r products, gradients, master weights and AdamW
 * state stay fp32. A bf16 × bf16 product is exact in fp32 (8 + 8 significant bits fit in 24), so widening the rounded
 * operands and calling the fp32 sgemm computes what oneDNN's bf16 matmul with fp32 accumulation computes, up to the
 * order of the sums: a hardware kernel (AMX, AVX512_BF16) can replace `productOperand`'s widening behind this
 * interface. The backward multiplies the fp32 gradient by the same rounded operands (the rounding passes gradients
 * straight through). A frozen weight may be stored as bfloat16 bits (Tensor.bf16), widened per product.
 */
import { bf16ToF32, f32ToBf16 } from './half.js';
import type { Tensor } from './tensor.js';

/** The precisions of a model's products. */
export const PRECISIONS = ['fp32', 'bf16'] as const;
/** fp32: float32 products (the default); bf16: operands rounded to bfloat16, fp32 accumulation (see above). */
export type Precision = (typeof PRECISIONS)[number];

/** The two operands of one product: the activations (or gradients' partner) and the weight. */
export type OperandSlot = 'input' | 'weight';

/**
 * One grow-only fp32 scratch per slot that bf16 operands are widened into, so that a pass allocates nothing per
 * product (a widened head is 1 GiB at the 1B shape) and its memory is bounded by the largest product (memory-plan.ts).
 */
const scratch: Record<OperandSlot, Float32Array> = { input: new Float32Array(0), weight: new Float32Array(0) };
/** Elements rounded per step through a small bfloat16 buffer (rounding needs no full-size copy). */
const ROUND_CHUNK = 4096;
const bits = new Uint16Array(ROUND_CHUNK);

/**
 * What a product at `precision` multiplies by: at fp32 the float32 values themselves (no copy); at bf16 every value
 * rounded to bfloat16, or bfloat16 bits widened exactly, in the scratch of `slot` — valid until the next bf16 operand
 * of that slot, so one product reads one operand of each slot. Float32 values are read from `values` or a tensor's
 * data, bits from a tensor stored as bfloat16.
 */
export function productOperand(values: Tensor | Float32Array, precision: Precision, slot: OperandSlot): Float32Array {
  const stored = values instanceof Float32Array ? null : values.bf16;
  if (stored && precision !== 'bf16') throw new Error('a weight stored as bfloat16 needs precision bf16');
  if (precision !== 'bf16') return values instanceof Float32Array ? values : values.data;
  const n = values instanceof Float32Array ? values.length : values.size;
  if (scratch[slot].length < n) scratch[slot] = new Float32Array(n);
  const out = scratch[slot].subarray(0, n);
  if (stored) return bf16ToF32(stored, out);
  const data = values instanceof Float32Array ? values : values.data;
  for (let i = 0; i < n; i += ROUND_CHUNK) {
    const m = Math.min(ROUND_CHUNK, n - i);
    bf16ToF32(f32ToBf16(data.subarray(i, i + m), bits.subarray(0, m)), out.subarray(i, i + m));
  }
  return out;
}
