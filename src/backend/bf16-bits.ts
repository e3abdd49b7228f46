// bfloat16 conversions of raw bits, the TypeScript definition of what a bf16 product rounds its operands to (the
// native backend's roundBf16 computes the same bits). Written through a Uint32Array view so every value (subnormals,
// infinities, NaN payloads) is exact.

/** Converts bfloat16 values (raw bits) to float32, exactly: a bfloat16 is the top half of a float32. */
export function bf16ToF32(src: Uint16Array, out: Float32Array = new Float32Array(src.length)): Float32Array {
  const bits = new Uint32Array(out.buffer, out.byteOffset, out.length);
  for (let i = 0; i < src.length; i++) bits[i] = (src[i]! << 16) >>> 0;
  return out;
}

/** Rounds float32 values to bfloat16 bits, to nearest with ties to even (as PyTorch does); NaN stays a quiet NaN. */
export function f32ToBf16(src: Float32Array, out: Uint16Array = new Uint16Array(src.length)): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < src.length; i++) {
    const b = bits[i]!;
    if ((b & 0x7f800000) === 0x7f800000 && (b & 0x7fffff) !== 0) out[i] = (b >>> 16) | 0x40;
    else out[i] = (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
  }
  return out;
}
