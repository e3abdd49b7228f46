import { cpus } from 'node:os';
import { engine } from '../backend/engine.js';
import { nativeBackend } from '../backend/select.js';
import { typescriptKernels } from '../backend/typescript.js';
import { linear, lmHeadLogProbs, rmsNorm } from '../tensor/ops.js';
import { Tape } from '../tensor/tape.js';
import { Tensor } from '../tensor/tensor.js';
import { Rng } from '../util/rng.js';

/** n uniform values in [-0.5, 0.5). */
function random(n: number, rng: Rng): Float32Array {
  return Float32Array.from({ length: n }, () => rng.next() - 0.5);
}

/** A tiny language-model step (linear → RMSNorm → head log-probs) backward; returns the summed log-prob and ‖∇W‖. */
function tinyStep(): { logProb: number; gradNorm: number } {
  const rng = new Rng(7);
  const k = engine();
  const tape = new Tape();
  const ctx = { k, tape };
  const x = new Tensor(random(8 * 32, rng), [8, 32]);
  const w = new Tensor(random(32 * 32, rng), [32, 32], true);
  const norm = new Tensor(new Float32Array(32).fill(1), [32], true);
  const head = new Tensor(random(50 * 32, rng), [50, 32], true);
  const targets = Int32Array.from({ length: 8 }, (_, i) => (i * 7) % 50);
  const h = rmsNorm(ctx, linear(ctx, x, w), norm, 1e-6);
  const { logProb } = lmHeadLogProbs(ctx, h, head, targets);
  tape.backward(logProb);
  return { logProb: logProb.data.reduce((a, b) => a + b, 0), gradNorm: Math.sqrt(k.sumSquares(w.grad!, w.size)) };
}

/** `hacrl smoke`: proves the engine loads, agrees with the TypeScript backend, and reports its speed. */
export function runSmoke(json: boolean): void {
  const k = engine();
  const n = 512;
  const rng = new Rng(1);
  const a = random(n * n, rng);
  const b = random(n * n, rng);
  const c = new Float32Array(n * n);
  const ref = new Float32Array(n * n);
  typescriptKernels.gemm({ m: n, n, k: n, a: { data: a }, b: { data: b }, c: { data: ref } });
  k.gemm({ m: n, n, k: n, a: { data: a }, b: { data: b }, c: { data: c } });
  let err = 0;
  let scale = 0;
  for (let i = 0; i < c.length; i++) {
    err = Math.max(err, Math.abs(c[i]! - ref[i]!));
    scale = Math.max(scale, Math.abs(ref[i]!));
  }
  // The fastest of five batches: one batch's mean moved with whatever else ran on a shared machine (0.54 to 0.87 of
  // the FMA peak on one AMX Xeon within minutes, docs/benchmarks.md), the fastest batch much less.
  const reps = k.name === 'native' ? 10 : 1;
  let best = Infinity;
  for (let batch = 0; batch < (k.name === 'native' ? 5 : 2); batch++) {
    const t0 = performance.now();
    for (let r = 0; r < reps; r++) k.gemm({ m: n, n, k: n, a: { data: a }, b: { data: b }, c: { data: c } });
    best = Math.min(best, (performance.now() - t0) / 1e3);
  }
  const gflops = (2 * n ** 3 * reps) / best / 1e9;
  const step = tinyStep();
  const native = nativeBackend();
  const result = {
    backend: k.name,
    blas: k.blas,
    cpu: cpus()[0]?.model ?? 'unknown',
    threads: native ? native.maxThreads() : 1,
    openblas_coretype: process.env.OPENBLAS_CORETYPE ?? null,
    gemm512_gflops: Number(gflops.toFixed(1)),
    gemm512_rel_error_vs_typescript: err / scale,
    tiny_step_logprob_sum: Number(step.logProb.toFixed(4)),
    tiny_step_grad_norm: Number(step.gradNorm.toFixed(4)),
    ok: err / scale < 1e-5 && Number.isFinite(step.gradNorm) && step.gradNorm > 0,
  };
  if (json) console.log(JSON.stringify(result));
  else {
    console.log(`hacrl engine smoke run`);
    console.log(`  backend        ${result.backend}`);
    console.log(`  matmul library ${result.blas}`);
    console.log(
      `  cpu            ${result.cpu} (${result.threads} threads; OPENBLAS_CORETYPE=${result.openblas_coretype ?? 'unset'})`,
    );
    console.log(
      `  512³ sgemm     ${result.gemm512_gflops} GFLOP/s, max error ${(err / scale).toExponential(2)} relative to the TypeScript backend`,
    );
    console.log(`  tiny LM step   Σ log p = ${result.tiny_step_logprob_sum}, ‖∇W‖ = ${result.tiny_step_grad_norm}`);
    console.log(result.ok ? 'smoke run passed' : 'smoke run FAILED');
  }
  if (!result.ok) process.exitCode = 1;
}
