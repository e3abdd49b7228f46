import type { BF16, GemmArgs } from './kernels.js';

/** GemmArgs with every default filled in: the form both backends compute from. */
export interface ResolvedGemm {
  transA: boolean;
  transB: boolean;
  m: number;
  n: number;
  k: number;
  alpha: number;
  beta: number;
  a: Float32Array | BF16;
  aOff: number;
  lda: number;
  b: Float32Array | BF16;
  bOff: number;
  ldb: number;
  c: Float32Array;
  cOff: number;
  ldc: number;
  batch: number;
  strideA: number;
  strideB: number;
  strideC: number;
  threads: number;
}

/** Fills the defaults of GemmArgs: leading dimensions are the stored widths, offsets 0, one product, alpha 1, beta 0. */
export function resolveGemm(g: GemmArgs): ResolvedGemm {
  const transA = g.transA ?? false;
  const transB = g.transB ?? false;
  return {
    transA,
    transB,
    m: g.m,
    n: g.n,
    k: g.k,
    alpha: g.alpha ?? 1,
    beta: g.beta ?? 0,
    a: g.a.data,
    aOff: g.a.offset ?? 0,
    lda: g.a.ld ?? (transA ? g.m : g.k),
    b: g.b.data,
    bOff: g.b.offset ?? 0,
    ldb: g.b.ld ?? (transB ? g.k : g.n),
    c: g.c.data,
    cOff: g.c.offset ?? 0,
    ldc: g.c.ld ?? g.n,
    batch: g.batch ?? 1,
    strideA: g.strideA ?? 0,
    strideB: g.strideB ?? 0,
    strideC: g.strideC ?? 0,
    threads: g.threads ?? 0,
  };
}
