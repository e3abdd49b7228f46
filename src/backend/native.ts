import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { backgroundCores, cpuTicks } from '../util/cpu-load.js';
import { resolveGemm, type ResolvedGemm } from './gemm-args.js';
import {
  KERNEL_ARGS,
  type ArgSpec,
  type AttentionShape,
  type GemmArgs,
  type KernelName,
  type Kernels,
} from './kernels.js';

/** The reproducible kernel mode (docs/reproducible.md) as the environment sets it. */
export interface ReproducibleMode {
  /** HACRL_REPRODUCIBLE=1: every product and reduction sums in one fixed order, the same bits on any CPU. */
  on: boolean;
  /** HACRL_FORCE_AVX2=1: the native backend runs the AVX2 build of those kernels even where AVX-512 exists. */
  forceAvx2: boolean;
}

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
  /**
   * Switches the kernels to their reproducible twins (native/repro.h), the AVX2 build with `forceAvx2`, or back to the
   * fast ones; returns the build's instruction set ("" when off). reproducibleMode() decides at load; tests switch.
   */
  setReproducible(on: boolean, forceAvx2: boolean): string;
  /**
   * Installs the addon's SIGINT/SIGTERM handler (native/signals.c), chained to the one installed before: the first
   * signal writes "hacrl: SIGNAL" + `first` to standard error at once and is kept for pendingStopSignal; the second
   * writes "hacrl: SIGNAL" + `again` and ends the process with status 128 + its number.
   */
  watchStopSignals(first: string, again: string): void;
  /** Puts back the handlers watchStopSignals found. */
  unwatchStopSignals(): void;
  /** The number of the first stop signal since watchStopSignals (2 SIGINT, 15 SIGTERM), 0 while none came. */
  pendingStopSignal(): number;
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

/** The addon's export of kernel `name`: gemm's positional form is exported as gemmRaw. */
const exportName = (name: KernelName): string => (name === 'gemm' ? 'gemmRaw' : name);

/** gemmRaw's arguments in the addon's order (native/addon_blas.c). */
function gemmRawArgs(g: ResolvedGemm): unknown[] {
  return [
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
  ];
}

/** The positional values the addon takes for one argument: a structured one (GemmArgs, AttentionShape) flattened. */
function flatten(spec: ArgSpec, value: unknown): unknown[] {
  if (spec.kind === 'gemm') return gemmRawArgs(resolveGemm(value as GemmArgs));
  if (spec.kind !== 'attention') return [value];
  const s = value as AttentionShape;
  return [s.batch, s.seqLen, s.queryHeads, s.kvHeads, s.headDim, attentionScale(s)];
}

/**
 * Adapts the addon's positional exports to the Kernels contract: kernels that take a structured argument (KERNEL_ARGS)
 * get it flattened; the others are the addon's functions themselves.
 */
function wrap(addon: Addon, blas: string, bf16: string): NativeKernels {
  const k = Object.assign(Object.create(null) as object, addon, {
    name: 'native',
    blas,
    bf16,
  }) as unknown as NativeKernels;
  for (const [name, specs] of Object.entries(KERNEL_ARGS) as [KernelName, ArgSpec[]][]) {
    if (!specs.some((spec) => spec.kind === 'gemm' || spec.kind === 'attention')) continue;
    const raw = addon[exportName(name)]!;
    Object.assign(k, {
      [name]: (...values: unknown[]) => raw(...specs.flatMap((spec, i) => flatten(spec, values[i]))),
    });
  }
  return k;
}

/** The scale of q·k: the shape's own or 1/sqrt(headDim). */
export function attentionScale(s: AttentionShape): number {
  return s.scale ?? 1 / Math.sqrt(s.headDim);
}

