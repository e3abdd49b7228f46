/**
 * bf16 compute (agents[].precision: bf16). Every product of a model's linear projections and of its language-model
 * head multiplies bfloat16 operands (fp32 values rounded to nearest even, f32ToBf16) and accumulates in fp32; its
 * output stays fp32. The backward's products are bf16 too: the fp32 gradient is rounded like the activations, as
 * PyTorch's bf16 autocast does (its backward products run in bf16). Norms, softmax, attention, residuals, the LoRA
 * adapters' rank-r products, gradient accumulation, master weights and AdamW state stay fp32. The products run on
 * oneDNN's bf16 kernel where the CPU has AMX or AVX512_BF16 (backend/kernels.ts GemmArgs); elsewhere on the fp32
 * product of the widened operands, which is exact (8 + 8 significant bits fit in 24) and so equal up to the order of
 * the sums. A frozen weight may be stored as bfloat16 bits (Tensor.bf16) and is then multiplied as stored.
 */
import type { Kernels } from '../backend/kernels.js';
import type { Tensor } from './tensor.js';

/** The precisions of a model's products. */
export const PRECISIONS = ['fp32', 'bf16'] as const;
/** fp32: float32 products (the default); bf16: operands rounded to bfloat16, fp32 accumulation (see above). */
export type Precision = (typeof PRECISIONS)[number];

/** The operands of the products of one layer: its input, its weight and the gradient of its output. */
export type OperandSlot = 'input' | 'weight' | 'grad';

/** A product's operand: float32 values (fp32), or bfloat16 bits (bf16; both operands of a product alike). */
export type ProductData = Float32Array | Uint16Array;

/**
 * One grow-only scratch of bfloat16 bits per slot that operands are rounded into, so that a pass allocates nothing per
 * product and its memory is bounded by the largest operand of each slot (memory-plan.ts).
 */
const scratch: Record<OperandSlot, Uint16Array> = {
  input: new Uint16Array(0),
  weight: new Uint16Array(0),
  grad: new Uint16Array(0),
};

/**
 * What a product at `precision` multiplies by: at fp32 the float32 values themselves (no copy); at bf16 the bits of a
 * tensor stored as bfloat16 (no copy), or every value rounded to bfloat16 in the scratch of `slot` — valid until the
 * next bf16 operand of that slot, so one product reads one operand of each slot. Float32 values are read from `values`
 * or a tensor's data, and rounded by `k` (kernels roundBf16).
 */
export function productOperand(
  k: Pick<Kernels, 'roundBf16'>,
  values: Tensor | Float32Array,
  precision: Precision,
  slot: OperandSlot,
): ProductData {
  const stored = values instanceof Float32Array ? null : values.bf16;
  if (stored && precision !== 'bf16') throw new Error('a weight stored as bfloat16 needs precision bf16');
  if (precision !== 'bf16') return values instanceof Float32Array ? values : values.data;
  if (stored) return stored;
  const data = values instanceof Float32Array ? values : values.data.subarray(0, values.size);
  if (scratch[slot].length < data.length) scratch[slot] = new Uint16Array(data.length);
  const out = scratch[slot].subarray(0, data.length);
  k.roundBf16(data, out, data.length);
  return out;
}
