/**
 * The fused decoding step of rotary, RMSNorm, gated-MLP models (Llama, Qwen2, Qwen3): the same kernels in the same
 * order as Transformer.decodeStep's general path, so the same numbers, but over the fused [in, out] weight copies
 * (inference-weights.ts) and in the cache's work buffers, so that a step allocates nothing.
 */
import type { Kernels } from '../backend/kernels.js';
import type { Tensor } from '../tensor/tensor.js';
import type { TransformerConfig } from './hf-config.js';
import type { InferenceWeights } from './inference-weights.js';
import type { KVCache } from './kv-cache.js';
import { blockNames, outerNames } from './weight-names.js';

/** What the fused step reads of a model: its config, its parameters and its rotary tables. */
export interface DecodeModel {
  readonly cfg: TransformerConfig;
  readonly params: ReadonlyMap<string, Tensor>;
  /** cos/sin tables covering positions [0, needed). */
  rotaryTables(needed: number): { cos: Float32Array; sin: Float32Array };
}

/** True when the fused step serves this model with these inference weights (every block's q/k/v and gate/up fused). */
export function fusedDecodeApplies(cfg: TransformerConfig, inf: InferenceWeights): boolean {
  return (
    cfg.position.kind === 'rope' &&
    cfg.norm.kind === 'rmsnorm' &&
    cfg.gatedMlp &&
    inf.qkv.size === cfg.layers &&
    inf.gateUp.size === cfg.layers
  );
}

/**
 * One decoding step (see Transformer.decodeStep) where fusedDecodeApplies: appends each sequence's keys and values
 * for token `ids[b]` to the cache and returns the final hidden states [B, hidden] in one of the cache's work buffers,
 * overwritten by the next step.
 */
export function fusedDecodeStep(
  model: DecodeModel,
  inf: InferenceWeights,
  k: Kernels,
  ids: Int32Array,
  cache: KVCache,
): Float32Array {
  const cfg = model.cfg;
  const weight = (name: string): Float32Array => model.params.get(`${name}.weight`)!.data;
  const { heads, kvHeads, headDim: d, hidden: dim, norm } = cfg;
  const batch = ids.length;
  const t = cache.length;
  const positions = Int32Array.from(ids, (_, b) => t - (cache.keyStart?.[b] ?? 0));
  let maxPos = 0;
  for (const p of positions) maxPos = Math.max(maxPos, p);
  const { cos, sin } = model.rotaryTables(maxPos + 1);
  const buf = (name: string, n: number): Float32Array => cache.buffer(name, n);
  const x = buf('x', batch * dim);
  const h = buf('h', batch * dim);
  const inv = buf('inv', batch * Math.max(heads, 1));
  const q = buf('q', batch * heads * d);
  const kk = buf('k', batch * kvHeads * d);
  const v = buf('v', batch * kvHeads * d);
  const att = buf('att', batch * heads * d);
  const proj = buf('proj', batch * dim);
  const outer = outerNames(cfg);
  k.embedding(model.params.get(outer.embed)!.data, ids, x, batch, dim);
  for (let i = 0; i < cfg.layers; i++) {
    const n = blockNames(cfg, i);
    const qkv = inf.qkv.get(i)!;
    const gateUp = inf.gateUp.get(i)!;
    const oT = inf.transposed.get(`${n.o}.weight`)!;
    const downT = inf.transposed.get(`${n.down}.weight`)!;
    k.rmsNorm(x, weight(n.norm1), h, inv, batch, dim, norm.eps);
    const width = qkv.widths[0] + qkv.widths[1] + qkv.widths[2];
    const fusedQkv = buf('qkv', batch * width);
    k.gemm({ m: batch, n: width, k: dim, a: { data: h }, b: { data: qkv.weight }, c: { data: fusedQkv } });
    if (qkv.bias) k.addBias(fusedQkv, qkv.bias, fusedQkv, batch, width);
    const [wq, wk] = qkv.widths;
    k.copyRows(fusedQkv, 0, width, q, 0, wq, batch, wq);
    k.copyRows(fusedQkv, wq, width, kk, 0, wk, batch, wk);
    k.copyRows(fusedQkv, wq + wk, width, v, 0, wk, batch, wk);
    let qr = q;
    let kr = kk;
    if (n.qNorm) {
      qr = buf('qn', q.length);
      kr = buf('kn', kk.length);
      k.rmsNorm(q, weight(n.qNorm), qr, inv, batch * heads, d, norm.eps);
      k.rmsNorm(kk, weight(n.kNorm!), kr, inv, batch * kvHeads, d, norm.eps);
    }
    k.rope(qr, positions, cos, sin, batch, heads, d, false);
    k.rope(kr, positions, cos, sin, batch, kvHeads, d, false);
    cache.writeStep(k, i, kr, v);
    k.attentionDecode(
      qr,
      cache.k[i]!,
      cache.v[i]!,
      att,
      batch,
      heads,
      kvHeads,
      d,
      cache.capacity,
      t + 1,
      1 / Math.sqrt(d),
      cache.keyStart ?? undefined,
    );
    projectAdd(k, att, oT, model.params.get(`${n.o}.bias`), proj, x, batch, heads * d, dim);
    k.rmsNorm(x, weight(n.norm2), h, inv, batch, dim, norm.eps);
    const width2 = batch * gateUp.width;
    const gu = buf('gateUp', 2 * width2);
    k.gemm({
      m: batch,
      n: gateUp.width,
      k: dim,
      a: { data: h },
      b: { data: gateUp.weight },
      c: { data: gu },
      batch: 2,
      strideB: dim * gateUp.width,
      strideC: width2,
    });
    const gate = gu.subarray(0, width2);
    const up = gu.subarray(width2);
    if (gateUp.bias) {
      k.addBias(gate, gateUp.bias.subarray(0, gateUp.width), gate, batch, gateUp.width);
      k.addBias(up, gateUp.bias.subarray(gateUp.width), up, batch, gateUp.width);
    }
    const act = buf('act', width2);
    k.swiglu(gate, up, act, width2);
    projectAdd(k, act, downT, model.params.get(`${n.down}.bias`), proj, x, batch, gateUp.width, dim);
  }
  const out = buf('out', batch * dim);
  k.rmsNorm(x, weight(outer.finalNorm), out, inv, batch, dim, norm.eps);
  cache.advance();
  return out;
}

/** x += a·wT (+ bias): a residual branch's output projection, through `tmp` [rows, out]. */
function projectAdd(
  k: Kernels,
  a: Float32Array,
  wT: Float32Array,
  bias: Tensor | undefined,
  tmp: Float32Array,
  x: Float32Array,
  rows: number,
  inF: number,
  outF: number,
): void {
  k.gemm({ m: rows, n: outF, k: inF, a: { data: a }, b: { data: wT }, c: { data: tmp } });
  if (bias) k.addBias(tmp, bias.data, tmp, rows, outF);
  k.axpy(1, tmp, x, rows * outF);
}
