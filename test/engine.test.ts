// Bad input reaches no kernel: the checked engine and the addon itself raise errors naming the op and the shapes.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Engine, KernelInputError } from '../src/backend/engine.js';
import { cpuFlags } from '../src/backend/cpu-features.js';
import { nativeBackend, nativeLoadError } from '../src/backend/select.js';
import { testedBackends } from './backends.js';

const f = (n: number): Float32Array => new Float32Array(n);

for (const backend of testedBackends('input validation')) {
  const k = new Engine(backend);
  describe(`input validation on ${backend.name}`, () => {
    test('gemm shape mismatch names the op, the operand and the shapes', () => {
      assert.throws(
        () => k.gemm({ m: 4, n: 5, k: 3, a: { data: f(12) }, b: { data: f(14) }, c: { data: f(20) } }),
        (e: unknown) =>
          e instanceof KernelInputError &&
          /^gemm: b has 14 elements but op\(A\)\[4×3\]·op\(B\)\[3×5\] needs 15$/.test(e.message),
      );
      assert.throws(
        () => k.gemm({ m: 2, n: 2, k: 2, a: { data: f(4), ld: 1 }, b: { data: f(4) }, c: { data: f(4) } }),
        /gemm: lda 1/,
      );
      assert.throws(
        () =>
          k.gemm({ m: 2, n: 2, k: 2, a: { data: f(4) }, b: { data: f(4) }, c: { data: f(8) }, batch: 2, strideC: 2 }),
        /gemm: strideC 2 makes the 2 products of the batch overlap/,
      );
      const bits = (n: number): Uint16Array => new Uint16Array(n);
      assert.throws(
        () => k.gemm({ m: 2, n: 2, k: 2, a: { data: bits(4) }, b: { data: f(4) }, c: { data: f(4) } }),
        /gemm: a and b must both be Float32Arrays or both Uint16Arrays/,
      );
      assert.throws(
        () => k.gemm({ m: 2, n: 2, k: 2, a: { data: bits(4) }, b: { data: bits(3) }, c: { data: f(4) } }),
        /gemm: b has 3 elements but/,
      );
      assert.throws(
        () => k.gemm({ m: 2, n: 2, k: 2, a: { data: bits(4) }, b: { data: bits(4) }, c: { data: bits(4) as never } }),
        /gemm: c must be a Float32Array/,
      );
    });
    test('wrong lengths and types', () => {
      assert.throws(
        () => k.rmsNorm(f(11), f(4), f(12), f(3), 3, 4, 1e-6),
        /rmsNorm: x has 11 elements but \[rows=3,dim=4\] needs 12/,
      );
      assert.throws(
        () => k.softmax(new Float64Array(4) as unknown as Float32Array, f(4), 1, 4),
        /softmax: x must be a Float32Array/,
      );
      assert.throws(() => k.swiglu(f(3), f(2), f(3), 3), /swiglu: up has 2 elements but n=3 needs 3/);
      assert.throws(
        () => k.rmsNorm(f(4), f(4), f(4), f(1), 1.5, 4, 1e-6),
        /rmsNorm: rows must be a non-negative integer, got 1.5/,
      );
    });
    test('values that matter: ids, positions, heads, non-finite hyper-parameters and gradients', () => {
      assert.throws(
        () => k.gatherLogProbs(f(6), Int32Array.of(0, 3), f(2), f(2), 2, 3),
        /gatherLogProbs: target 3 at row 1 is outside \[0, 3\)/,
      );
      assert.throws(() => k.embedding(f(6), Int32Array.of(-1), f(3), 1, 3), /embedding: token id -1 at row 0/);
      assert.throws(
        () => k.copyRows(f(20), 2, 5, f(20), 0, 5, 4, 5),
        /copyRows: src has 20 elements but 4 rows of 5 from offset 2, ld 5 needs 22/,
      );
      const s = { batch: 1, seqLen: 2, queryHeads: 3, kvHeads: 2, headDim: 4 };
      assert.throws(
        () => k.attention(f(24), f(16), f(16), f(24), f(6), s),
        /attention: queryHeads 3 must be a positive multiple of kvHeads 2/,
      );
      assert.throws(
        () => k.rope(f(8), Int32Array.of(5), f(4), f(4), 1, 2, 4, false),
        /rope: position 5 at row 0 is outside the rotary table \[0, 2\)/,
      );
      assert.throws(() => k.rmsNorm(f(4), f(4), f(4), f(1), 1, 4, NaN), /rmsNorm: eps must be finite, got NaN/);
      const g = Float32Array.of(1, Infinity);
      assert.throws(
        () => k.adamw(f(2), g, f(2), f(2), 2, 1e-3, 0.9, 0.999, 1e-8, 0, 1),
        /adamw: the gradient has NaN or infinite values/,
      );
    });
  });
}

