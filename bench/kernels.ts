/**
 * `npm run bench:kernels [-- --json] [-- --quick]`: the compute engine against this machine's own limits, measured in
 * one run — the FMA peak and memory bandwidth (measured here, by the addon), sgemm GFLOP/s for the shapes a
 * transformer step uses on 1 and 2 threads, GB/s of the fused kernels, every loadable BLAS library side by side, and
 * the pure-TypeScript backend on the same calls. With --json the last line is one JSON object.
 */
import { cpus } from 'node:os';
import type { Kernels } from '../src/backend/kernels.js';
import { nativeBackend, nativeLoadError } from '../src/backend/select.js';
import { typescriptKernels } from '../src/backend/typescript.js';
import { machinePeak, peakLine } from './peak.js';
import { openmpWaitPolicy } from '../src/backend/native.js';
import { shapeConfig } from '../src/model/shapes.js';

const args = new Set(process.argv.slice(2));
const json = args.has('--json');
const quick = args.has('--quick');
const log = (s: string): void => {
  if (!json) console.log(s);
};

/** Best seconds per call of fn over a few timed batches (after a warm-up call). */
function time(fn: () => void, budgetMs = quick ? 60 : 250): number {
  fn();
  let best = Infinity;
  for (let batch = 0; batch < 3; batch++) {
    let calls = 0;
    const t0 = performance.now();
    let t = t0;
    do {
      fn();
      calls++;
      t = performance.now();
    } while (t - t0 < budgetMs / 3);
    best = Math.min(best, (t - t0) / 1e3 / calls);
  }
  return best;
}

function filled(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    a[i] = (s / 4294967296 - 0.5) * 2;
  }
  return a;
}

interface GemmShape {
  name: string;
  m: number;
  n: number;
  k: number;
}

const shapes: GemmShape[] = [
  { name: '256³', m: 256, n: 256, k: 256 },
  { name: '1024³', m: 1024, n: 1024, k: 1024 },
  { name: 'decode [64×512]·[512×2048]', m: 64, n: 2048, k: 512 },
  { name: 'logits [512×512]·[512×32000]', m: 512, n: 32000, k: 512 },
];

function gemmGflops(k: Kernels, s: GemmShape, threads: number): number {
  const a = filled(s.m * s.k, 1);
  const b = filled(s.k * s.n, 2);
  const c = new Float32Array(s.m * s.n);
  const secs = time(() => k.gemm({ m: s.m, n: s.n, k: s.k, a: { data: a }, b: { data: b }, c: { data: c }, threads }));
  return (2 * s.m * s.n * s.k) / secs / 1e9;
}

interface FusedCase {
  name: string;
  /** Bytes a kernel must move at the least (each input read once, each output written once). */
  bytes: number;
  run: (k: Kernels) => void;
}

/** Sizes are chosen so every array exceeds the 32 MB L3 cache: the GB/s compare with DRAM bandwidth. */
function fusedCases(): FusedCase[] {
  const rows = 16384;
  const dim = 1024;
  const x = filled(rows * dim, 3);
  const w = filled(dim, 4);
  const b = filled(dim, 5);
  const out = new Float32Array(rows * dim);
  const r1 = new Float32Array(rows);
  const r2 = new Float32Array(rows);
  const vocabRows = 1024;
  const vocab = 32000;
  const logits = filled(vocabRows * vocab, 6);
  const targets = Int32Array.from({ length: vocabRows }, (_, i) => (i * 131) % vocab);
  const lp = new Float32Array(vocabRows);
  const lse = new Float32Array(vocabRows);
  const n = 1 << 24;
  const g = filled(n, 7);
  const u = filled(n, 8);
  const y = new Float32Array(n);
  const p = filled(n, 9);
  const m = new Float32Array(n);
  const v = new Float32Array(n);
  const [batch, heads, headDim, cap] = [16, 8, 64, 1024];
  const q = filled(batch * heads * headDim, 10);
  const kc = filled(batch * heads * cap * headDim, 11);
  const vc = filled(batch * heads * cap * headDim, 12);
  const att = new Float32Array(batch * heads * headDim);
  const f = 4;
  return [
    {
      name: `rmsNorm [${rows}×${dim}]`,
      bytes: 2 * f * rows * dim,
      run: (k) => k.rmsNorm(x, w, out, r1, rows, dim, 1e-6),
    },
    {
      name: `layerNorm [${rows}×${dim}]`,
      bytes: 2 * f * rows * dim,
      run: (k) => k.layerNorm(x, w, b, out, r1, r2, rows, dim, 1e-5),
    },
    { name: `softmax [${rows}×${dim}]`, bytes: 2 * f * rows * dim, run: (k) => k.softmax(x, out, rows, dim) },
    {
      name: `gatherLogProbs [${vocabRows}×${vocab}]`,
      bytes: f * vocabRows * vocab,
      run: (k) => k.gatherLogProbs(logits, targets, lp, lse, vocabRows, vocab),
    },
    { name: `swiglu [${n}]`, bytes: 3 * f * n, run: (k) => k.swiglu(g, u, y, n) },
    { name: `gelu [${n}]`, bytes: 2 * f * n, run: (k) => k.gelu(g, y, n) },
    { name: `adamw [${n} params]`, bytes: 7 * f * n, run: (k) => k.adamw(p, g, m, v, n, 1e-9, 0.9, 0.999, 1e-8, 0, 1) },
    {
      name: `attentionDecode [B=${batch},H=${heads},D=${headDim},L=${cap}]`,
      bytes: 2 * f * batch * heads * cap * headDim,
      run: (k) => k.attentionDecode(q, kc, vc, att, batch, heads, heads, headDim, cap, cap, 0.125),
    },
  ];
}

