/**
 * String normalisation of a math answer before comparison. Hand-written because it removes presentation that no
 * math library models (delimiters, spacing macros, units, currency, `\text{…}`, a leading `k=`), and because it runs
 * on every sample in-process, where loading the symbolic engine would cost far more than the check.
 */
import { groupEnd, mapMacro } from './latex.js';

const UNICODE: readonly [RegExp, string][] = [
  [/[\u2212\uFE63\uFF0D]/g, '-'],
  [/\u00D7/g, '\\times '],
  [/\u00F7/g, '\\div '],
  [/[\u00B7\u22C5]/g, '\\cdot '],
  [/\u03C0/g, '\\pi '],
  [/\u221E/g, '\\infty '],
  [/\u221A/g, '\\sqrt'],
  [/\u00B0/g, '^\\circ'],
  [/\u2264/g, '\\le '],
  [/\u2265/g, '\\ge '],
  [/\u222A/g, '\\cup '],
  [/[\u00A0\u2009\u202F\t\n\r]/g, ' '],
];

/** Spacing, sizing and display macros that carry no meaning (`\left`/`\right` with a `.` null delimiter too). */
const NOISE =
  /\\[,:;! ]|\\q?quad(?![A-Za-z])|~|\\displaystyle(?![A-Za-z])|\\(?:left|right|[bB]ig{1,2}[lr]?)(?![A-Za-z])\.?/g;

/** Macros whose argument is kept as plain text (units and word answers live in them). */
const TEXT_MACROS = 'text textbf textit textrm textnormal mathrm mathbf mathit boldsymbol mbox hbox'.split(' ');

const FUNCTIONS =
  /(?<![\\A-Za-z])(arcsin|arccos|arctan|sinh|cosh|tanh|sin|cos|tan|cot|sec|csc|log|ln|exp)(?![A-Za-z])/g;

/** Unit words dropped after any answer; the single-letter ones only after a plain number (else `5x` would lose x). */
const UNITS = new Set(
  (
    'unit units square sq cubic cu per cm mm km meter meters metre metres inch inches in ft feet foot yd yard yards ' +
    'mile miles mph kmh kph kg gram grams kilogram kilograms lb lbs pound pounds oz ounce ounces liter liters litre ' +
    'litres ml gallon gallons hour hours hr hrs minute minutes min mins second seconds sec secs day days week weeks ' +
    'month months year years dollar dollars cent cents degree degrees deg'
  ).split(' '),
);
const SHORT_UNITS = new Set(['m', 'g', 'l', 'h', 's']);
const PLAIN_NUMBER = /^[-+]?(?:[\d.,]+|\\frac\{\d+\}\{\d+\})$/;
const isLetter = (c: string | undefined): boolean => c !== undefined && /^[A-Za-z]$/.test(c);
const isSpace = (c: string | undefined): boolean => c === ' ';

/**
 * Where the trailing run of unit-like words starts (`12 km/h` → 2, `5 m^2` → 1), scanning backwards once, so the
 * cost is linear in the length whatever the text (a regular expression with nested repetition was exponential).
 * Each word is a whole run of letters not preceded by `\` (so `\pi` is not a word), optionally with `^2`/`^{2}`,
 * optionally preceded by `/`. Returns the words too; null when the text does not end in such a word.
 */
function unitTail(s: string): { start: number; words: string[] } | null {
  const words: string[] = [];
  let start = -1;
  let i = s.length;
  for (;;) {
    let j = i;
    // An optional exponent `^ {d}` (one digit, braces optional) after the word.
    let k = j;
    if (s[k - 1] === '}') k--;
    if (k > 0 && /\d/.test(s[k - 1]!)) {
      k--;
      if (s[k - 1] === '{') k--;
      while (isSpace(s[k - 1])) k--;
      if (s[k - 1] === '^') {
        k--;
        while (isSpace(s[k - 1])) k--;
        j = k;
      }
    }
    let w = j;
    while (isLetter(s[w - 1])) w--;
    if (w === j || s[w - 1] === '\\') break;
    words.push(s.slice(w, j).toLowerCase());
    // The separator before the word: spaces, an optional `/`, spaces.
    let b = w;
    while (isSpace(s[b - 1])) b--;
    if (s[b - 1] === '/') b--;
    while (isSpace(s[b - 1])) b--;
    start = b;
    i = b;
  }
  return start < 0 ? null : { start, words: words.reverse() };
}

/** Drops trailing unit words (`12\pi square units`, `10 km/h`, `18 apples` after a plain number). */
function stripUnits(s: string): string {
  const tail = unitTail(s);
  if (!tail) return s;
  const prefix = s.slice(0, tail.start).trim();
  if (!/[\d}]/.test(prefix)) return s;
  const plain = PLAIN_NUMBER.test(prefix);
  const known = tail.words.every((w) => UNITS.has(w) || (plain && SHORT_UNITS.has(w)));
  // After a plain number any words are a unit or a noun ("18 apples"); single letters could be a variable.
  const nouns = plain && tail.words.every((w) => w.length >= 2);
  if (!known && !nouns) return s;
  const cut = prefix.endsWith('/') ? prefix.slice(0, -1) : prefix.endsWith('per') ? prefix.slice(0, -3) : prefix;
  return cut.trimEnd();
}