describe(
  'the native addon checks its own arguments (called without the engine)',
  { skip: nativeBackend() === null ? 'native addon not built' : false },
  () => {
    const n = nativeBackend()!;
    test('short arrays and wrong types throw instead of crashing', () => {
      assert.throws(() => n.rmsNorm(f(2), f(4), f(12), f(3), 3, 4, 1e-6), /rmsNorm: x/);
      assert.throws(
        () => n.gemm({ m: 64, n: 64, k: 64, a: { data: f(10) }, b: { data: f(4096) }, c: { data: f(4096) } }),
        /gemm: a/,
      );
      assert.throws(() => n.embedding(f(6), Int32Array.of(9), f(3), 1, 3), /embedding/);
      assert.throws(
        () => (n.softmax as (...a: unknown[]) => void)('x', f(4), 1, 4),
        /softmax: x must be a Float32Array/,
      );
    });
  },
);

describe('backend selection', () => {
  const cli = (env: Record<string, string>): { status: number | null; stdout: string; stderr: string } => {
    const r = spawnSync(process.execPath, ['dist/src/cli/main.js', 'smoke', '--json'], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  test('HACRL_BACKEND=typescript runs the engine smoke check on the TypeScript backend', () => {
    const r = cli({ HACRL_BACKEND: 'typescript' });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { backend: string; ok: boolean };
    assert.equal(out.backend, 'typescript');
    assert.equal(out.ok, true);
  });
  test('an addon that cannot load falls back to TypeScript with one clear warning', () => {
    const r = cli({ HACRL_ADDON_PATH: '/nonexistent/hacrl_native.node' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal((r.stderr.match(/native addon unavailable/g) ?? []).length, 1, r.stderr);
    assert.equal((JSON.parse(r.stdout.trim().split('\n').pop()!) as { backend: string }).backend, 'typescript');
  });
  test('an addon older than the code (a kernel missing) is refused by name, not met mid-run', () => {
    const dir = mkdtempSync(join(tmpdir(), 'hacrl-addon-'));
    const stale = join(dir, 'stale-addon.cjs');
    writeFileSync(stale, "module.exports = { init: () => 'openblas', gemmRaw: () => {} };\n");
    const r = cli({ HACRL_ADDON_PATH: stale });
    rmSync(dir, { recursive: true, force: true });
    assert.equal(r.status, 0, r.stderr);
    assert.match(
      r.stderr,
      /stale-addon\.cjs is older than the code \(no [^)]*rmsNorm[^)]*\); rebuild with `npm run build:native`/,
    );
    assert.equal((JSON.parse(r.stdout.trim().split('\n').pop()!) as { backend: string }).backend, 'typescript');
  });
  test("OpenBLAS's kernels: an OPENBLAS_CORETYPE that is set is kept; unset, an AVX-512 CPU gets AVX-512 kernels", (t) => {
    /** The BLAS description of `hacrl smoke` on OpenBLAS with OPENBLAS_CORETYPE=`coreType` (unset when undefined). */
    const openblas = (coreType?: string): string => {
      const env: NodeJS.ProcessEnv = { ...process.env, HACRL_BLAS: 'openblas' };
      delete env.OPENBLAS_CORETYPE;
      if (coreType) env.OPENBLAS_CORETYPE = coreType;
      const r = spawnSync(process.execPath, ['dist/src/cli/main.js', 'smoke', '--json'], { env, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return (JSON.parse(r.stdout.trim().split('\n').pop()!) as { blas: string }).blas;
    };
    // Without the addon no BLAS is loaded at all (the engine's suites show that skip with its reason).
    if (nativeBackend() === null) return t.skip(`native addon not loaded: ${nativeLoadError()}`);
    // scripts/setup.sh installs libopenblas-dev, so OpenBLAS must load here.
    const unset = openblas();
    assert.match(unset, /^OpenBLAS/);
    assert.match(openblas('Haswell'), /kernel Haswell;/);
    const flags = cpuFlags();
    if (['avx512f', 'avx512dq', 'avx512bw', 'avx512vl'].every((f) => flags.has(f)))
      assert.match(unset, flags.has('avx512_bf16') ? /kernel Cooperlake;/ : /kernel SkylakeX;/);
  });
  test('a bad HACRL_BACKEND value is refused with the allowed values', () => {
    const r = cli({ HACRL_BACKEND: 'gpu' });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /HACRL_BACKEND must be "native" or "typescript", got "gpu"/);
  });
});
