// What every task generator shares: the generator contract, seeded draws, knob checks and the solution layout.
import type { Rng } from '../../util/rng.js';

/** One generated problem before it gets an id (splits.ts adds the id and checks train/test membership). */
export interface Generated {
  /** The generator's task name ('arith', 'expr', ...). */
  task: string;
  /** The question text. */
  prompt: string;
  /** The exact answer. */
  answer: string;
  /** The worked solution, ending with the line `\boxed{answer}`. */
  solution: string;
  /** Measured difficulty of this problem (e.g. digits per operand). */
  difficulty: Record<string, number>;
  /** Canonical key: two problems with the same key count as the same problem for dedupe and train/test. */
  key: string;
  /**
   * The answer as one JavaScript expression on the question's numbers (integer literals, + - * /, parentheses), e.g.
   * "47+38", exact in doubles since every value along the way is a safe integer; absent where the task has none
   * (fraction, whose answer is a ratio) or a value passes Number.MAX_SAFE_INTEGER. A math tool agent's expert
   * program prints it (src/envs/math.ts).
   */
  expression?: string;
}

/** A task generator: difficulty knobs `D` (all set), the partial form `I` callers pass, and its OOD axis. */
export interface TaskGenerator<D, I = Partial<D>> {
  /** Task name. */
  readonly task: string;
  /** The default knobs. */
  readonly defaults: D;
  /** What the out-of-distribution split raises, e.g. 'digits' (the split is named `test-ood-<axis>`). */
  readonly oodAxis: string;
  /** Knobs merged over the defaults and checked; throws naming the bad knob. */
  resolve(input?: I): D;
  /** Knobs of the OOD split: strictly beyond `d` along the OOD axis, so no OOD problem fits `d`. */
  harder(d: D): D;
  /**
   * The mild OOD shift, where the task has one: problems of the trained length that `d` never draws, on which a
   * warm-started agent keeps some accuracy. The split is named `test-ood-<axis>`; `knobs` throws when `d` has no such
   * shift.
   */
  readonly mildOod?: { readonly axis: string; knobs(d: D): D };
  /** Draws one problem. */
  generate(rng: Rng, d: D): Generated;
}

/** A uniform integer in [lo, hi] (inclusive; both small enough for exact doubles). */
export function randInt(rng: Rng, lo: number, hi: number): number {
  return lo + rng.int(hi - lo + 1);
}

/** A uniform BigInt in [lo, hi] (inclusive). */
export function randBig(rng: Rng, lo: number, hi: number): bigint {
  return BigInt(randInt(rng, lo, hi));
}

/** A uniform integer with exactly `digits` decimal digits (0..9 for one digit), drawn digit by digit. */
export function randDigits(rng: Rng, digits: number): bigint {
  let s = `${digits === 1 ? rng.int(10) : 1 + rng.int(9)}`;
  for (let i = 1; i < digits; i++) s += `${rng.int(10)}`;
  return BigInt(s);
}

/** A uniformly chosen element of a non-empty list. */
export function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[rng.int(items.length)]!;
}

/** The number of decimal digits of |v|. */
export function digitCount(v: bigint): number {
  return `${v < 0n ? -v : v}`.length;
}

/** The solution text: one step per line, then the line `\boxed{answer}`. */
export function solutionText(steps: readonly string[], answer: string): string {
  return [...steps, `\\boxed{${answer}}`].join('\n');
}

/** The default canonical key: the prompt with case and whitespace runs normalised. */
export function promptKey(prompt: string): string {
  return prompt.trim().replace(/\s+/g, ' ').toLowerCase();
}

/** A Generated from its parts; the key defaults to promptKey(prompt). */
export function generated(
  task: string,
  prompt: string,
  answer: string,
  steps: readonly string[],
  difficulty: Record<string, number>,
  key = promptKey(prompt),
): Generated {
  return { task, prompt, answer, solution: solutionText(steps, answer), difficulty, key };
}

/**
 * `g` with `expression` (see Generated.expression) when every value in `values` — its literals and every
 * intermediate result — is a safe integer, so that evaluating it in doubles is exact; else `g` as it is.
 */
export function withExpression(g: Generated, expression: string, values: readonly bigint[]): Generated {
  const limit = BigInt(Number.MAX_SAFE_INTEGER);
  return values.every((v) => v <= limit && v >= -limit) ? { ...g, expression } : g;
}

/** `x-y` with the sign of y folded in (`x+3` for y = -3), so no `--` reaches a JavaScript expression. */
export function minusText(x: bigint, y: bigint): string {
  return y < 0n ? `${x}+${-y}` : `${x}-${y}`;
}

/** The operators generated problems use. */
export const OPERATORS = ['+', '-', '*'] as const;

/** One of OPERATORS. */
export type Operator = (typeof OPERATORS)[number];

/** The operator knob, shared by the tasks that draw an operator per problem. */
export interface OperatorKnob {
  /** Operators drawn uniformly per problem: a string of '+', '-', '*' (e.g. '+-'). */
  operators: string;
}

/** The operators of an operator knob, deduplicated; throws naming the task on an empty list or another character. */
export function operatorList(task: string, ops: string): Operator[] {
  const list = [...new Set(Array.from(ops))];
  const bad = list.find((o) => !(OPERATORS as readonly string[]).includes(o));
  if (list.length === 0 || bad !== undefined)
    throw new Error(`${task} difficulty: operators must be a non-empty string of ${OPERATORS.join('')}, got "${ops}"`);
  return list as Operator[];
}

/** The numeric knobs of D. */
type NumericKeys<D> = { [K in keyof D]: D[K] extends number ? K : never }[keyof D] & string;

/** What defineGenerator needs: a TaskGenerator without resolve, plus the bounds resolve checks. */
export interface GeneratorSpec<D extends object> extends Omit<TaskGenerator<D>, 'resolve'> {
  /** Integer knobs and their allowed [least, most]. */
  readonly ints: { readonly [K in NumericKeys<D>]?: readonly [number, number] };
  /** Knob pairs [lo, hi] that must satisfy lo <= hi; default none. */
  readonly ordered?: readonly (readonly [NumericKeys<D>, NumericKeys<D>])[];
}

/**
 * A TaskGenerator whose resolve merges the input over the defaults and checks it: the integer bounds, the ordered
 * pairs, and (for tasks with an `operators` knob) the operators. Errors name the task and the knob.
 */
export function defineGenerator<D extends object>(spec: GeneratorSpec<D>): TaskGenerator<D> {
  const resolve = (input?: Partial<D>): D => {
    const d = { ...spec.defaults, ...stripUndefined(input ?? {}) };
    const knob = (k: string): unknown => (d as Record<string, unknown>)[k];
    for (const [k, [least, most]] of Object.entries(spec.ints) as [string, [number, number]][]) {
      const v = knob(k);
      if (typeof v !== 'number' || !Number.isInteger(v) || v < least || v > most)
        throw new Error(`${spec.task} difficulty: ${k} must be an integer in [${least}, ${most}], got ${String(v)}`);
    }
    for (const [lo, hi] of spec.ordered ?? []) {
      if ((knob(lo) as number) > (knob(hi) as number))
        throw new Error(`${spec.task} difficulty: ${lo} (${String(knob(lo))}) exceeds ${hi} (${String(knob(hi))})`);
    }
    if ('operators' in d) operatorList(spec.task, String(d.operators));
    return d;
  };
  return { ...spec, resolve };
}

// An explicit `undefined` in the input means "not given", so it must not shadow the default.
function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
