// Templated word problems (shopping, ages, sharing, saving) of one or two arithmetic steps, one equation per line.
import type { Rng } from '../../util/rng.js';
import { defineGenerator, generated, pick, randBig, randInt, withExpression } from './common.js';

/** Difficulty knobs of 'word'. */
export interface WordDifficulty {
  /** Smallest number drawn for a quantity (at least 2, so a total of two draws can be split in two); default 2. */
  minNumber: number;
  /** Largest number drawn for a quantity (derived ones, such as a total to share, can be larger); default 20. */
  maxNumber: number;
  /** Each problem takes 1..maxSteps steps (1 or 2); default 2. */
  maxSteps: number;
}

/** A filled-in template: its text, solution lines, answer, every number the text states and the answer from them. */
interface Filled {
  text: string;
  lines: string[];
  answer: bigint;
  numbers: bigint[];
  /** The answer as a JavaScript expression on `numbers` (Generated.expression). */
  expression: string;
}

/** What a template gets: quantity drawers, two distinct names, an item (plural) and the number of steps. */
interface Slots {
  /** A quantity from minNumber..maxNumber. */
  num: () => bigint;
  /** A quantity from lo..hi (for parts of a derived total). */
  between: (lo: bigint, hi: bigint) => bigint;
  /** minNumber. */
  min: bigint;
  who: string;
  other: string;
  items: string;
  steps: number;
}

/** The names word problems use. */
export const WORD_NAMES: readonly string[] = ['Ann', 'Ben', 'Cara', 'Dan', 'Eva', 'Finn', 'Gia', 'Hugo', 'Ida', 'Jon'];
/** The items (plural) word problems use. */
export const WORD_ITEMS: readonly string[] = [
  'apples',
  'pens',
  'cookies',
  'stickers',
  'books',
  'marbles',
  'cards',
  'shells',
];

// Each template's first step is its one-step form; the second step extends the same story.
const TEMPLATES: Record<string, (s: Slots) => Filled> = {
  shopping({ num, who, items, steps }) {
    const [n, p] = [num(), num()];
    const cost = n * p;
    const buy = `${who} buys ${n} ${items} at ${p} dollars each`;
    if (steps === 1)
      return fill(`${buy}. How many dollars does ${who} spend?`, [`${n}*${p}=${cost}`], cost, [n, p], `${n}*${p}`);
    const change = num();
    const paid = cost + change;
    const text = `${buy} and pays with ${paid} dollars. How many dollars of change does ${who} get?`;
    return fill(text, [`${n}*${p}=${cost}`, `${paid}-${cost}=${change}`], change, [n, p, paid], `${paid}-${n}*${p}`);
  },
  ages({ num, who, other, steps }) {
    const [y, k] = [num(), num()];
    const age = y + k;
    const intro = `${other} is ${y} years old. ${who} is ${k} years older than ${other}.`;
    if (steps === 1) return fill(`${intro} How old is ${who}?`, [`${y}+${k}=${age}`], age, [y, k], `${y}+${k}`);
    const t = num();
    const text = `${intro} How old will ${who} be in ${t} years?`;
    return fill(text, [`${y}+${k}=${age}`, `${age}+${t}=${age + t}`], age + t, [y, k, t], `${y}+${k}+${t}`);
  },
  sharing({ num, between, min, who, items, steps }) {
    const [k, each] = [num(), num()];
    const ask = `equally among ${k} friends. How many ${items} does each friend get?`;
    if (steps === 1) {
      const total = k * each;
      return fill(
        `${who} shares ${total} ${items} ${ask}`,
        [`${total}/${k}=${each}`],
        each,
        [total, k],
        `${total}/${k}`,
      );
    }
    // Drawing the total first keeps it divisible by k, and both parts of it at least minNumber.
    const total = k * each;
    const a = between(min, total - min);
    const b = total - a;
    const text = `${who} has ${a} ${items} and buys ${b} more, then shares them ${ask}`;
    return fill(text, [`${a}+${b}=${total}`, `${total}/${k}=${each}`], each, [a, b, k], `(${a}+${b})/${k}`);
  },
  saving({ num, who, steps }) {
    const [s, w] = [num(), num()];
    const saved = s * w;
    const plan = `saves ${s} dollars a week for ${w} weeks`;
    const text1 = `${who} ${plan}. How many dollars does ${who} save?`;
    if (steps === 1) return fill(text1, [`${s}*${w}=${saved}`], saved, [s, w], `${s}*${w}`);
    const h = num();
    const text = `${who} has ${h} dollars and ${plan}. How many dollars does ${who} have then?`;
    return fill(text, [`${s}*${w}=${saved}`, `${h}+${saved}=${h + saved}`], h + saved, [h, s, w], `${h}+${s}*${w}`);
  },
};

/** The names of the word-problem templates. */
export const WORD_TEMPLATES: readonly string[] = Object.keys(TEMPLATES);

function fill(text: string, lines: string[], answer: bigint, numbers: bigint[], expression: string): Filled {
  return { text, lines, answer, numbers, expression };
}

function extreme(values: readonly bigint[], pickLarger: boolean): number {
  return Number(values.reduce((m, v) => (v > m === pickLarger ? v : m)));
}

/** 'word': short story problems; the canonical key ignores names and items, so train and test differ in numbers. */
export const word = defineGenerator<WordDifficulty>({
  task: 'word',
  defaults: { minNumber: 2, maxNumber: 20, maxSteps: 2 },
  ints: { minNumber: [2, 1e6], maxNumber: [2, 1e6], maxSteps: [1, 2] },
  ordered: [['minNumber', 'maxNumber']],
  oodAxis: 'numbers',
  harder: (d) => ({ ...d, minNumber: d.maxNumber + 1, maxNumber: d.maxNumber * 5 }),
  generate(rng: Rng, d: WordDifficulty) {
    const template = pick(rng, WORD_TEMPLATES);
    const steps = randInt(rng, 1, d.maxSteps);
    const who = pick(rng, WORD_NAMES);
    const other = pick(
      rng,
      WORD_NAMES.filter((n) => n !== who),
    );
    const slots: Slots = {
      num: () => randBig(rng, d.minNumber, d.maxNumber),
      between: (lo, hi) => randBig(rng, Number(lo), Number(hi)),
      min: BigInt(d.minNumber),
      who,
      other,
      items: pick(rng, WORD_ITEMS),
      steps,
    };
    const f = TEMPLATES[template]!(slots);
    const key = `word:${template}:${steps}:${f.numbers.join(',')}`;
    const difficulty = { steps, minNumber: extreme(f.numbers, false), maxNumber: extreme(f.numbers, true) };
    // Quantities of at most 10^6 (the knobs' bound) keep every value far below 2^53; the check is the common one.
    return withExpression(generated('word', f.text, `${f.answer}`, f.lines, difficulty, key), f.expression, [
      ...f.numbers,
      f.answer,
    ]);
  },
});
