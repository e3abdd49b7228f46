// 16-bit float conversions. They are tiny bit manipulations, so no library is needed: the results are written
// through a Uint32Array view of the output so every value (subnormals, infinities, NaN payloads) is exact.

/** Converts IEEE-754 binary16 values (raw bits) to float32, exactly (every half is representable in float32). */
export function f16ToF32(src: Uint16Array, out: Float32Array = new Float32Array(src.length)): Float32Array {
  const bits = new Uint32Array(out.buffer, out.byteOffset, out.length);
  for (let i = 0; i < src.length; i++) {
    const h = src[i]!;
    const sign = (h & 0x8000) << 16;
    const exp = (h >> 10) & 0x1f;
    let mant = h & 0x3ff;
    if (exp === 0x1f) {
      bits[i] = (sign | 0x7f800000 | (mant << 13)) >>> 0;
    } else if (exp !== 0) {
      bits[i] = (sign | ((exp + 112) << 23) | (mant << 13)) >>> 0;
    } else if (mant === 0) {
      bits[i] = sign >>> 0;
    } else {
      // A half subnormal is a normal float32: shift the mantissa up until its leading 1 is the implicit bit.
      let e = 113;
      while ((mant & 0x400) === 0) {
        mant <<= 1;
        e--;
      }
      bits[i] = (sign | (e << 23) | ((mant & 0x3ff) << 13)) >>> 0;
    }
  }
  return out;
}

export { bf16ToF32, f32ToBf16 } from '../backend/bf16-bits.js';

/**
 * Rounds float32 values to IEEE-754 binary16 bits, to nearest with ties to even; values past 65504 become ±Infinity,
 * tiny ones subnormals or ±0; NaN stays a quiet NaN.
 */
export function f32ToF16(src: Float32Array, out: Uint16Array = new Uint16Array(src.length)): Uint16Array {
  const bits = new Uint32Array(src.buffer, src.byteOffset, src.length);
  for (let i = 0; i < src.length; i++) {
    const b = bits[i]!;
    const sign = (b >>> 16) & 0x8000;
    const exp = (b >>> 23) & 0xff;
    const mant = b & 0x7fffff;
    if (exp === 0xff) out[i] = sign | 0x7c00 | (mant ? 0x200 : 0);
    else if (exp > 142) out[i] = sign | 0x7c00;
    else if (exp > 112) {
      // Normal half: drop 13 mantissa bits, rounding to nearest even (a carry into the exponent is still right).
      const h = ((exp - 112) << 10) | (mant >>> 13);
      const rest = mant & 0x1fff;
      out[i] = sign | (h + (rest > 0x1000 || (rest === 0x1000 && h & 1) ? 1 : 0));
    } else if (exp < 102) out[i] = sign;
    else {
      // Subnormal half: the implicit 1 made explicit, shifted right by 126 − exp, rounded to nearest even.
      const m = mant | 0x800000;
      const shift = 126 - exp;
      const h = m >>> shift;
      const rest = m & ((1 << shift) - 1);
      const half = 1 << (shift - 1);
      out[i] = sign | (h + (rest > half || (rest === half && h & 1) ? 1 : 0));
    }
  }
  return out;
}