function attentionTraining(k: Kernels): { forward: number; backward: number } {
  const s = { batch: 8, seqLen: 256, queryHeads: 8, kvHeads: 8, headDim: 64 };
  const size = s.batch * s.seqLen * s.queryHeads * s.headDim;
  const [q, kk, v, dOut] = [filled(size, 13), filled(size, 14), filled(size, 15), filled(size, 16)];
  const out = new Float32Array(size);
  const lse = new Float32Array(s.batch * s.queryHeads * s.seqLen);
  const [dq, dk, dv] = [new Float32Array(size), new Float32Array(size), new Float32Array(size)];
  // Causal: half of the T² score matrix; two matmuls forward (QKᵀ, PV), four backward (plus the recomputed QKᵀ).
  const half = (s.batch * s.queryHeads * s.seqLen * s.seqLen * s.headDim) / 2;
  const fwd = time(() => k.attention(q, kk, v, out, lse, s));
  const bwd = time(() => k.attentionBackward(dOut, q, kk, v, out, lse, dq, dk, dv, s));
  return { forward: (4 * half) / fwd / 1e9, backward: (10 * half) / bwd / 1e9 };
}

const round = (x: number, d = 1): number => Number(x.toFixed(d));

/** Rows of the bf16 decode products timed: one sequence, a few, the decode kernel's most (16), an RL batch (32). */
const DECODE_ROWS = [1, 4, 16, 32];

/**
 * bf16 products of decode steps with the weights streaming from memory, as in a model: the projections of every layer
 * of the qwen2.5-0.5b shape (fused q/k/v, o, fused gate/up, down; 716 MB of bfloat16, more than any L3 here) by
 * `rows` activation rows, each layer's weights distinct. Per row count: milliseconds per step, GFLOP/s, weight GB/s.
 */
function decodeProducts(k: Kernels): { rows: number; ms: number; gflops: number; gbs: number }[] {
  const cfg = shapeConfig('qwen2.5-0.5b');
  const d = cfg.hidden;
  const shapes = [
    [(cfg.heads + 2 * cfg.kvHeads) * cfg.headDim, d],
    [d, cfg.heads * cfg.headDim],
    [2 * cfg.intermediate, d],
    [d, cfg.intermediate],
  ] as const;
  const bits = (n: number, seed: number): Uint16Array => {
    // Bit patterns of values in [1, 2) and their negatives: finite, varied, no subnormals.
    const u = new Uint16Array(n);
    for (let i = 0; i < n; i++) u[i] = ((Math.imul(i + seed, 0x9e3779b1) >>> 16) & 0x807f) | 0x3f80;
    return u;
  };
  const layers = Array.from({ length: cfg.layers }, (_, l) =>
    shapes.map(([n, kk], j) => ({ n, k: kk, w: bits(n * kk, l * 4 + j) })),
  );
  const bytes = layers.flat().reduce((t, p) => t + 2 * p.n * p.k, 0);
  return DECODE_ROWS.map((rows) => {
    const x = bits(rows * Math.max(...shapes.map(([, kk]) => kk)), 7);
    const c = new Float32Array(rows * Math.max(...shapes.map(([n]) => n)));
    const step = (): void => {
      for (const p of layers.flat())
        k.gemm({ m: rows, n: p.n, k: p.k, transB: true, a: { data: x }, b: { data: p.w }, c: { data: c } });
    };
    const seconds = time(step, quick ? 300 : 1500);
    return {
      rows,
      ms: round(seconds * 1e3),
      gflops: round((2 * rows * (bytes / 2)) / seconds / 1e9),
      gbs: round(bytes / seconds / 1e9),
    };
  });
}

