// The reproducible kernel mode (HACRL_REPRODUCIBLE=1, docs/reproducible.md): every kernel gives the same bits on the
// native backend (both of its builds, AVX-512 and AVX2) as on the TypeScript one, and a few SFT and RL steps save
// byte-equal weights across backends, thread counts, BLAS libraries and the forced-AVX2 build.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { F32, GemmArgs, Kernels } from '../src/backend/kernels.js';
import { reproducibleTypescriptKernels } from '../src/backend/reproducible.js';
import { nativeBackend, nativeLoadError } from '../src/backend/select.js';
import { f32ToBf16 } from '../src/backend/bf16-bits.js';
import { hacrl, tinySftArgs } from './cli.js';
import { mulberry32, randInt, randn, type Rng } from './helpers.js';

process.env.HACRL_REPRODUCIBLE = '1';

/** One kernel call on fresh inputs from a seeded generator; returns every array it wrote. */
type Case = (k: Kernels, rng: Rng) => (F32 | Int32Array)[];

/** A gemm of the given layout on random operands (bf16 bits for both when `bf16`); returns C. */
function gemmCase(g: Omit<GemmArgs, 'a' | 'b' | 'c'> & { bf16?: boolean }, aLen: number, bLen: number): Case {
  return (k, rng) => {
    const [a, b] = [randn(aLen, rng), randn(bLen, rng)];
    const c = randn((g.batch ?? 1) * g.m * g.n + 40, rng);
    const op = g.bf16 ? { a: { data: f32ToBf16(a) }, b: { data: f32ToBf16(b) } } : { a: { data: a }, b: { data: b } };
    k.gemm({ ...g, ...op, c: { data: c, offset: 3 } });
    return [c];
  };
}

const [R, D, V] = [37, 48, 29];

