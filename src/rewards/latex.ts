/** Small LaTeX scanning helpers shared by answer extraction and normalisation (brace groups, top-level splits). */

/**
 * Index just past the `}` that closes the group opened by the `{` at `open`, or -1 when it never closes. Escaped
 * braces (`\{`, `\}`) are literal characters in LaTeX, not group delimiters, so they are skipped.
 */
export function groupEnd(s: string, open: number): number {
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    const c = s[i];
    if (c === '\\') i++;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i + 1;
  }
  return -1;
}

/**
 * Reads one macro argument starting at `i` (spaces skipped): a `{…}` group, a control word (`\pi`) or one character.
 * Returns the argument's text without outer braces and the index after it, or null at the end of the string.
 */
export function readArg(s: string, i: number): { text: string; end: number } | null {
  while (s[i] === ' ') i++;
  if (i >= s.length) return null;
  if (s[i] === '{') {
    const end = groupEnd(s, i);
    return end < 0 ? null : { text: s.slice(i + 1, end - 1), end };
  }
  if (s[i] === '\\') {
    const word = /^\\(?:[A-Za-z]+|.)/.exec(s.slice(i))![0];
    return { text: word, end: i + word.length };
  }
  return { text: s[i]!, end: i + 1 };
}

/**
 * Rewrites every `\name` macro (not a longer control word that starts with it) with `fn(args)`, reading `arity`
 * arguments; an optional `[…]` argument right after the name (as in `\sqrt[3]{x}`) is passed as `opt`.
 */
export function mapMacro(s: string, name: string, arity: number, fn: (args: string[], opt: string) => string): string {
  const head = `\\${name}`;
  let out = '';
  let i = 0;
  for (;;) {
    const at = s.indexOf(head, i);
    if (at < 0) return out + s.slice(i);
    let j = at + head.length;
    if (/[A-Za-z]/.test(s[j] ?? '')) {
      out += s.slice(i, j);
      i = j;
      continue;
    }
    let opt = '';
    if (s[j] === '[') {
      const close = s.indexOf(']', j);
      if (close > 0) {
        opt = s.slice(j, close + 1);
        j = close + 1;
      }
    }
    const args: string[] = [];
    for (let k = 0; k < arity; k++) {
      const a = readArg(s, j);
      if (!a) break;
      args.push(a.text);
      j = a.end;
    }
    if (args.length < arity) return out + s.slice(i);
    out += s.slice(i, at) + fn(args, opt);
    i = j;
  }
}

/** Opening and closing characters counted as nesting when splitting at top level (intervals mix `[` with `)`). */
const OPENERS = new Set(['(', '[', '{']);
const CLOSERS = new Set([')', ']', '}']);

/** Splits `s` at each top-level occurrence of `sep` (outside any bracket or brace), keeping empty parts. */
export function splitTop(s: string, sep: string): string[] {
  const word = /^\\[A-Za-z]+$/.test(sep);
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    if (depth === 0 && s.startsWith(sep, i) && !(word && /[A-Za-z]/.test(s[i + sep.length] ?? ''))) {
      parts.push(s.slice(start, i));
      start = i + sep.length;
      i = start - 1;
      continue;
    }
    const c = s[i]!;
    if (c === '\\') {
      // `\{` and `\}` nest like braces; any other escape is skipped whole so `\,` never reads as a comma.
      if (s[i + 1] === '{') depth++;
      else if (s[i + 1] === '}') depth--;
      i++;
    } else if (OPENERS.has(c)) depth++;
    else if (CLOSERS.has(c)) depth--;
  }
  parts.push(s.slice(start));
  return parts;
}

/**
 * Index just past the bracket that closes the one at `open` (any of `( [ \{`, matched by depth, not by type, so
 * `[0,1)` closes), or -1.
 */
export function bracketEnd(s: string, open: number): number {
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    const c = s[i]!;
    if (c === '\\') {
      if (s[i + 1] === '{') depth++;
      else if (s[i + 1] === '}' && --depth === 0) return i + 2;
      i++;
    } else if (OPENERS.has(c)) depth++;
    else if (CLOSERS.has(c) && --depth === 0) return i + 1;
  }
  return -1;
}
