/**
 * The [in, out] weight copies inference passes multiply by (see Transformer.withInferenceWeights): the BLAS runs the
 * plain product 2–4× faster than the transposed one when there are few rows (decoding). Projections that read the
 * same input are fused into one matrix: q, k and v side by side ([in, q+k+v], one product), gate and up one after the
 * other ([2, in, I], one batched product), so a decode step makes two library calls where it made five.
 */
import { splitColumns, swiglu } from '../tensor/ops.js';
import type { Ctx } from '../tensor/tape.js';
import { Tensor } from '../tensor/tensor.js';
import type { TransformerConfig } from './hf-config.js';
import { blockNames, lookupOnlyTables } from './weight-names.js';

/** q, k and v of one block as one [in, q+k+v] matrix, with their biases side by side when they have them. */
export interface FusedQkv {
  weight: Float32Array;
  bias: Float32Array | null;
  /** Output widths of q, k and v. */
  widths: [number, number, number];
}

/** gate and up of one block stacked as [2, in, I]: gate's [in, I] copy, then up's. */
export interface FusedGateUp {
  weight: Float32Array;
  /** gate's bias then up's, [2, I], when the MLP has biases. */
  bias: Float32Array | null;
  /** I, the width of each. */
  width: number;
}

/** Every [in, out] copy of one model, by parameter name, and the fused ones by block. */
export interface InferenceWeights {
  /** Transposed copies of 2-D weights by parameter name (the head and the projections that are not fused). */
  transposed: Map<string, Float32Array>;
  qkv: Map<number, FusedQkv>;
  gateUp: Map<number, FusedGateUp>;
}

/** Tile edge of the blocked transpose: a 32×32 tile of floats (4 KiB) is read and written within L1. */
const TILE = 32;

/**
 * dst[c·ld + offset + r] = src[r·cols + c] for r < rows, c < cols: the transpose of a row-major [rows, cols] matrix
 * written as columns offset.. of a row-major [cols, ld] one, tile by tile so neither side strides through memory.
 */
export function transposeInto(
  src: Float32Array,
  rows: number,
  cols: number,
  dst: Float32Array,
  ld = rows,
  offset = 0,
): void {
  for (let r0 = 0; r0 < rows; r0 += TILE) {
    const r1 = Math.min(rows, r0 + TILE);
    for (let c0 = 0; c0 < cols; c0 += TILE) {
      const c1 = Math.min(cols, c0 + TILE);
      for (let c = c0; c < c1; c++) {
        const row = c * ld + offset;
        for (let r = r0; r < r1; r++) dst[row + r] = src[r * cols + c]!;
      }
    }
  }
}

/** The [in, out] copy of an [out, in] weight. */
export function transposed(w: Tensor): Float32Array {
  const [rows, cols] = w.shape as [number, number];
  const out = new Float32Array(w.size);
  transposeInto(w.data, rows, cols, out);
  return out;
}

/** Weights side by side: [in, Σ out] from [out_i, in] matrices. */
export function fuseColumns(weights: readonly Tensor[]): Float32Array {
  const inF = weights[0]!.shape[1]!;
  const total = weights.reduce((n, w) => n + w.shape[0]!, 0);
  const out = new Float32Array(inF * total);
  let offset = 0;
  for (const w of weights) {
    transposeInto(w.data, w.shape[0]!, inF, out, total, offset);
    offset += w.shape[0]!;
  }
  return out;
}

/** Biases concatenated in order, or null when none of the projections has one (all or none do in every family). */
export function concatBiases(biases: readonly (Tensor | undefined)[]): Float32Array | null {
  if (biases.some((b) => b === undefined)) return null;
  const out = new Float32Array(biases.reduce((n, b) => n + b!.size, 0));
  let offset = 0;
  for (const b of biases) {
    out.set(b!.data, offset);
    offset += b!.size;
  }
  return out;
}

