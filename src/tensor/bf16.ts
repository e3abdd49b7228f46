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

/**
 * What a product at `precision` multiplies by: at fp32 the float32 values themselves (no copy); at bf16 every value
 * rounded to bfloat16, or bfloat16 bits widened exactly, in a new array. Float32 values are read from `values` or a
 * tensor's data, bits from a tensor stored as bfloat16.
 */
export function productOperand(values: Tensor | Float32Array, precision: Precision): Float32Array {
  const bits = values instanceof Float32Array ? null : values.bf16;
  if (bits) {
    if (precision !== 'bf16') throw new Error('a weight stored as bfloat16 needs precision bf16');
    return bf16ToF32(bits);
  }
  const data = values instanceof Float32Array ? values : values.data;
  return precision === 'bf16' ? bf16ToF32(f32ToBf16(data)) : data;
}
