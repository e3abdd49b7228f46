// A mixture of the generated tasks, each problem from one task drawn uniformly from a chosen list.
import type { Rng } from '../../util/rng.js';
import { arith, type ArithDifficulty } from './arith.js';
import { pick, type Generated, type TaskGenerator } from './common.js';
import { expr, type ExprDifficulty } from './expr.js';
import { fractions, type FractionDifficulty } from './fraction.js';
import { linear, type LinearDifficulty } from './linear.js';
import { word, type WordDifficulty } from './word.js';

/** Each generated task's knobs, by task name. */
export interface BaseDifficulties {
  arith: ArithDifficulty;
  expr: ExprDifficulty;
  linear: LinearDifficulty;
  fraction: FractionDifficulty;
  word: WordDifficulty;
}

/** The generated tasks a mixture can draw from. */
export type BaseTask = keyof BaseDifficulties;

/** The generators of the base tasks, by name. */
export const BASE_GENERATORS: { [T in BaseTask]: TaskGenerator<BaseDifficulties[T]> } = {
  arith,
  expr,
  linear,
  fraction: fractions,
  word,
};

/** All base task names, in a fixed order. */
export const BASE_TASKS = Object.keys(BASE_GENERATORS) as BaseTask[];

/** Knobs of 'mix': which tasks, and every task's own knobs. */
export type MixDifficulty = { tasks: BaseTask[] } & BaseDifficulties;

/** What callers pass for 'mix': the task list (default all) and, per task, partial knobs. */
export type MixInput = { tasks?: BaseTask[] } & Partial<BaseInputs>;

/** Partial knobs per base task. */
export type BaseInputs = { [T in BaseTask]: Partial<BaseDifficulties[T]> };

// One generic call per task keeps each task's knob type tied to its own generator.
function forTask<T extends BaseTask>(t: T, d: MixDifficulty, rng: Rng): Generated {
  return BASE_GENERATORS[t].generate(rng, d[t]);
}

function mapTasks(f: <T extends BaseTask>(t: T) => BaseDifficulties[T]): BaseDifficulties {
  return { arith: f('arith'), expr: f('expr'), linear: f('linear'), fraction: f('fraction'), word: f('word') };
}

/** 'mix': problems from several tasks; its OOD split takes every task's OOD knobs. */
export const mix: TaskGenerator<MixDifficulty, MixInput> = {
  task: 'mix',
  defaults: { tasks: BASE_TASKS, ...mapTasks((t) => BASE_GENERATORS[t].defaults) },
  oodAxis: 'all',
  resolve(input) {
    const tasks = input?.tasks ?? BASE_TASKS;
    const bad = tasks.find((t) => !BASE_TASKS.includes(t));
    if (tasks.length === 0 || bad !== undefined)
      throw new Error(`mix difficulty: tasks must be a non-empty list of ${BASE_TASKS.join(', ')}, got ${bad}`);
    const inputs: Partial<BaseInputs> = input ?? {};
    return { tasks: [...tasks], ...mapTasks((t) => BASE_GENERATORS[t].resolve(inputs[t])) };
  },
  harder: (d) => ({ tasks: d.tasks, ...mapTasks((t) => BASE_GENERATORS[t].harder(d[t])) }),
  generate: (rng, d) => forTask(pick(rng, d.tasks), d, rng),
};
