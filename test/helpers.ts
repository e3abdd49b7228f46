/** Small deterministic helpers shared by the tests: a seeded RNG, random arrays and relative-error assertions. */
import assert from 'node:assert/strict';

/** A source of uniform numbers in [0, 1). */
export type Rng = () => number;

/** mulberry32: a tiny, fast, seeded 32-bit generator (good enough for test data). */
export function mulberry32(seed: number): Rng {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** n standard-normal samples (Box–Muller) times `scale`, as float32. */
export function randn(n: number, rng: Rng, scale = 1): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const u = 1 - rng(); // (0, 1]: log stays finite
    out[i] = scale * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng());
  }
  return out;
}

/** n uniform samples in [lo, hi), as float32. */
export function uniform(n: number, rng: Rng, lo: number, hi: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + (hi - lo) * rng();
  return out;
}

/** n integers uniform in [lo, hi). */
export function randInt(n: number, rng: Rng, lo: number, hi: number): Int32Array {
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + Math.floor((hi - lo) * rng());
  return out;
}

/** True when a and b are the same non-finite value (both NaN, both +∞ or both −∞). */
function sameNonFinite(a: number, b: number): boolean {
  return !Number.isFinite(b) && (Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b)));
}

/** max|x| over the finite entries of x. */
function maxAbs(x: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < x.length; i++) if (Number.isFinite(x[i])) m = Math.max(m, Math.abs(x[i]));
  return m;
}

/**
 * max|got − want| / max(floor, max|want|) over the finite entries of want; Infinity when the lengths differ or an
 * entry of want is non-finite and got does not hold the same value.
 */
export function relError(got: ArrayLike<number>, want: ArrayLike<number>, floor = 1e-6): number {
  if (got.length !== want.length) return Infinity;
  let diff = 0;
  for (let i = 0; i < want.length; i++) {
    if (sameNonFinite(got[i], want[i])) continue;
    const d = Math.abs(got[i] - want[i]);
    if (!(d <= diff)) diff = Number.isNaN(d) ? Infinity : d;
  }
  return diff / Math.max(floor, maxAbs(want));
}

/** What a test compares: arrays, numbers (relative error) and booleans (equality), by name. */
export type Outputs = Record<string, ArrayLike<number> | number | boolean>;

/** An output as an array (a number becomes a one-element array). */
function asArray(x: ArrayLike<number> | number): ArrayLike<number> {
  return typeof x === 'number' ? [x] : x;
}

/**
 * Asserts that every output of `got` is within `tol` relative error of the same output of `want`. With `sharedScale`,
 * errors are relative to the largest |want| over all outputs (for outputs in the same units, such as the gradients of
 * one function, where one of them may be legitimately ~0); otherwise each output is relative to its own largest |want|.
 */
export function assertOutputsClose(got: Outputs, want: Outputs, tol: number, sharedScale = false): void {
  assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), 'the same outputs');
  const numeric = Object.values(want).filter((w) => typeof w !== 'boolean');
  const floor = sharedScale ? Math.max(1e-6, ...numeric.map((w) => maxAbs(asArray(w)))) : 1e-6;
  for (const [name, w] of Object.entries(want)) {
    const g = got[name];
    if (typeof w === 'boolean') {
      assert.equal(g, w, name);
      continue;
    }
    const err = relError(asArray(g as ArrayLike<number> | number), asArray(w), floor);
    assert.ok(err <= tol, `${name}: relative error ${err.toExponential(3)} > ${tol.toExponential(1)}`);
  }
}

/**
 * Central finite differences of a policy loss in every log-prob of every sequence of `batch` (step h), flattened in
 * sequence then token order — the reference for the analytic gradients of the loss functions.
 */
export function logProbFiniteDifferences<S extends { logProbs: ArrayLike<number> }>(
  batch: readonly S[],
  loss: (batch: S[]) => number,
  h = 1e-6,
): number[] {
  return batch.flatMap((sq, i) =>
    Array.from(sq.logProbs, (_, t) => {
      const at = (delta: number): number => {
        const lp = Float64Array.from(sq.logProbs);
        lp[t]! += delta;
        return loss(batch.map((x, j) => (j === i ? { ...x, logProbs: lp } : x)));
      };
      return (at(h) - at(-h)) / (2 * h);
    }),
  );
}

/** Asserts |got − want| ≤ tol for each entry. */
export function near(got: ArrayLike<number> | number, want: ArrayLike<number> | number, tol: number, what = ''): void {
  const g = typeof got === 'number' ? [got] : Array.from(got);
  const w = typeof want === 'number' ? [want] : Array.from(want);
  assert.equal(g.length, w.length, `${what}: length`);
  for (let i = 0; i < w.length; i++) {
    assert.ok(Math.abs(g[i]! - w[i]!) <= tol, `${what}[${i}]: got ${g[i]}, want ${w[i]} (±${tol})`);
  }
}

/** Asserts a loss's per-sequence gradients equal finite differences `fd` within 2e-5 of the largest |fd| (≥ 1e-3). */
export function assertGradientMatches(grad: readonly Float32Array[], fd: readonly number[], label: string): void {
  const scale = Math.max(1e-3, ...fd.map(Math.abs));
  near(
    grad.flatMap((g) => Array.from(g)),
    fd,
    2e-5 * scale,
    label,
  );
}

/** A safetensors file built by hand from a header object and raw data, padded like the reference. */
export function rawFile(header: unknown, data: Uint8Array, pad: boolean = true): Uint8Array {
  let json = JSON.stringify(header);
  if (pad) json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const h = Buffer.from(json);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.byteLength));
  return Buffer.concat([len, h, data]);
}