function main(): void {
  const native = nativeBackend();
  if (!native) {
    console.error(`bench:kernels needs the native addon: ${nativeLoadError()}`);
    process.exit(1);
  }
  const maxThreads = native.maxThreads();
  const threadCounts = maxThreads >= 2 ? [1, 2] : [1];
  const peakProbe = machinePeak(native, threadCounts);
  const peak = peakProbe.gflops;
  const bandwidth: Record<number, number> = {};
  for (const t of threadCounts) bandwidth[t] = native.memoryBandwidth(t, 256);
  const bestBandwidth = Math.max(...Object.values(bandwidth));
  log(`hacrl kernel benchmark — ${cpus()[0]?.model ?? 'cpu'}, ${maxThreads} threads`);
  log(`BLAS in use: ${native.blas}   (OPENBLAS_CORETYPE=${process.env.OPENBLAS_CORETYPE ?? 'unset'})`);
  log(`OpenMP wait policy: ${openmpWaitPolicy()}`);
  log(peakLine(peakProbe));
  for (const t of threadCounts) log(`measured memory bandwidth: ${round(bandwidth[t]!)} GB/s on ${t} thread(s)`);

  log('\nsgemm GFLOP/s (fraction of measured peak)');
  const gemmRows: Record<string, unknown>[] = [];
  for (const s of shapes) {
    const row: Record<string, unknown> = { shape: s.name, m: s.m, n: s.n, k: s.k };
    const parts: string[] = [];
    for (const t of threadCounts) {
      const gf = gemmGflops(native, s, t);
      row[`gflops_t${t}`] = round(gf);
      row[`peak_fraction_t${t}`] = round(gf / peak[t]!, 3);
      parts.push(`${t}T ${round(gf)} (${round(gf / peak[t]!, 2)})`);
    }
    const auto = gemmGflops(native, s, 0);
    row.gflops_auto = round(auto);
    const tsBig = s.m * s.n * s.k > 3e8;
    const ts =
      quick && tsBig
        ? null
        : gemmGflops(typescriptKernels, tsBig ? { ...s, m: Math.max(1, Math.floor(s.m / 8)) } : s, 1);
    row.typescript_gflops = ts === null ? null : round(ts, 2);
    gemmRows.push(row);
    log(
      `  ${s.name.padEnd(32)} ${parts.join('   ')}   size policy ${round(auto)}   TypeScript ${ts === null ? 'skipped' : round(ts, 2)}`,
    );
  }
  const flops = (s: GemmShape): number => s.m * s.n * s.k;
  const largest = gemmRows[shapes.indexOf(shapes.reduce((a, b) => (flops(b) > flops(a) ? b : a)))]!;
  const sgemmPeakFraction = Math.max(...threadCounts.map((t) => largest[`peak_fraction_t${t}`] as number));

  log('\nBLAS libraries at 1024³ (best thread count)');
  const libraries: Record<string, number> = {};
  const inUse = native.blas;
  for (const lib of native.availableBlas()) {
    const desc = native.selectBlas(lib);
    libraries[lib] = round(Math.max(...threadCounts.map((t) => gemmGflops(native, shapes[1]!, t))));
    log(`  ${desc.padEnd(70)} ${libraries[lib]} GFLOP/s`);
  }
  native.selectBlas(Object.keys(libraries).find((l) => inUse.toLowerCase().startsWith(l.slice(0, 4))) ?? 'auto');

  log(`\nfused kernels GB/s (fraction of measured bandwidth ${round(bestBandwidth)} GB/s) — native vs TypeScript`);
  const fused: Record<string, unknown>[] = [];
  for (const c of fusedCases()) {
    const gbs = c.bytes / time(() => c.run(native)) / 1e9;
    const tsGbs = c.bytes / time(() => c.run(typescriptKernels)) / 1e9;
    fused.push({
      kernel: c.name,
      gbs: round(gbs),
      bandwidth_fraction: round(gbs / bestBandwidth, 2),
      typescript_gbs: round(tsGbs, 2),
      speedup_vs_typescript: round(gbs / tsGbs),
    });
    log(
      `  ${c.name.padEnd(42)} ${String(round(gbs)).padStart(6)} GB/s (${round(gbs / bestBandwidth, 2)})   TypeScript ${round(tsGbs, 2)} GB/s`,
    );
  }
  const att = attentionTraining(native);
  log(
    `\nattention training [B=8,T=256,H=8,D=64]: forward ${round(att.forward)} GFLOP/s, backward ${round(att.backward)} GFLOP/s`,
  );

  log(
    `\nbf16 decode products, qwen2.5-0.5b's ${shapeConfig('qwen2.5-0.5b').layers} layers streaming from memory (${native.bf16})`,
  );
  const decode = decodeProducts(native);
  for (const r of decode)
    log(`  ${String(r.rows).padStart(2)} rows: ${r.ms} ms per step, ${r.gflops} GFLOP/s, weights at ${r.gbs} GB/s`);

  if (json)
    console.log(
      JSON.stringify({
        cpu: cpus()[0]?.model ?? 'unknown',
        threads: maxThreads,
        blas: inUse,
        openmp_wait_policy: openmpWaitPolicy(),
        openblas_coretype: process.env.OPENBLAS_CORETYPE ?? null,
        peak_gflops: peak,
        peak_below_linear: peakProbe.below_linear,
        bandwidth_gbs: bandwidth,
        sgemm: gemmRows,
        sgemm_peak_fraction: sgemmPeakFraction,
        blas_libraries_1024_gflops: libraries,
        fused,
        attention_training_gflops: { forward: round(att.forward), backward: round(att.backward) },
        bf16_decode_products: decode,
      }),
    );
}

main();