/** Removes one layer of `$…$`, `$$…$$`, `\(…\)`, `\[…\]`, `\boxed{…}`, `\fbox{…}` or `{…}` around the whole. */
function unwrapOnce(s: string): string {
  const m =
    /^\$\$([\s\S]*)\$\$$/.exec(s) ??
    /^\$([\s\S]*)\$$/.exec(s) ??
    /^\\\(([\s\S]*)\\\)$/.exec(s) ??
    /^\\\[([\s\S]*)\\\]$/.exec(s);
  if (m) return m[1]!.trim();
  const box = /^\\(?:boxed|fbox)\s*\{/.exec(s);
  const open = box ? box[0].length - 1 : s.startsWith('{') ? 0 : -1;
  if (open >= 0 && groupEnd(s, open) === s.length) return s.slice(open + 1, -1).trim();
  return s;
}

/** `\begin{pmatrix}a\\b\end{pmatrix}` (a single row or column) → `(a,b)`; the same for bmatrix → `[a,b]`. */
function matrixToTuple(s: string): string {
  return s.replace(/\\begin\{([pb])matrix\}([\s\S]*?)\\end\{\1matrix\}/g, (_, kind: string, body: string) => {
    const items = body
      .split(/\\\\|&/)
      .map((x) => x.trim())
      .filter((x) => x !== '');
    return kind === 'p' ? `(${items.join(',')})` : `[${items.join(',')}]`;
  });
}

/** Canonical spacing: runs of space become one, kept only between two letters or digits (`\pi r`, `7 425`). */
function squeezeSpaces(s: string): string {
  return s
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/ (?![A-Za-z0-9])|(?<![A-Za-z0-9]) /g, '');
}

/** Drops a leading single-variable assignment or membership: `k=1` → `1`, `x \in [0,1)` → `[0,1)`. */
export function dropAssignment(s: string): string {
  const m = /^(?:[A-Za-z]|\\[A-Za-z]+)(?:_(?:\w|\{\w+\}))?(?:\([A-Za-z]\))?\s*(?:=|\\in(?![A-Za-z]))\s*(.+)$/.exec(s);
  return m && !m[1]!.includes('=') ? m[1]! : s;
}

/** One pass of every rewrite; `normalizeAnswer` repeats it until nothing changes. */
function normalizeOnce(input: string): string {
  let s = input.trim();
  for (let prev = ''; prev !== s;) [prev, s] = [s, unwrapOnce(s)];
  s = s.replace(NOISE, ' ').replace(/\{,\}/g, '');
  for (const name of TEXT_MACROS) s = mapMacro(s, name, 1, ([a]) => ` ${a} `);
  s = matrixToTuple(s)
    .replace(/\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![A-Za-z])|\\circ(?![A-Za-z])|\\degree(?![A-Za-z])/g, '')
    .replace(/\\%/g, '%')
    .replace(/\s*percent$/i, '%')
    .replace(/\\\$|\$/g, '')
    .replace(/\\[dtc]frac(?![A-Za-z])/g, '\\frac')
    .replace(/\\[dt]binom(?![A-Za-z])/g, '\\binom')
    .replace(/\\varnothing(?![A-Za-z])/g, '\\emptyset')
    .replace(FUNCTIONS, '\\$1');
  s = mapMacro(s, 'frac', 2, ([a, b]) => `\\frac{${a}}{${b}}`);
  s = mapMacro(s, 'binom', 2, ([a, b]) => `\\binom{${a}}{${b}}`);
  s = mapMacro(s, 'sqrt', 1, ([a], opt) => `\\sqrt${opt}{${a}}`);
  s = s
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/[\s.]+$/, '');
  s = stripUnits(s).replace(/[\s.]+$/, '');
  return squeezeSpaces(dropAssignment(s));
}

/**
 * Normalises an answer string for comparison: math delimiters, `\boxed`, spacing macros, `\left`/`\right`, `{,}`,
 * `\text{…}` (content kept), units, degrees, `$`, `\dfrac`/`\tfrac`, `\frac13`, `\sqrt3`, bare `sin`, `k=`, trailing
 * `.` and spacing. `\%` becomes `%`, which the comparison reads (see math-equal.ts). Thousands commas are left for
 * the comparison, which alone knows whether a comma separates a list.
 */
export function normalizeAnswer(raw: string): string {
  let s = raw;
  for (const [re, to] of UNICODE) s = s.replace(re, to);
  for (let i = 0, prev = ''; i < 4 && prev !== s; i++) [prev, s] = [s, normalizeOnce(s)];
  return s;
}
