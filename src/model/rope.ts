// Rotary position embedding frequencies and cos/sin tables, including transformers' "llama3" and "linear" scaling.
import type { TransformerConfig } from './hf-config.js';

/** Rotary inverse frequencies invFreq[i] = theta^(-2i/headDim), i < headDim/2, after the config's scaling. */
export function ropeInvFreq(cfg: TransformerConfig): Float64Array {
  if (cfg.position.kind !== 'rope') throw new Error(`${cfg.family} uses learned positions, not rotary embeddings`);
  if (cfg.headDim % 2 !== 0) throw new Error(`rotary embeddings need an even headDim, got ${cfg.headDim}`);
  const { theta, scaling } = cfg.position;
  const half = cfg.headDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / theta ** ((2 * i) / cfg.headDim);
  if (scaling.type === 'linear') {
    for (let i = 0; i < half; i++) inv[i] = inv[i]! / scaling.factor;
  } else if (scaling.type === 'llama3') {
    // transformers' _compute_llama3_parameters: long wavelengths are slowed by `factor`, short ones kept, and the
    // band between is interpolated smoothly in 1/wavelength.
    const { factor, lowFreqFactor, highFreqFactor, originalMaxPositions: old } = scaling;
    const lowFreqWavelen = old / lowFreqFactor;
    const highFreqWavelen = old / highFreqFactor;
    for (let i = 0; i < half; i++) {
      const f = inv[i]!;
      const wavelen = (2 * Math.PI) / f;
      if (wavelen > lowFreqWavelen) inv[i] = f / factor;
      else if (wavelen >= highFreqWavelen) {
        const smooth = (old / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
        inv[i] = (1 - smooth) * (f / factor) + smooth * f;
      }
    }
  }
  return inv;
}

/**
 * cos and sin of pos * invFreq[i], each row-major [maxPos, headDim/2]. In transformers' rotate_half convention
 * dimension i of a head pairs with i + headDim/2, and both use column i of these tables. The angle is formed as
 * transformers forms it, a float32 product of float32 operands, so the tables match its values at long positions
 * too (the float32 rounding of pos * invFreq grows with pos).
 */
export function ropeTables(cfg: TransformerConfig, maxPos: number): { cos: Float32Array; sin: Float32Array } {
  if (!Number.isInteger(maxPos) || maxPos < 0) throw new Error(`maxPos must be a non-negative integer, got ${maxPos}`);
  const inv = ropeInvFreq(cfg).map(Math.fround);
  const half = inv.length;
  const cos = new Float32Array(maxPos * half);
  const sin = new Float32Array(maxPos * half);
  for (let p = 0; p < maxPos; p++) {
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(p * inv[i]!);
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  return { cos, sin };
}