const CASES: Record<string, Case> = {
  'gemm NN': gemmCase({ m: 13, n: 35, k: 70 }, 13 * 70, 70 * 35),
  'gemm TN, alpha and beta': gemmCase({ m: 9, n: 17, k: 33, transA: true, alpha: 0.3, beta: 0.7 }, 33 * 9, 33 * 17),
  'gemm NT, strided batch': gemmCase(
    { m: 5, n: 20, k: 64, transB: true, batch: 3, strideA: 320, strideB: 0, strideC: 100, beta: 1 },
    3 * 320,
    20 * 64,
  ),
  'gemm TT, leading dimensions': (k, rng) => {
    const [a, b, c] = [randn(40 * 12, rng), randn(19 * 45, rng), randn(12 * 24, rng)];
    k.gemm({
      m: 11,
      n: 19,
      k: 40,
      transA: true,
      transB: true,
      a: { data: a, ld: 12 },
      b: { data: b, ld: 45 },
      c: { data: c, ld: 24 },
    });
    return [c];
  },
  'gemm few rows (decode), transA and beta': gemmCase({ m: 3, n: 40, k: 50, transA: true, beta: 0.5 }, 50 * 3, 50 * 40),
  'gemm bf16': gemmCase({ m: 6, n: 33, k: 50, bf16: true }, 6 * 50, 50 * 33),
  'gemm k = 0 and alpha = 0': (k, rng) => {
    const c = randn(12, rng);
    k.gemm({
      m: 3,
      n: 4,
      k: 0,
      beta: 0.5,
      a: { data: new Float32Array(0), ld: 1 },
      b: { data: new Float32Array(0) },
      c: { data: c },
    });
    k.gemm({
      m: 2,
      n: 2,
      k: 2,
      alpha: 0,
      beta: 3,
      a: { data: randn(4, rng) },
      b: { data: randn(4, rng) },
      c: { data: c },
    });
    return [c];
  },
  // Large enough that the native kernels split their outputs across threads (HACRL_THREADS or the cores).
  'large shapes: gemm, rmsNormBackward, softmax': (k, rng) => {
    const c = new Float32Array(150 * 300);
    k.gemm({
      m: 150,
      n: 300,
      k: 120,
      a: { data: randn(150 * 120, rng) },
      b: { data: randn(120 * 300, rng) },
      c: { data: c },
    });
    const [rows, dim] = [700, 200];
    const [dx, dw] = [new Float32Array(rows * dim), randn(dim, rng)];
    k.rmsNormBackward(
      randn(rows * dim, rng),
      randn(rows * dim, rng),
      randn(dim, rng),
      randn(rows, rng),
      dx,
      dw,
      rows,
      dim,
    );
    const p = new Float32Array(rows * dim);
    k.softmax(randn(rows * dim, rng, 4), p, rows, dim);
    return [c, dx, dw, p];
  },
  rmsNorm: (k, rng) => {
    const [out, inv] = [new Float32Array(R * D), new Float32Array(R)];
    k.rmsNorm(randn(R * D, rng), randn(D, rng), out, inv, R, D, 1e-5);
    return [out, inv];
  },
  rmsNormBackward: (k, rng) => {
    const [dx, dw] = [new Float32Array(R * D), randn(D, rng)];
    k.rmsNormBackward(randn(R * D, rng), randn(R * D, rng), randn(D, rng), randn(R, rng), dx, dw, R, D);
    return [dx, dw];
  },
  layerNorm: (k, rng) => {
    const [out, mean, rstd] = [new Float32Array(R * D), new Float32Array(R), new Float32Array(R)];
    k.layerNorm(randn(R * D, rng, 3), randn(D, rng), randn(D, rng), out, mean, rstd, R, D, 1e-5);
    return [out, mean, rstd];
  },
  layerNormBackward: (k, rng) => {
    const [dx, dw, db] = [new Float32Array(R * D), randn(D, rng), randn(D, rng)];
    k.layerNormBackward(
      randn(R * D, rng),
      randn(R * D, rng),
      randn(D, rng),
      randn(R, rng),
      randn(R, rng),
      dx,
      dw,
      db,
      R,
      D,
    );
    return [dx, dw, db];
  },
  'softmax, logSoftmax': (k, rng) => {
    const x = randn(R * V, rng, 4);
    const [p, lp] = [new Float32Array(R * V), new Float32Array(R * V)];
    k.softmax(x, p, R, V);
    k.logSoftmax(x, lp, R, V);
    return [p, lp];
  },
  'gatherLogProbs and its backward, entropyBackward': (k, rng) => {
    const logits = randn(R * V, rng, 3);
    const targets = randInt(R, rng, -1, V);
    const [lp, lse, h] = [new Float32Array(R), new Float32Array(R), new Float32Array(R)];
    k.gatherLogProbs(logits, targets, lp, lse, R, V, h);
    const d = new Float32Array(R * V);
    k.gatherLogProbsBackward(logits, targets, lse, randn(R, rng), d, R, V);
    k.entropyBackward(logits, lse, h, randn(R, rng), d, R, V);
    return [lp, lse, h, d];
  },
  rope: (k, rng) => {
    const x = randn(R * 2 * 16, rng);
    k.rope(x, randInt(R, rng, 0, 10), randn(80, rng), randn(80, rng), R, 2, 16, false);
    return [x];
  },
  'swiglu, gelu and their backwards': (k, rng) => {
    const n = 500;
    const [gate, up, dy] = [randn(n, rng, 4), randn(n, rng), randn(n, rng)];
    const out = Array.from({ length: 5 }, () => new Float32Array(n));
    k.swiglu(gate, up, out[0]!, n);
    k.swigluBackward(dy, gate, up, out[1]!, out[2]!, n);
    k.gelu(gate, out[3]!, n);
    k.geluBackward(dy, gate, out[4]!, n);
    return out;
  },
  'attention and its backward, with keyStart': (k, rng) => {
    const shape = { batch: 2, seqLen: 7, queryHeads: 4, kvHeads: 2, headDim: 8 };
    const [nq, nkv] = [2 * 7 * 4 * 8, 2 * 7 * 2 * 8];
    const [q, key, v] = [randn(nq, rng), randn(nkv, rng), randn(nkv, rng)];
    const keyStart = new Int32Array([0, 3]);
    const [out, lse] = [new Float32Array(nq), new Float32Array(2 * 4 * 7)];
    k.attention(q, key, v, out, lse, shape, keyStart);
    const [dq, dk, dv] = [new Float32Array(nq), new Float32Array(nkv), new Float32Array(nkv)];
    k.attentionBackward(randn(nq, rng), q, key, v, out, lse, dq, dk, dv, shape, keyStart);
    return [out, lse, dq, dk, dv];
  },
  attentionDecode: (k, rng) => {
    const out = new Float32Array(2 * 4 * 8);
    k.attentionDecode(
      randn(64, rng),
      randn(2 * 2 * 9 * 8, rng),
      randn(2 * 2 * 9 * 8, rng),
      out,
      2,
      4,
      2,
      8,
      9,
      6,
      0.3,
      new Int32Array([0, 2]),
    );
    return [out];
  },
  'adamw, axpy, scale, sumRows, sumSquares': (k, rng) => {
    const n = 300;
    const [p, m, v] = [randn(n, rng), randn(n, rng, 0.1), randn(n, rng, 0.1).map(Math.abs)];
    k.adamw(p, randn(n, rng), m, v, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, 7);
    const y = randn(n, rng);
    k.axpy(0.1, randn(n, rng), y, n);
    k.scale(y, 1 / 3, n);
    const db = randn(D, rng);
    k.sumRows(randn(R * D, rng), db, R, D);
    return [p, m, v, y, db, new Float32Array([k.sumSquares(y, n)])];
  },
};

