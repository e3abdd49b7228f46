/**
 * The symbolic leaf comparison, backed by @cortex-js/compute-engine: structural identity, numeric evaluation of
 * constants, the engine's identity test, then agreement at random points. Runs inside the worker (symbolic-worker.ts),
 * where a time limit can end it.
 */
import type { ComputeEngine, Expression } from '@cortex-js/compute-engine';
import { compareAnswers, type CheckResult, type CompareOptions, type LeafCompare } from './compare.js';
import type { Rational } from './number.js';
import { parseAnswer } from './parse-answer.js';

/** A pair to check symbolically: both already normalised (see normalize.ts), with the comparison options. */
export interface SymbolicJob extends CompareOptions {
  gold: string;
  answer: string;
}

/** Values below this magnitude count as zero, so `\sin(\pi)` (≈1e-16 numerically) equals 0. */
const ABS_TOL = 1e-12;
/** Random points tried when the identity test cannot decide; all valid ones must agree. */
const SAMPLE_POINTS = 8;
/** Points that must evaluate to finite values on both sides for agreement to mean equality. */
const MIN_VALID_POINTS = 3;

/** True when two (complex) values agree to `relTol`, or are the same infinity. */
function valuesClose(a: Expression, b: Expression, relTol: number): boolean {
  const [ar, ai, br, bi] = [a.re, a.im || 0, b.re, b.im || 0];
  if (!Number.isFinite(ar) || !Number.isFinite(br)) return ar === br && ai === bi;
  const diff = Math.hypot(ar - br, ai - bi);
  return diff <= Math.max(ABS_TOL, relTol * Math.max(Math.hypot(ar, ai), Math.hypot(br, bi)));
}

/** A number-valued result (finite or infinite), as opposed to NaN from an expression that did not evaluate. */
function isNumeric(x: Expression): boolean {
  return !Number.isNaN(x.re);
}

/** A seeded generator (mulberry32) so a pair always gets the same sample points. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), s | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Compares at random points with |v| in [0.5, 2.5) and either sign: away from 0 (poles), and negative values too so
 * that `\sqrt{x^2}` ≠ x is caught (complex intermediate values are compared as complex numbers).
 */
function spotCheck(g: Expression, a: Expression, vars: string[], relTol: number): CheckResult {
  const next = rng(0x5eed);
  let valid = 0;
  for (let k = 0; k < SAMPLE_POINTS; k++) {
    const point = Object.fromEntries(vars.map((v) => [v, (next() < 0.5 ? -1 : 1) * (0.5 + 2 * next())]));
    const gv = g.subs(point).N();
    const av = a.subs(point).N();
    if (!isNumeric(gv) || !isNumeric(av) || !Number.isFinite(gv.re) || !Number.isFinite(av.re)) continue;
    if (!valuesClose(gv, av, relTol)) return { equal: false, reason: 'symbolic' };
    valid++;
  }
  return valid >= MIN_VALID_POINTS
    ? { equal: true, reason: 'symbolic' }
    : { equal: false, reason: 'symbolic', detail: 'too few points where both sides evaluate' };
}

/** Beyond this magnitude a double cannot tell neighbouring integers apart, so a float comparison proves nothing. */
const FLOAT_EXACT_LIMIT = 2 ** 53;

/** An integer in the engine's JSON (a number, or `{num: "123…"}` / `{num: "1e+30"}` for big ones), or null. */
function bigFromJson(j: unknown): bigint | null {
  if (typeof j === 'number') return Number.isSafeInteger(j) ? BigInt(j) : null;
  const num = (j as { num?: unknown } | null)?.num;
  if (typeof num !== 'string') return null;
  if (/^-?\d+$/.test(num)) return BigInt(num);
  const e = /^(-?\d+)e\+(\d{1,3})$/.exec(num);
  return e ? BigInt(e[1]!) * 10n ** BigInt(e[2]!) : null;
}

