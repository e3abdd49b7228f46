// Multi-digit addition, subtraction and multiplication, solved column by column as on paper: a tiny model only has
// to add (or multiply) single digits and copy carries, which it learns far sooner than one-shot answers.
import type { Rng } from '../../util/rng.js';
import {
  defineGenerator,
  digitCount,
  generated,
  operatorList,
  pick,
  randDigits,
  type Operator,
  type OperatorKnob,
  withExpression,
} from './common.js';

/** Difficulty knobs of 'arith' (operators default '+-'). */
export interface ArithDifficulty extends OperatorKnob {
  /** Digits of the first operand, exactly (1 allows 0..9); default 2. */
  digits: number;
  /** Digits of the second operand, exactly; default 2. */
  digits2: number;
  /**
   * 1: one operand of at least 2 digits is drawn with one digit fewer and written zero-padded to its width (07+38),
   * the mild OOD split; 0 (default): no leading zeros.
   */
  leadingZero: number;
}

/** Column addition: one line per column, right to left, e.g. "7+8=15, write 5 carry 1". */
export function additionSteps(a: bigint, b: bigint): string[] {
  return columns(a, b, (x, y, carry) => ({ expr: `${x}+${y}${carry ? `+${carry}` : ''}`, value: x + y + carry }));
}

/** Column subtraction (a >= b): one line per column, e.g. "12-5=7, write 7 borrow 1" then "4-1-3=0, write 0". */
export function subtractionSteps(a: bigint, b: bigint): string[] {
  const lines: string[] = [];
  const da = digitsLowFirst(a);
  const db = digitsLowFirst(b);
  let borrow = 0;
  for (const [i, t] of da.entries()) {
    const u = db[i] ?? 0;
    const owed = borrow; // lent to the column on the right
    borrow = t - owed - u < 0 ? 1 : 0;
    const top = t + 10 * borrow;
    const v = top - owed - u;
    lines.push(`${top}${owed ? '-1' : ''}-${u}=${v}, write ${v}${borrow ? ' borrow 1' : ''}`);
  }
  return lines;
}

/** Multiplication: column steps for a one-digit multiplier, else one partial product per digit and their sum. */
export function multiplicationSteps(a: bigint, b: bigint): string[] {
  if (b < 10n) {
    const m = Number(b);
    return columns(a, 0n, (x, _y, carry) => ({ expr: `${x}*${m}${carry ? `+${carry}` : ''}`, value: x * m + carry }));
  }
  const multipliers = digitsLowFirst(b).map((d, i) => BigInt(d) * 10n ** BigInt(i));
  return [...multipliers.map((m) => `${a}*${m}=${a * m}`), `${multipliers.map((m) => a * m).join('+')}=${a * b}`];
}

// Walks the columns of a (and b) right to left; every column but the last writes one digit and carries the rest,
// the last writes its whole value, so the answer is the written digits read from the bottom line up.
function columns(
  a: bigint,
  b: bigint,
  column: (x: number, y: number, carry: number) => { expr: string; value: number },
): string[] {
  const da = digitsLowFirst(a);
  const db = digitsLowFirst(b);
  const n = Math.max(da.length, db.length);
  const lines: string[] = [];
  let carry = 0;
  for (let i = 0; i < n; i++) {
    const { expr, value } = column(da[i] ?? 0, db[i] ?? 0, carry);
    const last = i === n - 1;
    carry = last ? 0 : Math.floor(value / 10);
    lines.push(`${expr}=${value}, write ${last ? value : value % 10}${carry ? ` carry ${carry}` : ''}`);
  }
  return lines;
}

function digitsLowFirst(v: bigint): number[] {
  return Array.from(`${v}`, Number).reverse();
}

const STEPS: Record<Operator, (a: bigint, b: bigint) => string[]> = {
  '+': additionSteps,
  '-': subtractionSteps,
  '*': multiplicationSteps,
};

const VALUE: Record<Operator, (a: bigint, b: bigint) => bigint> = {
  '+': (a, b) => a + b,
  '-': (a, b) => a - b,
  '*': (a, b) => a * b,
};

/** 'arith': "What is 47+38?" with column-by-column solutions; subtraction keeps the larger operand first. */
export const arith = defineGenerator<ArithDifficulty>({
  task: 'arith',
  defaults: { digits: 2, digits2: 2, operators: '+-', leadingZero: 0 },
  ints: { digits: [1, 60], digits2: [1, 60], leadingZero: [0, 1] },
  oodAxis: 'digits',
  harder: (d) => ({ ...d, digits: d.digits + 1, digits2: d.digits2 + 1 }),
  // One more digit per operand leaves a warm-started agent near 0%; a leading zero keeps the prompt's length and the
  // number of columns, yet no problem of `d` has one (its operands have exactly their digits), so the split is
  // disjoint from every train and test problem by its text.
  mildOod: {
    axis: 'leading-zero',
    knobs(d) {
      if (d.leadingZero !== 0)
        throw new Error('arith: the mild OOD split pads with a leading zero, as the knobs already do');
      if (Math.max(d.digits, d.digits2) < 2) throw new Error('arith: the mild OOD split needs an operand of 2+ digits');
      return { ...d, leadingZero: 1 };
    },
  },
  generate(rng: Rng, d: ArithDifficulty) {
    const op = pick(rng, operatorList('arith', d.operators));
    const widths = [d.digits, d.digits2];
    const padded = d.leadingZero === 1 ? paddedOperand(rng, widths) : -1;
    let [a, b] = widths.map((w, i) => randDigits(rng, i === padded ? w - 1 : w)) as [bigint, bigint];
    let [ta, tb] = [a, b].map((v, i) => (i === padded ? `${v}`.padStart(widths[i]!, '0') : `${v}`)) as [string, string];
    // Negative differences would need a different procedure; swapping keeps one regular format.
    if (op === '-' && a < b) [a, b, ta, tb] = [b, a, tb, ta];
    const value = VALUE[op](a, b);
    const g = generated('arith', `What is ${ta}${op}${tb}?`, `${value}`, STEPS[op](a, b), {
      digits: digitCount(a),
      digits2: digitCount(b),
      ...(padded >= 0 ? { leadingZero: 1 } : {}),
    });
    // The values, not the padded text: 07 is not a decimal literal in JavaScript.
    return withExpression(g, `${a}${op}${b}`, [a, b, value]);
  },
});

// Which operand gets the leading zero: either one that has at least 2 digits, uniformly.
function paddedOperand(rng: Rng, widths: readonly number[]): number {
  const candidates = widths.flatMap((w, i) => (w >= 2 ? [i] : []));
  if (candidates.length === 0) throw new Error('arith difficulty: leadingZero 1 needs an operand of 2+ digits');
  return pick(rng, candidates);
}