const native = nativeBackend();

/** The bytes of every array a case wrote. */
function bytes(arrays: (F32 | Int32Array)[]): Buffer[] {
  return arrays.map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength));
}

describe(
  'reproducible kernels: the same bits from native and TypeScript',
  { skip: native ? false : nativeLoadError() },
  () => {
    after(() => native?.setReproducible(true, false));
    for (const isa of ['widest vectors', 'forced AVX2'])
      for (const [name, run] of Object.entries(CASES))
        test(`${name} (${isa})`, () => {
          native!.setReproducible(true, isa === 'forced AVX2');
          const want = bytes(run(reproducibleTypescriptKernels, mulberry32(7)));
          const got = bytes(run(native!, mulberry32(7)));
          got.forEach((g, i) => assert.ok(g.equals(want[i]!), `output ${i} differs`));
        });
  },
);

/** sha256 of a file. */
async function digest(path: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
}

/**
 * The settings each run differs in, beyond HACRL_REPRODUCIBLE=1; the first is the reference, on the first BLAS library
 * that loads (oneDNN where it is installed).
 */
const ALL_VARIANTS: Record<string, NodeJS.ProcessEnv> = {
  'native, 2 threads': { HACRL_THREADS: '2' },
  typescript: { HACRL_BACKEND: 'typescript' },
  'native, 1 thread': { HACRL_THREADS: '1' },
  'native, BLIS': { HACRL_BLAS: 'blis' },
  'native, OpenBLAS': { HACRL_BLAS: 'openblas' },
  'native, forced AVX2': { HACRL_FORCE_AVX2: '1' },
};

/** The variants this machine can run: a BLAS library that is not installed is left out. */
const VARIANTS = Object.fromEntries(
  Object.entries(ALL_VARIANTS).filter(([, env]) => !env.HACRL_BLAS || native?.availableBlas().includes(env.HACRL_BLAS)),
);

/**
 * sha256 of model.safetensors after the 4 SFT steps below in the reproducible mode, as every machine must compute it
 * (recorded at 5d37a04 on an AMD EPYC with AVX-512). A change to the mode's arithmetic, or to what `hacrl sft`
 * trains on and how, changes it: record the new one in the same commit and say why.
 */
const RECORDED_SFT_DIGEST = '369cffb9c185dd0a3ac46103e7f987653528ef7c5b5e1b9e21956af4545357c5';

/** The digests of the weights a run under each variant saved (`weights(dir)` lists them), by variant. */
type Digests = [variant: string, digests: string[]][];

/** Asserts that every variant saved the reference variant's weights, byte for byte. */
function assertAllEqual(what: string, runs: Digests): void {
  for (const [name, digests] of runs)
    assert.deepEqual(digests, runs[0]![1], `${what}: ${name} differs from ${runs[0]![0]}`);
}