/** Builds the [in, out] copies of a model's parameters, fusing each block's q/k/v and gate/up where it has them. */
export function buildInferenceWeights(cfg: TransformerConfig, params: ReadonlyMap<string, Tensor>): InferenceWeights {
  const p = (name: string): Tensor => params.get(name)!;
  const fusedNames = new Set<string>();
  const qkv = new Map<number, FusedQkv>();
  const gateUp = new Map<number, FusedGateUp>();
  for (let i = 0; i < cfg.layers; i++) {
    const n = blockNames(cfg, i);
    if (n.q && n.k && n.v) {
      const names = [n.q, n.k, n.v];
      const ws = names.map((m) => p(`${m}.weight`));
      qkv.set(i, {
        weight: fuseColumns(ws),
        bias: concatBiases(names.map((m) => params.get(`${m}.bias`))),
        widths: ws.map((w) => w.shape[0]!) as [number, number, number],
      });
      for (const m of names) fusedNames.add(`${m}.weight`);
    }
    if (n.gate && cfg.gatedMlp) {
      const [g, u] = [p(`${n.gate}.weight`), p(`${n.up}.weight`)];
      const [width, inF] = g.shape as [number, number];
      const weight = new Float32Array(2 * g.size);
      transposeInto(g.data, width, inF, weight);
      transposeInto(u.data, width, inF, weight.subarray(g.size));
      const bias = concatBiases([params.get(`${n.gate}.bias`), params.get(`${n.up}.bias`)]);
      gateUp.set(i, { weight, bias, width });
      fusedNames.add(`${n.gate}.weight`).add(`${n.up}.weight`);
    }
  }
  const copies = new Map<string, Float32Array>();
  const lookupOnly = lookupOnlyTables(cfg);
  for (const [name, t] of params) {
    if (t.shape.length !== 2 || lookupOnly.has(name) || fusedNames.has(name)) continue;
    copies.set(name, transposed(t));
  }
  return { transposed: copies, qkv, gateUp };
}

/**
 * Where the [in, out] copy of the 2-D weight `name` (an [out, in] parameter with `outF` rows) lives in `iw`: its
 * array, the leading dimension of its rows and the offset of its first element (a fused copy holds it beside its
 * siblings).
 */
export function copyLocation(
  cfg: TransformerConfig,
  iw: InferenceWeights,
  name: string,
  outF: number,
): { data: Float32Array; ld: number; offset: number } {
  const plain = iw.transposed.get(name);
  if (plain) return { data: plain, ld: outF, offset: 0 };
  for (let i = 0; i < cfg.layers; i++) {
    const n = blockNames(cfg, i);
    const qkv = iw.qkv.get(i);
    if (qkv) {
      const total = qkv.widths[0] + qkv.widths[1] + qkv.widths[2];
      const at = [n.q, n.k, n.v].findIndex((m) => `${m}.weight` === name);
      if (at >= 0) return { data: qkv.weight, ld: total, offset: qkv.widths.slice(0, at).reduce((a, b) => a + b, 0) };
    }
    const gu = iw.gateUp.get(i);
    if (gu && (name === `${n.gate}.weight` || name === `${n.up}.weight`))
      return { data: gu.weight, ld: gu.width, offset: name === `${n.up}.weight` ? gu.weight.length / 2 : 0 };
  }
  throw new Error(`no inference copy of "${name}"`);
}

/** q, k and v of the rows h from one product with the fused [in, q+k+v] copy (no gradients). */
export function qkvProduct(ctx: Ctx, h: Tensor, f: FusedQkv): [Tensor, Tensor, Tensor] {
  const width = f.widths[0] + f.widths[1] + f.widths[2];
  const rows = h.rows;
  const y = ctx.arena?.buffer(rows * width) ?? new Float32Array(rows * width);
  ctx.k.gemm({ m: rows, n: width, k: h.lastDim, a: { data: h.data }, b: { data: f.weight }, c: { data: y } });
  if (f.bias) ctx.k.addBias(y, f.bias, y, rows, width);
  return splitColumns(ctx, new Tensor(y, [rows, width]), f.widths) as [Tensor, Tensor, Tensor];
}

/** silu(gate)·up of the rows h from one batched product with the stacked [2, in, I] copy (no gradients). */
export function gateUpProduct(ctx: Ctx, h: Tensor, f: FusedGateUp): Tensor {
  const rows = h.rows;
  const n = rows * f.width;
  const y = ctx.arena?.buffer(2 * n) ?? new Float32Array(2 * n);
  ctx.k.gemm({
    m: rows,
    n: f.width,
    k: h.lastDim,
    a: { data: h.data },
    b: { data: f.weight },
    c: { data: y },
    batch: 2,
    strideB: h.lastDim * f.width,
    strideC: n,
  });
  const gate = y.subarray(0, n);
  const up = y.subarray(n);
  if (f.bias) {
    ctx.k.addBias(gate, f.bias.subarray(0, f.width), gate, rows, f.width);
    ctx.k.addBias(up, f.bias.subarray(f.width), up, rows, f.width);
  }
  return swiglu(ctx, new Tensor(gate, [rows, f.width]), new Tensor(up, [rows, f.width]));
}
