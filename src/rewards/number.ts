/**
 * Exact numbers for the fast path: decimals, fractions and mixed numbers as bigint rationals, so `0.1+0.2`-style float
 * error never decides a check and huge integers compare exactly. Hand-written (not the symbolic engine) because this
 * path runs in-process on every sample and must take microseconds.
 */

/** An exact rational n/d with d > 0, in lowest terms. */
export interface Rational {
  n: bigint;
  d: bigint;
}

/** A parsed numeric answer; `percent` is set when it was written with a `%` sign (the value is without it). */
export interface ParsedNumber {
  value: Rational;
  percent: boolean;
}

const DECIMAL =
  /^([+-])?(\d{1,3}(?:,\d{3})+|\d{1,3}(?: \d{3})+|\d*)(?:\.(\d*))?(?:(?:e|\\times ?10\^|\\cdot ?10\^)\{?([+-]?\d{1,4})\}?)?$/;
const FRAC = /^([+-])?(\d+)?\\frac\{([^{}]+)\}\{([^{}]+)\}$/;
const SLASH = /^([+-])?([^/]+)\/([^/]+)$/;
/** Exponents beyond this are left to the symbolic path rather than building giant bigints. */
const MAX_EXP = 400;

function abs(x: bigint): bigint {
  return x < 0n ? -x : x;
}

function gcd(a: bigint, b: bigint): bigint {
  a = abs(a);
  b = abs(b);
  while (b) [a, b] = [b, a % b];
  return a;
}

/** n/d in lowest terms with a positive denominator; null when d is 0. */
export function rational(n: bigint, d: bigint): Rational | null {
  if (d === 0n) return null;
  if (d < 0n) [n, d] = [-n, -d];
  const g = gcd(n, d) || 1n;
  return { n: n / g, d: d / g };
}

/** A decimal like `-7,425,000`, `.4`, `1000.0`, `1.5e3` or `1.5\times10^{3}` as an exact rational, or null. */
function parseDecimal(s: string): Rational | null {
  const m = DECIMAL.exec(s);
  if (!m) return null;
  const [, sign, intPart = '', frac = '', exp = '0'] = m;
  if (intPart === '' && frac === '') return null;
  const e = Number(exp) - frac.length;
  if (Math.abs(e) > MAX_EXP) return null;
  const digits = BigInt(intPart.replace(/[, ]/g, '') + frac || '0') * (sign === '-' ? -1n : 1n);
  return e >= 0 ? rational(digits * 10n ** BigInt(e), 1n) : rational(digits, 10n ** BigInt(-e));
}

function add(a: Rational, b: Rational): Rational {
  return rational(a.n * b.d + b.n * a.d, a.d * b.d)!;
}

function divide(a: Rational, b: Rational): Rational | null {
  return rational(a.n * b.d, a.d * b.n);
}

function negate(a: Rational, sign: string | undefined): Rational {
  return sign === '-' ? { n: -a.n, d: a.d } : a;
}

/** Parses a normalised answer that is a plain number: decimal, `a/b`, `\frac{a}{b}`, `2\frac{1}{2}`, with `%`. */
export function parseNumber(input: string): ParsedNumber | null {
  const percent = input.endsWith('%');
  const s = percent ? input.slice(0, -1).trim() : input;
  const value = parseDecimal(s) ?? parseFraction(s);
  return value ? { value, percent } : null;
}

function parseFraction(s: string): Rational | null {
  const f = FRAC.exec(s);
  if (f) {
    const [, sign, whole, num, den] = f;
    const a = parseDecimal(num!);
    const b = parseDecimal(den!);
    const q = a && b ? divide(a, b) : null;
    if (!q) return null;
    // A mixed number `2\frac{1}{2}` is 2 + 1/2, the reading the symbolic engine also takes.
    return negate(whole === undefined ? q : add(rational(BigInt(whole), 1n)!, q), sign);
  }
  const sl = SLASH.exec(s);
  if (!sl) return null;
  const a = parseDecimal(sl[2]!);
  const b = parseDecimal(sl[3]!);
  const q = a && b ? divide(a, b) : null;
  return q ? negate(q, sl[1]) : null;
}

/** True when `s` is a fraction (`a/0`, `\frac{a}{0}`) whose denominator is a number equal to zero: undefined. */
export function zeroDenominator(s: string): boolean {
  const den = FRAC.exec(s)?.[4] ?? SLASH.exec(s)?.[3];
  const d = den === undefined ? null : parseDecimal(den.trim());
  return d !== null && d.n === 0n;
}

/** True when a and b are exactly equal. */
export function exactEqual(a: Rational, b: Rational): boolean {
  return a.n === b.n && a.d === b.d;
}

/** Tolerances are applied in integer arithmetic at this scale, so they are exact for any magnitude. */
const TOL_SCALE = 10n ** 15n;

/**
 * True when |a − b| ≤ relTol · max(|a|, |b|), computed exactly on the rationals. Two integers never get the
 * tolerance: it stands for rounding, and 1,450,001 is not 1,450,000 rounded.
 */
export function closeEqual(a: Rational, b: Rational, relTol: number): boolean {
  if (a.d === 1n && b.d === 1n) return a.n === b.n;
  const diff = abs(a.n * b.d - b.n * a.d);
  const big = abs(a.n) * b.d > abs(b.n) * a.d ? abs(a.n) * b.d : abs(b.n) * a.d;
  const tol = BigInt(Math.round(relTol * Number(TOL_SCALE)));
  return diff * TOL_SCALE <= tol * big;
}

/** The rational divided by 100 (for reading `50%` as 0.5). */
export function percentOf(a: Rational): Rational {
  return rational(a.n, a.d * 100n)!;
}
