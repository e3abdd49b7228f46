/**
 * Comparing two parsed answers shape by shape. The leaves that need algebra (expressions) go to a `LeafCompare`: the
 * in-process fast path passes one that answers "undecided", the symbolic worker one backed by the compute engine.
 */
import { closeEqual, exactEqual, percentOf, type ParsedNumber, type Rational } from './number.js';
import type { Answer } from './parse-answer.js';

/** Why a check came out as it did. */
export type Reason =
  /** The normalised strings or exact rationals agree (or differ, for `equal: false` on numbers, see 'numeric'). */
  | 'exact'
  /** Numbers within the relative tolerance, or numeric evaluation of constant expressions. */
  | 'numeric'
  /** The compute engine: structural identity, identity proof or agreement at random points. */
  | 'symbolic'
  /** Word answers compared as normalised text. */
  | 'text'
  /** Shapes differ: bracket types, tuple vs list, number of items. */
  | 'structure'
  /** The symbolic check ran past its time limit; `equal` is null. */
  | 'timeout'
  /** The gold has no answer or the engine cannot parse it; `equal` is null and the pair should be skipped. */
  | 'unparseable-gold'
  /** The answer is empty or cannot be parsed; `equal` is false. */
  | 'unparseable-answer'
  /** The fast path could not decide without the symbolic engine; `equal` is null. */
  | 'undecided'
  /** The symbolic worker failed; `equal` is null. */
  | 'error'
  /** A side is longer than the verifier reads (see limits.ts); `equal` is null. */
  | 'too-long'
  /** A side nests brackets deeper than the verifier reads (see limits.ts); `equal` is null. */
  | 'too-deep';

/** The outcome of one check: `equal` is null when there is no verdict (see `reason`). */
export interface CheckResult {
  equal: boolean | null;
  reason: Reason;
  /** Extra words for null verdicts (an error message, the time limit). */
  detail?: string;
}

/** Options of the comparison itself. */
export interface CompareOptions {
  /** Relative tolerance for numbers: |a − b| ≤ relTol · max(|a|, |b|). */
  relTol: number;
  /** Lenient percent: `50%` equals 50 and 0.5; when false it equals only 0.5. */
  percentLenient: boolean;
}

/** Compares two LaTeX leaves (gold first); must return a verdict or a null with its reason. */
export type LeafCompare = (gold: string, answer: string) => CheckResult;

/** The leaf comparison of the fast path: anything that needs algebra is left undecided. */
export const UNDECIDED: LeafCompare = () => ({ equal: null, reason: 'undecided' });

/** The values a number may stand for: itself, or with `%` read as /100 (and also as itself when lenient). */
function readings(x: ParsedNumber, o: CompareOptions): Rational[] {
  if (!x.percent) return [x.value];
  return o.percentLenient ? [x.value, percentOf(x.value)] : [percentOf(x.value)];
}

function compareNumbers(g: ParsedNumber, a: ParsedNumber, o: CompareOptions): CheckResult {
  // Both written with `%`: compare the numbers as written.
  const gs = g.percent && a.percent ? [g.value] : readings(g, o);
  const as = g.percent && a.percent ? [a.value] : readings(a, o);
  const pairs = gs.flatMap((x) => as.map((y) => [x, y] as const));
  if (pairs.some(([x, y]) => exactEqual(x, y))) return { equal: true, reason: 'exact' };
  if (pairs.some(([x, y]) => closeEqual(x, y, o.relTol))) return { equal: true, reason: 'numeric' };
  return { equal: false, reason: 'numeric' };
}

/** LaTeX for the symbolic engine: numbers as exact fractions (never `7,425,000`, which it reads as a tuple). */
function leafLatex(x: Answer, o: CompareOptions): string[] {
  if (x.kind !== 'number') return [x.src];
  return readings(x.num, o).map((r) => (r.d === 1n ? `${r.n}` : `\\frac{${r.n}}{${r.d}}`));
}

/** Verdict order when several parts disagree: an unparseable gold part voids the whole, then a definite false wins. */
function worst(results: CheckResult[]): CheckResult | null {
  return (
    results.find((r) => r.reason === 'unparseable-gold') ??
    results.find((r) => r.equal === false) ??
    results.find((r) => r.equal === null) ??
    null
  );
}

const STRENGTH: Reason[] = ['exact', 'text', 'numeric', 'symbolic'];

/** All parts equal: the reason is the strongest tool any part needed. */
function allEqual(results: CheckResult[]): CheckResult {
  const reason = results.reduce<Reason>(
    (best, r) => (STRENGTH.indexOf(r.reason) > STRENGTH.indexOf(best) ? r.reason : best),
    'exact',
  );
  return { equal: true, reason };
}

function compareOrdered(g: Answer[], a: Answer[], leaf: LeafCompare, o: CompareOptions): CheckResult {
  const results: CheckResult[] = [];
  for (const [i, gi] of g.entries()) {
    const r = compareAnswers(gi, a[i]!, leaf, o);
    if (r.equal === false && r.reason !== 'unparseable-gold') return r;
    results.push(r);
  }
  return worst(results) ?? allEqual(results);
}

/** Multiset match; greedy is exact here because equality of answers is (to tolerance) an equivalence relation. */
function compareUnordered(g: Answer[], a: Answer[], leaf: LeafCompare, o: CompareOptions): CheckResult {
  const used = new Set<number>();
  const matched: CheckResult[] = [];
  for (const gi of g) {
    let hit: CheckResult | null = null;
    const misses: CheckResult[] = [];
    for (const [j, aj] of a.entries()) {
      if (used.has(j)) continue;
      const r = compareAnswers(gi, aj, leaf, o);
      if (r.reason === 'unparseable-gold') return r;
      if (r.equal === true) {
        used.add(j);
        hit = r;
        break;
      }
      misses.push(r);
    }
    if (!hit) return misses.find((r) => r.equal === null) ?? { equal: false, reason: 'structure' };
    matched.push(hit);
  }
  return allEqual(matched);
}

function compareComposite(g: Answer, a: Answer, leaf: LeafCompare, o: CompareOptions): CheckResult {
  if (g.kind !== a.kind || !('items' in g) || !('items' in a) || g.items.length !== a.items.length)
    return { equal: false, reason: 'structure' };
  if (g.kind === 'seq' && a.kind === 'seq') {
    if (g.open !== a.open || g.close !== a.close) return { equal: false, reason: 'structure' };
    return compareOrdered(g.items, a.items, leaf, o);
  }
  return compareUnordered(g.items, a.items, leaf, o);
}

/** Compares a parsed gold with a parsed answer; `leaf` decides expression leaves. */
export function compareAnswers(g: Answer, a: Answer, leaf: LeafCompare, o: CompareOptions): CheckResult {
  if (g.src === a.src) return { equal: true, reason: 'exact' };
  if (g.kind === 'number' && a.kind === 'number') return compareNumbers(g.num, a.num, o);
  if (g.kind === 'text' || a.kind === 'text')
    return { equal: g.kind === 'text' && a.kind === 'text' && g.text === a.text, reason: 'text' };
  const composite = (x: Answer): boolean => x.kind === 'seq' || x.kind === 'list' || x.kind === 'union';
  if (composite(g) || composite(a)) return compareComposite(g, a, leaf, o);
  const results = leafLatex(g, o).flatMap((gl) => leafLatex(a, o).map((al) => leaf(gl, al)));
  return results.find((r) => r.equal === true) ?? worst(results)!;
}
