/** Pulling the final answer out of a model response or a dataset's gold solution. */
import { groupEnd } from './latex.js';

/**
 * Which extractors to try, in this fixed order: boxed, hashes, answerIs, lastNumber, whole. The first that finds
 * something wins.
 */
export interface ExtractOptions {
  /** The last `\boxed{…}` or `\fbox{…}` (nested braces kept), or `\boxed 5` without braces; default true. */
  boxed?: boolean;
  /** The text after the last `####` on its line (GSM8K gold style); default false for responses, true for golds. */
  hashes?: boolean;
  /** X from the last "the answer is X" / "answer: X" (to the end of its line, trailing `.` dropped); default false. */
  answerIs?: boolean;
  /** The last number in the text (`-1,250.5`, `3/4`); default false. */
  lastNumber?: boolean;
  /** The whole text, trimmed; default false for responses, true for golds. */
  whole?: boolean;
}

/** Defaults for model responses: only a boxed answer counts, so the format is part of what is rewarded. */
export const RESPONSE_EXTRACT: Readonly<Required<ExtractOptions>> = Object.freeze({
  boxed: true,
  hashes: false,
  answerIs: false,
  lastNumber: false,
  whole: false,
});

/**
 * For whole responses whose format is not fixed (what `hacrl verify` reads by default, and GSM8K data): the last
 * `\boxed{}`, then `#### N`, then "the answer is N".
 */
export const FULL_RESPONSE_EXTRACT: Readonly<Required<ExtractOptions>> = Object.freeze({
  boxed: true,
  hashes: true,
  answerIs: true,
  lastNumber: false,
  whole: false,
});

/** Defaults for gold answers: boxed (MATH solutions), then `#### 18` (GSM8K), then the whole string. */
export const GOLD_EXTRACT: Readonly<Required<ExtractOptions>> = Object.freeze({
  boxed: true,
  hashes: true,
  answerIs: false,
  lastNumber: false,
  whole: true,
});

const BOX = /\\(?:boxed|fbox)(?![A-Za-z])/g;

/** The content of the last `\boxed{…}`/`\fbox{…}` in `text` (or `\boxed 5`), or null when there is none or it is unclosed. */
export function extractBoxed(text: string): string | null {
  let at = -1;
  let len = 0;
  for (const m of text.matchAll(BOX)) [at, len] = [m.index, m[0].length];
  if (at < 0) return null;
  let i = at + len;
  while (text[i] === ' ') i++;
  if (text[i] === '{') {
    const end = groupEnd(text, i);
    return end < 0 ? null : text.slice(i + 1, end - 1).trim();
  }
  // `\boxed 5`: only a simple token (up to a space or `$`) is taken, since anything longer has no clear end.
  const token = /^[^\s$]+/.exec(text.slice(i))?.[0].replace(/\.$/, '');
  return token ? token : null;
}

/** The text after the last `####`, to the end of its line, or null. */
export function extractHashes(text: string): string | null {
  const at = text.lastIndexOf('####');
  if (at < 0) return null;
  const rest = text
    .slice(at + 4)
    .split('\n')[0]!
    .trim();
  return rest === '' ? null : rest;
}

const ANSWER_IS = /answer\s*(?:is\s*:?|:)\s*/gi;

/** X from the last "the answer is X" / "answer: X", to the end of its line without a trailing `.`, or null. */
export function extractAnswerIs(text: string): string | null {
  let end = -1;
  for (const m of text.matchAll(ANSWER_IS)) end = m.index + m[0].length;
  if (end < 0) return null;
  const rest = text
    .slice(end)
    .split('\n')[0]!
    .trim()
    .replace(/\s*\.$/, '');
  return rest === '' ? null : rest;
}

const NUMBER = /-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:\/\d+)?/g;

/** The last number in the text (thousands commas kept, a trailing comma dropped), or null. */
export function extractLastNumber(text: string): string | null {
  let last: string | null = null;
  for (const m of text.matchAll(NUMBER)) last = m[0];
  return last === null ? null : last.replace(/,+$/, '');
}

/** The extractors by option name, in the order they are tried. */
const EXTRACTORS: readonly [keyof ExtractOptions, (t: string) => string | null][] = [
  ['boxed', extractBoxed],
  ['hashes', extractHashes],
  ['answerIs', extractAnswerIs],
  ['lastNumber', extractLastNumber],
  ['whole', (t) => (t.trim() === '' ? null : t.trim())],
];

/** The names of the extractors, in the order they are tried. */
export const EXTRACTOR_NAMES: readonly (keyof ExtractOptions)[] = EXTRACTORS.map(([name]) => name);

/** The answer in `text` and the extractor that found it (see ExtractOptions), or null when none did. */
export function extractAnswerWith(
  text: string,
  opts: ExtractOptions = RESPONSE_EXTRACT,
): { answer: string; by: keyof ExtractOptions } | null {
  const o = { ...RESPONSE_EXTRACT, ...opts };
  for (const [name, fn] of EXTRACTORS) {
    if (!o[name]) continue;
    const found = fn(text);
    if (found !== null) return { answer: found, by: name };
  }
  return null;
}

/** The answer in `text` by the first extractor in `opts` that finds one (see ExtractOptions), or null. */
export function extractAnswer(text: string, opts: ExtractOptions = RESPONSE_EXTRACT): string | null {
  return extractAnswerWith(text, opts)?.answer ?? null;
}

/** The answer in a gold solution: boxed, else after `####`, else the whole string (GOLD_EXTRACT), or null. */
export function extractGold(gold: string): string | null {
  return extractAnswer(gold, GOLD_EXTRACT);
}