/**
 * libgomp's idle threads spin about 300,000 pause loops (milliseconds) before they sleep. On an idle machine that
 * bridges the gaps between kernels; beside another busy process a spinning thread holds a core the other needs and
 * every barrier waits for a descheduled thread. Measured on a 2-core machine at 2 threads (docs/benchmarks.md,
 * "OpenMP wait policy"): beside a one-core busy loop, 10M decoding at batch 16 ran 1,756 tokens/s
 * spinning and 2,912 with OMP_WAIT_POLICY=PASSIVE; beside another training process, bench:rl steps took 16–19 s
 * spinning and 1.7 s passive; on the idle machine passive cost 23% (3,884 against 5,040 tokens/s). So the policy
 * follows the machine when the addon loads (libgomp reads it then, once): passive when other processes keep at least
 * PASSIVE_CORES cores busy over a SAMPLE_MS sample, else libgomp's default. A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT
 * wins.
 */
const PASSIVE_CORES = 0.5;
const SAMPLE_MS = 50;

let waitPolicy = 'not loaded';

/** The OpenMP wait policy the addon was loaded with, and why (benchmarks print it). */
export function openmpWaitPolicy(): string {
  return waitPolicy;
}

/**
 * Runs `load` (which loads libgomp with the addon) under the wait policy above; the variable is removed afterwards, so
 * child processes (PyTorch in the benchmarks) see the environment as it was.
 */
function withWaitPolicy<T>(load: () => T): T {
  const { OMP_WAIT_POLICY: policy, GOMP_SPINCOUNT: spin } = process.env;
  if (policy !== undefined || spin !== undefined) {
    waitPolicy = `as set (OMP_WAIT_POLICY=${policy ?? 'unset'}, GOMP_SPINCOUNT=${spin ?? 'unset'})`;
    return load();
  }
  const before = cpuTicks();
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, SAMPLE_MS);
  const busy = backgroundCores(before, cpuTicks());
  if (busy === null || busy < PASSIVE_CORES) {
    waitPolicy = `libgomp default: spin, then sleep (${busy ?? 'unknown'} cores busy at start)`;
    return load();
  }
  waitPolicy = `passive (${busy} cores busy at start)`;
  process.env.OMP_WAIT_POLICY = 'PASSIVE';
  try {
    return load();
  } finally {
    delete process.env.OMP_WAIT_POLICY;
  }
}

/**
 * Loads the native addon, or returns the reason it could not be loaded; with `reproducible.on` its kernels are the
 * reproducible ones (native/repro.h), whose description replaces the BLAS library's.
 */
export function loadNative(
  reproducible: ReproducibleMode = { on: false, forceAvx2: false },
): { kernels: NativeKernels } | { error: string } {
  const path = addonPath();
  if (!path)
    return {
      error: `${process.env.HACRL_ADDON_PATH ?? 'build/Release/hacrl_native.node'} not found (run \`npm run build:native\`)`,
    };
  try {
    const addon = withWaitPolicy(() => createRequire(import.meta.url)(path) as Addon);
    if (!addon.init || !addon.gemmRaw) return { error: 'the addon is incomplete; rebuild with `npm run build:native`' };
    // An addon built before a kernel was added would otherwise fail mid-run with "x is not a function".
    const missing = [
      ...(Object.keys(KERNEL_ARGS) as KernelName[]).map(exportName),
      'setReproducible',
      'watchStopSignals',
    ].filter((name) => typeof addon[name] !== 'function');
    if (missing.length > 0)
      return {
        error: `${path} is older than the code (no ${missing.join(', ')}); rebuild with \`npm run build:native\``,
      };
    const bf16 = addon.bf16Native?.()
      ? 'oneDNN bf16 kernel (AMX or AVX512_BF16), fp32 accumulation'
      : 'emulated: fp32 products of the widened bf16 operands (no oneDNN bf16 kernel on this CPU)';
    const blas = addon.init() as string;
    if (!reproducible.on) return { kernels: wrap(addon, blas, bf16) };
    const isa = addon.setReproducible!(true, reproducible.forceAvx2) as string;
    const described = `reproducible: fixed-order float64 sums, ${isa} build (no BLAS)`;
    return { kernels: wrap(addon, described, 'reproducible: fp32 products of the widened bf16 operands') };
  } catch (e) {
    return { error: (e as Error).message };
  }
}