describe(
  'reproducible training: byte-equal weights after SFT and HACPO steps',
  { skip: native ? false : nativeLoadError() },
  () => {
    let root = '';
    before(async () => {
      root = await mkdtemp(join(tmpdir(), 'hacrl-repro-'));
      await writeFile(
        join(root, 'digits.mjs'),
        'export default (s) => (s.response.match(/[0-9]/g) ?? []).length / 8;\n',
      );
    });
    after(() => rm(root, { recursive: true, force: true }));

    /** Runs `args(dir)` under each variant (one child process each) and digests the files `weights(dir)` names. */
    async function acrossVariants(label: string, args: (dir: string) => string[], weights: (dir: string) => string[]) {
      const runs: Digests = [];
      for (const [i, [name, env]] of Object.entries(VARIANTS).entries()) {
        const dir = join(root, `${label}-${i}`);
        const r = hacrl(args(dir), { ...env, HACRL_REPRODUCIBLE: '1' });
        assert.equal(r.status, 0, `${name}: ${r.stderr}`);
        runs.push([name, await Promise.all(weights(dir).map(digest))]);
      }
      return runs;
    }

    test('SFT, then HACPO of a tiny pair', async () => {
      const sft = (dir: string): string[] => tinySftArgs(dir, ['--steps', '4', '--max-new-tokens', '8']);
      const sftRuns = await acrossVariants('sft', sft, (dir) => [join(dir, 'model.safetensors')]);
      assertAllEqual('SFT', sftRuns);
      assert.equal(sftRuns[0]![1][0], RECORDED_SFT_DIGEST, 'the recorded digest of these SFT steps');
      // The command-line switch is the same mode as the environment's.
      const flagged = join(root, 'sft-flag');
      const f = hacrl(['--reproducible', ...sft(flagged)]);
      assert.equal(f.status, 0, f.stderr);
      assert.equal(await digest(join(flagged, 'model.safetensors')), RECORDED_SFT_DIGEST, 'hacrl --reproducible');
      // The partner: another initialisation, trained once; every variant's HACPO run starts from the same two agents.
      const partner = join(root, 'partner');
      const p = hacrl([...sft(partner), '--model-seed', '1'], { HACRL_REPRODUCIBLE: '1' });
      assert.equal(p.status, 0, p.stderr);
      const agents = [join(root, 'sft-0'), partner];
      const hacpo = (dir: string): string[] => [
        'train',
        '--set',
        ...agents.flatMap((path, i) => [`agents.${i}.name=a${i}`, `agents.${i}.checkpoint=${path}`]),
        'preset=hacpo',
        `runDir=${dir}`,
        'data.train=easy:train:16',
        'data.validation=[]',
        'data.template={question}',
        'rollout.promptsPerStep=2',
        'rollout.groupSize=4',
        'rollout.maxNewTokens=8',
        'optim.lr=0.003',
        'reward.math=0',
        `reward.custom=[{path: ${join(root, 'digits.mjs')}, weight: 1, name: digits}]`,
        'steps=2',
        'checkpoint.every=2',
      ];
      const saved = (dir: string): string[] =>
        agents.map((_, i) => join(dir, 'checkpoints', 'step-000002', 'agents', `a${i}`, 'model.safetensors'));
      const runs = await acrossVariants('hacpo', hacpo, saved);
      assertAllEqual('HACPO', runs);
      const before = await Promise.all(agents.map((dir) => digest(join(dir, 'model.safetensors'))));
      runs[0]![1].forEach((d, i) => assert.notEqual(d, before[i], `HACPO changed agent ${i}`));
    });

    test("a run's config records the mode, a resume follows it, and a contrary HACRL_REPRODUCIBLE is refused", async () => {
      const agent = join(root, 'config-agent');
      const a = hacrl(tinySftArgs(agent, ['--steps', '2', '--max-new-tokens', '8']));
      assert.equal(a.status, 0, a.stderr);
      const train = (dir: string, more: string[] = []): string[] => [
        'train',
        '--set',
        'agents.0.name=policy',
        `agents.0.checkpoint=${agent}`,
        `runDir=${dir}`,
        'data.train=easy:train:16',
        'data.validation=[]',
        'data.template={question}',
        'rollout.promptsPerStep=2',
        'rollout.groupSize=2',
        'rollout.maxNewTokens=8',
        'steps=1',
        ...more,
      ];
      const saved = async (dir: string) =>
        (JSON.parse(await readFile(join(dir, 'config.resolved.json'), 'utf8')) as { reproducible?: boolean })
          .reproducible;
      // Unset: the command line's mode (here the environment's, 1) is written into the saved config.
      const fromEnv = join(root, 'config-env');
      const r = hacrl(train(fromEnv));
      assert.equal(r.status, 0, r.stderr);
      assert.equal(await saved(fromEnv), true);
      // A resume without the variable follows the saved config (else the configurations would differ) ...
      const resumed = hacrl([...train(fromEnv), '--resume'], { HACRL_REPRODUCIBLE: undefined });
      assert.equal(resumed.status, 0, resumed.stderr);
      assert.match(resumed.stdout, /already finished/);
      // ... and refuses the other kernels.
      const fast = hacrl(['--fast-kernels', ...train(fromEnv), '--resume']);
      assert.equal(fast.status, 1);
      assert.match(fast.stderr, /saved configuration of .* says reproducible: true, but HACRL_REPRODUCIBLE=0/);
      // The key alone turns the mode on; against the variable it is refused before anything runs.
      const keyed = join(root, 'config-key');
      const k = hacrl([...train(keyed), 'reproducible=true'], { HACRL_REPRODUCIBLE: undefined });
      assert.equal(k.status, 0, k.stderr);
      assert.equal(await saved(keyed), true);
      assert.equal(
        await digest(join(keyed, 'checkpoints', 'step-000001', 'agents', 'policy', 'model.safetensors')),
        await digest(join(fromEnv, 'checkpoints', 'step-000001', 'agents', 'policy', 'model.safetensors')),
      );
      const clash = hacrl([...train(join(root, 'config-clash')), 'reproducible=false']);
      assert.equal(clash.status, 1);
      assert.match(clash.stderr, /the configuration says reproducible: false, but HACRL_REPRODUCIBLE=1/);
    });
  },
);
