/**
 * `npm run bench:step -- --shape NAME [--precision fp32|bf16] [--batch 4] [--seq 256] [--steps 2]`: where one full
 * fine-tuning step's time goes at a public checkpoint's shape (src/model/shapes.ts, random weights): forward,
 * backward and AdamW, then the native time of every kernel in the last step (products split by transposes, shape,
 * accumulation and operand type, with GFLOP/s) and the time outside any kernel (tape, views, JavaScript). The first
 * steps warm up (buffers, oneDNN's generated code); the last is the one reported. Timing each call adds a
 * `performance.now()` pair per kernel call, under 1 ms per step at these sizes.
 */
import { engine } from '../src/backend/engine.js';
import { KERNEL_ARGS, type GemmArgs, type Kernels } from '../src/backend/kernels.js';
import { shapeConfig } from '../src/model/shapes.js';
import { sftLoss } from '../src/model/sft.js';
import { Transformer } from '../src/model/transformer.js';
import { initModel } from '../src/model/weights.js';
import { AdamW } from '../src/optim/adamw.js';
import { PRECISIONS, type Precision } from '../src/tensor/bf16.js';
import { Tape } from '../src/tensor/tape.js';
import { Rng } from '../src/util/rng.js';
import { count, option } from './cli-args.js';

const SHAPE = option('shape') ?? 'qwen2.5-0.5b';
const PRECISION = (option('precision') ?? 'fp32') as Precision;
if (!(PRECISIONS as readonly string[]).includes(PRECISION))
  throw new Error(`--precision must be one of ${PRECISIONS.join(', ')}, got ${PRECISION}`);
/** Sequences per step (default 4), tokens per sequence (default 256, the first 32 a prompt) and steps (default 2). */
const BATCH = count('batch', 4);
// At least 33: the first 32 tokens are the prompt, and a step needs response tokens.
const SEQ = count('seq', 256, 33);
const STEPS = count('steps', 2);

const k = engine();
/** Per key: [milliseconds, calls, floating-point operations]. */
const stats = new Map<string, [number, number, number]>();
let timing = false;
const backend = k.backend as unknown as Record<string, (...args: unknown[]) => unknown>;
for (const op of Object.keys(KERNEL_ARGS) as (keyof Kernels)[]) {
  const kernel = backend[op]!.bind(backend);
  backend[op] = (...args: unknown[]): unknown => {
    if (!timing) return kernel(...args);
    const t0 = performance.now();
    const out = kernel(...args);
    const ms = performance.now() - t0;
    let key: string = op;
    let flops = 0;
    if (op === 'gemm') {
      const g = args[0] as GemmArgs;
      const type = g.a.data instanceof Uint16Array ? 'bf16' : 'fp32';
      const trans = `${g.transA ? 'T' : 'N'}${g.transB ? 'T' : 'N'}`;
      key = `gemm ${type} ${trans} ${g.m}×${g.n}×${g.k}${g.beta ? ' +=' : ''}${(g.batch ?? 1) > 1 ? ` ×${g.batch}` : ''}`;
      flops = 2 * g.m * g.n * g.k * (g.batch ?? 1);
    }
    const e = stats.get(key) ?? [0, 0, 0];
    stats.set(key, [e[0] + ms, e[1] + 1, e[2] + flops]);
    return out;
  };
}

const cfg = shapeConfig(SHAPE);
const fp32 = initModel(cfg, 1);
const model = PRECISION === 'fp32' ? fp32 : new Transformer(cfg, fp32.params, null, PRECISION);
const rng = new Rng(2);
const items = Array.from({ length: BATCH }, () => {
  const ids = Array.from({ length: SEQ }, () => 1 + Math.floor(rng.next() * (cfg.vocabSize - 1)));
  return { prompt: ids.slice(0, 32), response: ids.slice(32) };
});
const optimizer = new AdamW(model.params, { lr: 1e-5 });
console.log(`${SHAPE}, ${PRECISION}, ${BATCH} × ${SEQ} tokens, ${k.blas}; bf16: ${k.bf16}`);
const s = (ms: number): string => (ms / 1e3).toFixed(2);
for (let step = 0; step < STEPS; step++) {
  timing = step === STEPS - 1;
  const t0 = performance.now();
  const tape = new Tape();
  const { loss } = sftLoss({ k, tape }, model, items);
  const t1 = performance.now();
  tape.backward(loss);
  const t2 = performance.now();
  optimizer.step(k);
  optimizer.zeroGrad();
  const t3 = performance.now();
  console.log(`step ${step}: ${s(t3 - t0)} s (forward ${s(t1 - t0)}, backward ${s(t2 - t1)}, AdamW ${s(t3 - t2)})`);
  if (!timing) continue;
  let inKernels = 0;
  for (const [key, [ms, calls, flops]] of [...stats].sort((a, b) => b[1][0] - a[1][0])) {
    inKernels += ms;
    const rate = flops > 0 ? `${(flops / ms / 1e6).toFixed(0)} GFLOP/s` : '';
    console.log(`  ${key.padEnd(34)} ${s(ms).padStart(7)} s ${String(calls).padStart(6)} calls ${rate}`);
  }
  const products = [...stats].filter(([key]) => key.startsWith('gemm')).reduce((a, [, [ms]]) => a + ms, 0);
  console.log(
    `  products ${s(products)} s, other kernels ${s(inKernels - products)} s, outside kernels ${s(t3 - t0 - inKernels)} s`,
  );
}