/** The exact value of an evaluated constant as a rational (the engine keeps big integers exact), or null. */
function exactValue(x: Expression): Rational | null {
  if (x.isRational !== true) return null;
  const j: unknown = x.json;
  if (Array.isArray(j) && j[0] === 'Rational' && j.length === 3) {
    const [n, d] = [bigFromJson(j[1]), bigFromJson(j[2])];
    return n !== null && d !== null && d !== 0n ? { n, d } : null;
  }
  const n = bigFromJson(j);
  return n === null ? null : { n, d: 1n };
}

/** True for the values of a division by zero or an indeterminate form: they never equal anything. */
function isUndefined(x: Expression): boolean {
  const j: unknown = x.json;
  return x.isNaN === true || j === 'ComplexInfinity' || j === 'NaN';
}

/**
 * Compares two parsed expressions without free variables: exactly when both have exact rational values (so
 * `2^{30}` ≠ 1073741825 and `1450000+1` ≠ 1450000), else by numeric value; when one side is an integer the other
 * must match it to rounding error, and integers too big for a double to separate get no verdict rather than a guess.
 */
function compareConstants(g: Expression, a: Expression, relTol: number): CheckResult {
  const ge = g.evaluate();
  const ae = a.evaluate();
  const [gq, aq] = [exactValue(ge), exactValue(ae)];
  if (gq && aq) return { equal: gq.n * aq.d === aq.n * gq.d, reason: 'exact' };
  const gv = g.N();
  const av = a.N();
  if (isNumeric(gv) && isNumeric(av)) {
    const integer = ge.isInteger === true || ae.isInteger === true;
    if (!integer) return { equal: valuesClose(gv, av, relTol), reason: 'numeric' };
    // An integer with no exact form here (`2^{10^{10}}`) or one too big for a double: floats cannot decide.
    if (!(Math.max(Math.abs(gv.re), Math.abs(av.re)) < FLOAT_EXACT_LIMIT))
      return { equal: null, reason: 'undecided', detail: 'integer beyond 2^53 against a value with no exact form' };
    return { equal: valuesClose(gv, av, ABS_TOL), reason: 'numeric' };
  }
  // Sets, strings, booleans: the engine's own value equality.
  return { equal: g.isEqual(a) === true, reason: 'symbolic' };
}

function compareParsed(g: Expression, a: Expression, relTol: number): CheckResult {
  // Undefined values first: `x/0` and `y/0` both become ComplexInfinity, which must not make them equal.
  if (isUndefined(g) || isUndefined(g.evaluate()))
    return { equal: null, reason: 'unparseable-gold', detail: 'the gold is undefined (division by zero or 0/0)' };
  if (isUndefined(a) || isUndefined(a.evaluate()))
    return { equal: false, reason: 'symbolic', detail: 'the answer is undefined (division by zero or 0/0)' };
  if (g.isSame(a)) return { equal: true, reason: 'symbolic' };
  const vars = [...new Set([...g.unknowns, ...a.unknowns])];
  if (vars.length === 0) return compareConstants(g, a, relTol);
  const identity = g.isIdenticallyEqual(a);
  if (identity !== undefined) return { equal: identity, reason: 'symbolic' };
  return spotCheck(g, a, vars, relTol);
}

/** The compute-engine leaf comparison; each call runs in its own scope so symbols one check declares do not leak. */
export function symbolicLeaf(ce: ComputeEngine, relTol: number): LeafCompare {
  return (gold, answer) => {
    ce.pushScope();
    try {
      const g = ce.parse(gold);
      if (!g.isValid) return { equal: null, reason: 'unparseable-gold', detail: `cannot parse gold "${gold}"` };
      const a = ce.parse(answer);
      if (!a.isValid) return { equal: false, reason: 'unparseable-answer' };
      return compareParsed(g, a, relTol);
    } finally {
      ce.popScope();
    }
  };
}

/** Runs a whole check (shapes, numbers, then symbolic leaves) with the engine. */
export function symbolicCheck(ce: ComputeEngine, job: SymbolicJob): CheckResult {
  return compareAnswers(parseAnswer(job.gold), parseAnswer(job.answer), symbolicLeaf(ce, job.relTol), job);
}
