/**
 * The shape of a normalised answer: a number, a bracketed sequence (tuple or interval), an unordered list or set, a
 * union, a word answer or a math expression left to the symbolic engine (`a \pm b` becomes the list a+b, a−b).
 * Hand-written because the shapes decide how parts are matched (ordered, unordered, bracket types) before any part
 * reaches the library.
 */
import { bracketEnd, splitTop } from './latex.js';
import { dropAssignment } from './normalize.js';
import { parseNumber, type ParsedNumber } from './number.js';

/** A parsed answer; `src` is the normalised text it came from. */
export type Answer =
  | { kind: 'number'; src: string; num: ParsedNumber }
  /** `(a,b)`, `[a,b)`, …: ordered, and the bracket characters must match (so `[0,1)` ≠ `(0,1)`). */
  | { kind: 'seq'; src: string; open: string; close: string; items: Answer[] }
  /** A bare `a, b` list or a set `\{a, b\}`: unordered, compared as multisets. */
  | { kind: 'list'; src: string; items: Answer[] }
  /** `A \cup B`: unordered parts. */
  | { kind: 'union'; src: string; items: Answer[] }
  /** A word answer, compared as normalised text. */
  | { kind: 'text'; src: string; text: string }
  /** Anything else: LaTeX for the symbolic engine. */
  | { kind: 'expr'; src: string };

/** A whole answer that is one number with thousands commas (`7,425,000`): a number, not a list. */
const THOUSANDS = /^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?$/;

/** Normalised text of a word answer: lower case, punctuation and extra spaces dropped. */
export function wordText(s: string): string {
  return s
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s]/gu, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

/**
 * A word answer has a run of three or more letters that is not part of a control word (`\infty`), since short runs
 * are products of variables (`xy`, `2ab`) and the symbolic engine would read `east` as e·a·s·t.
 */
export function isWordAnswer(s: string): boolean {
  return /(?<![\\A-Za-z])[A-Za-z]{3,}/.test(s.replace(/\\[A-Za-z]+/g, ' '));
}

function parseItems(parts: string[]): Answer[] {
  return parts.map((p) => parseAnswer(dropAssignment(p.trim())));
}

/** Recognises `(…)`, `[…]`, `[…)`, `(…]` and `\{…\}` enclosing the whole string; returns the inner text. */
function enclosed(s: string): { open: string; close: string; inner: string } | null {
  const open = s.startsWith('\\{') ? '\\{' : s[0];
  if (open !== '(' && open !== '[' && open !== '\\{') return null;
  if (bracketEnd(s, 0) !== s.length) return null;
  const close = s.endsWith('\\}') ? '\\}' : s.slice(-1);
  return { open, close, inner: s.slice(open.length, s.length - close.length) };
}

/**
 * Parses a normalised answer into its shape. A comma is a thousands separator only when the whole answer is one
 * number in 3-digit groups (`7,425,000`, `1,000`); any other top-level comma separates list items (`1,2`), and
 * inside brackets commas always separate.
 */
export function parseAnswer(s: string): Answer {
  const pm = splitTop(s, '\\pm');
  // `a \pm b` is the two answers a+b and a−b.
  if (pm.length === 2) return parseAnswer(`${pm[0]}+${pm[1]},${pm[0]}-${pm[1]}`);
  const union = splitTop(s, '\\cup');
  if (union.length > 1) return { kind: 'union', src: s, items: parseItems(union) };
  const br = enclosed(s);
  if (br) {
    const parts = splitTop(br.inner, ',');
    if (br.open === '\\{') return { kind: 'list', src: s, items: parseItems(parts) };
    // A single parenthesised or bracketed item is just that item: `(5)` = 5, and an interval needs two ends.
    if (parts.length === 1) return parseAnswer(br.inner.trim());
    return { kind: 'seq', src: s, open: br.open, close: br.close, items: parseItems(parts) };
  }
  if (!THOUSANDS.test(s)) {
    const parts = splitTop(s, ',');
    if (parts.length > 1) return { kind: 'list', src: s, items: parseItems(parts) };
  }
  const num = parseNumber(s);
  if (num) return { kind: 'number', src: s, num };
  if (isWordAnswer(s)) return { kind: 'text', src: s, text: wordText(s) };
  return { kind: 'expr', src: s };
}
