// Finds \boxed{...} answers in LaTeX-ish solution text by brace matching (the full answer verifier lives in
// src/rewards/; this is only what reading data files needs).

/**
 * The index of the `}` that closes the `{` at `open`, or -1 when it is never closed. Escaped braces (`\{`, `\}`)
 * do not count, and `\\` escapes only itself.
 */
export function matchBrace(text: string, open: number): number {
  if (text[open] !== '{') throw new Error(`matchBrace: no '{' at index ${open}`);
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === '\\') i++;
    else if (c === '{') depth++;
    else if (c === '}' && --depth === 0) return i;
  }
  return -1;
}

/** The contents of the last well-formed `\boxed{…}` (or `\fbox{…}`) in `text`, trimmed; null when there is none. */
export function lastBoxed(text: string): string | null {
  const starts = [...text.matchAll(/\\(?:boxed|fbox)\s*\{/g)];
  for (const m of starts.reverse()) {
    const open = m.index + m[0].length - 1;
    const close = matchBrace(text, open);
    if (close >= 0) return text.slice(open + 1, close).trim();
  }
  return null;
}
