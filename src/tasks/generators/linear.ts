// Linear equations ax+b=c with an integer solution, solved in two lines: isolate ax, then divide.
import type { Rng } from '../../util/rng.js';
import { absBig } from '../rational.js';
import { defineGenerator, generated, minusText, randBig, withExpression } from './common.js';

/** Difficulty knobs of 'linear'. */
export interface LinearDifficulty {
  /** Smallest |a|; default 2 (a coefficient of 1 would make the division step trivial). */
  minCoef: number;
  /** Largest |a|; default 9. */
  maxCoef: number;
  /** Largest |x|; default 10. */
  maxX: number;
  /** |b| is drawn from 1..maxConst; default 20. */
  maxConst: number;
  /** 1: a, b and x may be negative; 0: all positive (x from 0..maxX); default 1. */
  negative: number;
}

/** The solution steps of ax+b=c: "3x=20-5=15", "x=15/3=5". */
export function linearSteps(a: bigint, b: bigint, c: bigint): string[] {
  const ax = c - b;
  return [`${a}x=${minusText(c, b)}=${ax}`, `x=${ax}/${a < 0n ? `(${a})` : a}=${ax / a}`];
}

/**
 * x of ax+b=c as a JavaScript expression, (c-b)/a, over a positive divisor ((b-c)/3 for a = -3): a zero numerator
 * is then +0, which prints "0" where 0/-3 would print "-0".
 */
export function linearExpression(a: bigint, b: bigint, c: bigint): string {
  return a < 0n ? `(${minusText(b, c)})/${-a}` : `(${minusText(c, b)})/${a}`;
}

/** 'linear': "Solve for x: 3x+5=20." with the answer the value of x. */
export const linear = defineGenerator<LinearDifficulty>({
  task: 'linear',
  defaults: { minCoef: 2, maxCoef: 9, maxX: 10, maxConst: 20, negative: 1 },
  ints: { minCoef: [1, 1e9], maxCoef: [1, 1e9], maxX: [0, 1e9], maxConst: [1, 1e9], negative: [0, 1] },
  ordered: [['minCoef', 'maxCoef']],
  oodAxis: 'coefficients',
  harder: (d) => ({ ...d, minCoef: d.maxCoef + 1, maxCoef: d.maxCoef * 3 }),
  generate(rng: Rng, d: LinearDifficulty) {
    const sign = (): bigint => (d.negative && rng.int(2) ? -1n : 1n);
    const a = sign() * randBig(rng, d.minCoef, d.maxCoef);
    const x = d.negative ? randBig(rng, -d.maxX, d.maxX) : randBig(rng, 0, d.maxX);
    const b = sign() * randBig(rng, 1, d.maxConst);
    const c = a * x + b;
    const prompt = `Solve for x: ${a}x${b < 0n ? b : `+${b}`}=${c}.`;
    const g = generated('linear', prompt, `${x}`, linearSteps(a, b, c), {
      coef: Number(absBig(a)),
      x: Number(absBig(x)),
      const: Number(absBig(b)),
    });
    return withExpression(g, linearExpression(a, b, c), [a, b, c, c - b, x]);
  },
});
