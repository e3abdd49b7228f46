/**
 * Size limits on what the verifier reads, so that no answer, however hostile, can make a check slow or crash it:
 * long answers are refused before normalisation (whose passes are at worst quadratic in the length) and deep nesting
 * before any parse (which recurses once per level, in this process and in the symbolic engine).
 */
import type { CheckResult } from './compare.js';

/** Longest extracted answer or gold (in UTF-16 units) the verifier reads; real answers are under a few hundred. */
export const MAX_ANSWER_CHARS = 1000;
/** Deepest nesting of `( [ {` (also `\left(`, `\{`) the verifier reads; real answers nest under ten deep. */
export const MAX_NESTING = 64;

/** The deepest nesting of brackets and braces in `s`, in one pass (closers without openers are ignored). */
export function nestingDepth(s: string): number {
  let depth = 0;
  let max = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    // ( [ {  and  ) ] }
    if (c === 40 || c === 91 || c === 123) max = Math.max(max, ++depth);
    else if ((c === 41 || c === 93 || c === 125) && depth > 0) depth--;
  }
  return max;
}

/**
 * Why `text` (one side of a check) cannot be read, as the check's result, or null when it can: too long, too deep,
 * or holding U+FFFD (text that was not valid UTF-8 and was decoded with replacements, so two different byte strings
 * would look alike). `side` names it in the detail.
 */
export function refuseText(text: string, side: 'gold' | 'answer'): CheckResult | null {
  const equal = null;
  if (text.length > MAX_ANSWER_CHARS)
    return { equal, reason: 'too-long', detail: `${side} has ${text.length} characters (limit ${MAX_ANSWER_CHARS})` };
  const depth = nestingDepth(text);
  if (depth > MAX_NESTING)
    return { equal, reason: 'too-deep', detail: `${side} nests ${depth} brackets deep (limit ${MAX_NESTING})` };
  if (text.includes('\uFFFD'))
    return side === 'gold'
      ? { equal, reason: 'unparseable-gold', detail: 'gold holds U+FFFD (text that was not valid UTF-8)' }
      : { equal: false, reason: 'unparseable-answer', detail: 'answer holds U+FFFD (text that was not valid UTF-8)' };
  return null;
}

/** A point in time (performance.now() milliseconds) after which a check gives up with reason 'timeout'. */
export class Deadline {
  /** When the check started, in performance.now() milliseconds. */
  readonly start = performance.now();
  /** The whole check's limit in milliseconds. */
  constructor(readonly limitMs: number) {}
  /** Milliseconds left (may be ≤ 0). */
  left(): number {
    return this.limitMs - (performance.now() - this.start);
  }
  /** The time-out result when the limit has passed, else null. */
  expired(): CheckResult | null {
    return this.left() > 0
      ? null
      : { equal: null, reason: 'timeout', detail: `no verdict within ${this.limitMs} ms (whole check)` };
  }
}
