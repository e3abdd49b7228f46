/** The one check that weights are finite, used wherever weights are loaded, saved, merged or exported. */

/** Bits of a 16-bit float's exponent; all set is NaN or ±Infinity. */
const EXPONENT = { bf16: 0x7f80, f16: 0x7c00 } as const;

/**
 * Throws naming the tensor and `source` when a weight holds NaN or ±Infinity (diverged, corrupt, or beyond a 16-bit
 * type's range): float32 values, or 16-bit floats of type `half` (default bfloat16).
 */
export function checkFinite(
  name: string,
  data: Float32Array | Uint16Array,
  source: string,
  half: keyof typeof EXPONENT = 'bf16',
): void {
  let bad = 0;
  if (data instanceof Uint16Array) {
    const mask = EXPONENT[half];
    for (let i = 0; i < data.length; i++) if ((data[i]! & mask) === mask) bad++;
  } else for (let i = 0; i < data.length; i++) if (!Number.isFinite(data[i]!)) bad++;
  if (bad > 0)
    throw new Error(`${source}: tensor "${name}" has ${bad} of ${data.length} values that are NaN or infinite`);
}
