import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveGemm } from './gemm-args.js';
import type { AttentionShape, F32, GemmArgs, I32, Kernels } from './kernels.js';

/** Functions the addon exports beyond the Kernels contract: machine measurements and BLAS details. */
export interface NativeExtras {
  /** Measured single-precision FMA throughput of a tight register-only loop, in GFLOP/s, on `threads` threads. */
  fmaPeak(threads: number, milliseconds: number): number;
  /** Measured memory bandwidth of a streaming read+write over `megabytes` MB, in GB/s, on `threads` threads. */
  memoryBandwidth(threads: number, megabytes: number): number;
  /** Upper bound on threads used by any kernel (HACRL_THREADS or the processor count). */
  maxThreads(): number;
  /** BLAS libraries that could be loaded on this machine, e.g. ["onednn", "blis", "openblas"]. */
  availableBlas(): string[];
  /** Switches the matrix-multiply library ("onednn" | "blis" | "openblas"); throws when it cannot be loaded. */
  selectBlas(name: string): string;
}

export type NativeKernels = Kernels & NativeExtras;

const here = dirname(fileURLToPath(import.meta.url));

/**
 * The addon's path: HACRL_ADDON_PATH when set (a prebuilt addon elsewhere), else build/Release of the package root
 * (two or three levels above this file, compiled or not).
 */
function addonPath(): string | null {
  const override = process.env.HACRL_ADDON_PATH;
  if (override) return existsSync(override) ? override : null;
  for (const up of ['../..', '../../..']) {
    const p = join(here, up, 'build', 'Release', 'hacrl_native.node');
    if (existsSync(p)) return p;
  }
  return null;
}

/** The addon's raw exports: the Kernels methods with positional arguments, plus gemmRaw and the extras. */
type Addon = Record<string, (...args: unknown[]) => unknown>;

/** Adapts the addon's positional exports to the Kernels contract (gemm and attention take objects there). */
function wrap(addon: Addon, blas: string): NativeKernels {
  const k = Object.assign(Object.create(null) as object, addon) as unknown as NativeKernels;
  return Object.assign(k, {
    name: 'native',
    blas,
    gemm(args: GemmArgs): void {
      const g = resolveGemm(args);
      addon.gemmRaw!(
        g.transA,
        g.transB,
        g.m,
        g.n,
        g.k,
        g.alpha,
        g.a,
        g.aOff,
        g.lda,
        g.b,
        g.bOff,
        g.ldb,
        g.beta,
        g.c,
        g.cOff,
        g.ldc,
        g.batch,
        g.strideA,
        g.strideB,
        g.strideC,
        g.threads,
      );
    },
    attention(q: F32, kk: F32, v: F32, out: F32, lse: F32, s: AttentionShape, keyStart?: I32): void {
      addon.attention!(
        q,
        kk,
        v,
        out,
        lse,
        s.batch,
        s.seqLen,
        s.queryHeads,
        s.kvHeads,
        s.headDim,
        attentionScale(s),
        keyStart,
      );
    },
    attentionBackward(
      dOut: F32,
      q: F32,
      kk: F32,
      v: F32,
      out: F32,
      lse: F32,
      dq: F32,
      dk: F32,
      dv: F32,
      s: AttentionShape,
      keyStart?: I32,
    ): void {
      addon.attentionBackward!(
        dOut,
        q,
        kk,
        v,
        out,
        lse,
        dq,
        dk,
        dv,
        s.batch,
        s.seqLen,
        s.queryHeads,
        s.kvHeads,
        s.headDim,
        attentionScale(s),
        keyStart,
      );
    },
  });
}

/** The scale of q·k: the shape's own or 1/sqrt(headDim). */
export function attentionScale(s: AttentionShape): number {
  return s.scale ?? 1 / Math.sqrt(s.headDim);
}

/** Loads the native addon, or returns the reason it could not be loaded. */
export function loadNative(): { kernels: NativeKernels } | { error: string } {
  const path = addonPath();
  if (!path)
    return {
      error: `${process.env.HACRL_ADDON_PATH ?? 'build/Release/hacrl_native.node'} not found (run \`npm run build:native\`)`,
    };
  try {
    const addon = createRequire(import.meta.url)(path) as Addon;
    if (!addon.init || !addon.gemmRaw) return { error: 'the addon is incomplete; rebuild with `npm run build:native`' };
    return { kernels: wrap(addon, addon.init() as string) };
  } catch (e) {
    return { error: (e as Error).message };
  }
}
