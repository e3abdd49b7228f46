// Sums, differences and products of two simple fractions, answered in lowest terms through one chain of equalities
// (common denominator, combine, reduce) that a tiny model can copy step by step.
import type { Rng } from '../../util/rng.js';
import {
  addFractions,
  fraction,
  formatFraction,
  gcd,
  lcm,
  mulFractions,
  subFractions,
  type Fraction,
} from '../rational.js';
import { defineGenerator, generated, operatorList, pick, randBig, type Operator, type OperatorKnob } from './common.js';

/** Difficulty knobs of 'fraction' (operators default '+-*'). */
export interface FractionDifficulty extends OperatorKnob {
  /** Smallest denominator; default 2. */
  minDen: number;
  /** Largest denominator; default 12. */
  maxDen: number;
}

const VALUE: Record<Operator, (p: Fraction, q: Fraction) => Fraction> = {
  '+': addFractions,
  '-': subFractions,
  '*': mulFractions,
};

/** The one-line chain for p op q, e.g. "1/6+1/3=1/6+2/6=3/6=1/2"; p, q proper and in lowest terms. */
export function fractionChain(p: Fraction, op: Operator, q: Fraction): string {
  const parts = [`${p.num}/${p.den}${op}${q.num}/${q.den}`];
  let num: bigint;
  let den: bigint;
  if (op === '*') {
    num = p.num * q.num;
    den = p.den * q.den;
  } else {
    den = lcm(p.den, q.den);
    const [a, b] = [(p.num * den) / p.den, (q.num * den) / q.den];
    if (p.den !== den || q.den !== den) parts.push(`${a}/${den}${op}${b}/${den}`);
    num = op === '+' ? a + b : a - b;
  }
  parts.push(`${num}/${den}`);
  const reduced = formatFraction(fraction(num, den));
  if (reduced !== parts.at(-1)) parts.push(reduced);
  return parts.join('=');
}

// A proper fraction n/d in lowest terms with d in [minDen, maxDen]; n = 1 is always coprime, so this terminates.
function randomProper(rng: Rng, d: FractionDifficulty): Fraction {
  const den = randBig(rng, d.minDen, d.maxDen);
  for (;;) {
    const num = randBig(rng, 1, Number(den) - 1);
    if (gcd(num, den) === 1n) return { num, den };
  }
}

/** 'fraction': "What is 1/4+1/6?" answered in lowest terms ("5/12"; an integer result reads "1"). */
export const fractions = defineGenerator<FractionDifficulty>({
  task: 'fraction',
  defaults: { minDen: 2, maxDen: 12, operators: '+-*' },
  ints: { minDen: [2, 1e6], maxDen: [2, 1e6] },
  ordered: [['minDen', 'maxDen']],
  oodAxis: 'denominators',
  harder: (d) => ({ ...d, minDen: d.maxDen + 1, maxDen: d.maxDen * 2 }),
  generate(rng: Rng, d: FractionDifficulty) {
    const op = pick(rng, operatorList('fraction', d.operators));
    let p = randomProper(rng, d);
    let q = randomProper(rng, d);
    // Keeps differences non-negative, like arith's subtraction, so one format covers every problem.
    if (op === '-' && p.num * q.den < q.num * p.den) [p, q] = [q, p];
    const answer = formatFraction(VALUE[op](p, q));
    return generated(
      'fraction',
      `What is ${p.num}/${p.den}${op}${q.num}/${q.den}?`,
      answer,
      [fractionChain(p, op, q)],
      {
        minDen: Number(p.den < q.den ? p.den : q.den),
        maxDen: Number(p.den < q.den ? q.den : p.den),
      },
    );
  },
});
