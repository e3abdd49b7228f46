// Exact rational arithmetic on BigInt, so generated answers never suffer floating-point rounding.

/** A fraction num/den in lowest terms with den > 0. */
export interface Fraction {
  /** Numerator (carries the sign). */
  readonly num: bigint;
  /** Denominator, always positive. */
  readonly den: bigint;
}

/** The absolute value of a BigInt. */
export function absBig(a: bigint): bigint {
  return a < 0n ? -a : a;
}

/** Greatest common divisor (non-negative; gcd(0, 0) = 0). */
export function gcd(a: bigint, b: bigint): bigint {
  a = absBig(a);
  b = absBig(b);
  while (b !== 0n) [a, b] = [b, a % b];
  return a;
}

/** Least common multiple of two non-zero integers (positive). */
export function lcm(a: bigint, b: bigint): bigint {
  return absBig(a / gcd(a, b)) * absBig(b);
}

/** num/den reduced to lowest terms with a positive denominator; throws on a zero denominator. */
export function fraction(num: bigint, den: bigint = 1n): Fraction {
  if (den === 0n) throw new Error('fraction with zero denominator');
  const g = gcd(num, den) || 1n;
  const sign = den < 0n ? -1n : 1n;
  return { num: (sign * num) / g, den: (sign * den) / g };
}

/** a + b. */
export function addFractions(a: Fraction, b: Fraction): Fraction {
  return fraction(a.num * b.den + b.num * a.den, a.den * b.den);
}

/** a - b. */
export function subFractions(a: Fraction, b: Fraction): Fraction {
  return fraction(a.num * b.den - b.num * a.den, a.den * b.den);
}

/** a * b. */
export function mulFractions(a: Fraction, b: Fraction): Fraction {
  return fraction(a.num * b.num, a.den * b.den);
}

/** "p/q", or "p" when the denominator is 1 (so integers read as integers: "-3/4", "2", "0"). */
export function formatFraction(f: Fraction): string {
  return f.den === 1n ? `${f.num}` : `${f.num}/${f.den}`;
}
