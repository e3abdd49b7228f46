// Deterministic data sets from the generators: train and test are disjoint by construction, because every problem
// belongs to one side by a hash of its canonical key (whatever the seeds and sizes), and the OOD split draws from
// knobs strictly beyond the given ones (or, for 'ood-mild', a shift that the given knobs never draw).
import { createHash } from 'node:crypto';
import { Rng } from '../util/rng.js';
import type { Generated, TaskGenerator } from './generators/common.js';
import { BASE_GENERATORS, mix, type BaseInputs, type MixInput } from './generators/mix.js';
import type { Dataset, Problem } from './problem.js';

/** Knob inputs by task name: partial knobs for a base task; a task list plus per-task knobs for 'mix'. */
export type DifficultyInputs = BaseInputs & { mix: MixInput };

/** The task names makeTaskDataset knows. */
export type TaskName = keyof DifficultyInputs;

/**
 * Which split: 'train', 'test' (same knobs, disjoint problems), 'ood' (test problems from harder knobs) or 'ood-mild'
 * (problems of the trained length that the train knobs never draw, e.g. an operand with a leading zero; arith only).
 */
export type SplitName = 'train' | 'test' | 'ood' | 'ood-mild';

/** Every split name. */
export const SPLIT_NAMES: readonly SplitName[] = ['train', 'test', 'ood', 'ood-mild'];

/** What makeTaskDataset builds; `difficulty` is typed by `task`. */
export type TaskSpec = {
  [T in TaskName]: {
    /** The task. */
    task: T;
    /** The split. */
    split: SplitName;
    /** Number of problems. */
    n: number;
    /** Seed of the draws (any integer; the same spec always gives the same problems). */
    seed: number;
    /** Knobs over the task's defaults; for 'ood' and 'ood-mild', the train knobs that the OOD split shifts. */
    difficulty?: DifficultyInputs[T];
    /** Share of the problem space reserved for test and OOD, in (0, 1); default 0.2. */
    testShare?: number;
    /** No problem twice within the split (by canonical key); default true. */
    unique?: boolean;
  };
}[TaskName];

const GENERATORS: { [T in TaskName]: TaskGenerator<unknown, DifficultyInputs[T]> } = { ...BASE_GENERATORS, mix };

/** All task names. */
export const TASK_NAMES = Object.keys(GENERATORS) as TaskName[];

/** Draws after the last accepted problem before giving up: the space (or its test share) is then nearly used up. */
const MAX_MISSES = 20000;

/**
 * The data set name of a spec: `<task>-train`, `<task>-test`, or `<task>-test-ood-<axis>` (e.g. arith-test-ood-digits,
 * arith-test-ood-leading-zero).
 */
export function datasetName(spec: Pick<TaskSpec, 'task' | 'split'>): string {
  const gen = GENERATORS[spec.task] as TaskGenerator<unknown, unknown>;
  if (spec.split === 'ood') return `${spec.task}-test-ood-${gen.oodAxis}`;
  if (spec.split === 'ood-mild') return `${spec.task}-test-ood-${mildOf(gen).axis}`;
  return `${spec.task}-${spec.split}`;
}

/** The resolved knobs a spec draws from (for 'ood' and 'ood-mild': the shifted ones), e.g. to log next to results. */
export function specDifficulty(spec: TaskSpec): unknown {
  const gen = generatorOf(spec);
  const d = gen.resolve(spec.difficulty);
  if (spec.split === 'ood') return gen.harder(d);
  if (spec.split === 'ood-mild') return mildOf(gen).knobs(d);
  return d;
}

/** Builds the data set of a spec: the first `n` accepted draws of a stream seeded by `spec.seed`. */
export function makeTaskDataset(spec: TaskSpec): Dataset {
  checkSpec(spec);
  const gen = generatorOf(spec);
  const d = specDifficulty(spec);
  const rng = new Rng(spec.seed);
  const share = spec.testShare ?? 0.2;
  const wantTest = spec.split !== 'train';
  // The mild shift is disjoint from the train knobs by construction and its space is small (about 2,700 problems
  // for 2-digit operands), so it takes every problem instead of the test share.
  const hashed = spec.split !== 'ood-mild';
  const seen = new Set<string>();
  const problems: Problem[] = [];
  let misses = 0;
  while (problems.length < spec.n) {
    const g = gen.generate(rng, d);
    const hash = keyHash(g.key);
    if ((hashed && isTestHash(hash, share) !== wantTest) || (spec.unique !== false && seen.has(g.key))) {
      if (++misses > MAX_MISSES)
        throw new Error(
          `${datasetName(spec)}: found only ${problems.length} of ${spec.n} distinct problems (no new one in ` +
            `${MAX_MISSES} draws); lower n, raise the difficulty, or pass unique: false`,
        );
      continue;
    }
    misses = 0;
    seen.add(g.key);
    problems.push(toProblem(g, hash));
  }
  return { name: datasetName(spec), problems };
}

/** True when a canonical key belongs to the test side (test and OOD splits) for test share `share`. */
export function isTestKey(key: string, share = 0.2): boolean {
  return isTestHash(keyHash(key), share);
}

function generatorOf(spec: TaskSpec): TaskGenerator<unknown, unknown> {
  const gen = GENERATORS[spec.task] as TaskGenerator<unknown, unknown> | undefined;
  if (gen === undefined) throw new Error(`unknown task "${spec.task}"; known: ${TASK_NAMES.join(', ')}`);
  return gen;
}

function mildOf(gen: TaskGenerator<unknown, unknown>): NonNullable<TaskGenerator<unknown, unknown>['mildOod']> {
  if (gen.mildOod === undefined) throw new Error(`task "${gen.task}" has no 'ood-mild' split (arith has one)`);
  return gen.mildOod;
}

function checkSpec(spec: TaskSpec): void {
  if (!SPLIT_NAMES.includes(spec.split))
    throw new Error(`split must be one of ${SPLIT_NAMES.join(', ')}, got "${spec.split}"`);
  if (!Number.isSafeInteger(spec.n) || spec.n < 0) throw new Error(`n must be a non-negative integer, got ${spec.n}`);
  if (!Number.isSafeInteger(spec.seed)) throw new Error(`seed must be an integer, got ${spec.seed}`);
  const share = spec.testShare ?? 0.2;
  if (!(share > 0 && share < 1)) throw new Error(`testShare must be in (0, 1), got ${share}`);
}

function keyHash(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

// The first 32 bits of the key's hash as a fraction of 2^32: uniform, and independent of seeds and sizes.
function isTestHash(hash: string, share: number): boolean {
  return parseInt(hash.slice(0, 8), 16) / 2 ** 32 < share;
}

function toProblem(g: Generated, hash: string): Problem {
  return {
    id: `${g.task}-${hash.slice(8, 20)}`,
    prompt: g.prompt,
    answer: g.answer,
    solution: g.solution,
    task: g.task,
    difficulty: g.difficulty,
  };
}

/** A named spec without split, size and seed. */
export type TaskPreset = { [T in TaskName]: { task: T; difficulty?: DifficultyInputs[T] } }[TaskName];

/** Named presets; 'easy' (2-digit addition and subtraction, column solutions of ~50 characters) warm-starts a tiny agent. */
export const PRESETS = {
  easy: { task: 'arith', difficulty: { digits: 2, digits2: 2, operators: '+-' } },
  'easy-mix': {
    task: 'mix',
    difficulty: {
      arith: { digits: 2, digits2: 2, operators: '+-' },
      expr: { operations: 2, maxOperand: 9, operators: '+-' },
      linear: { minCoef: 2, maxCoef: 5, maxX: 20, maxConst: 20, negative: 0 },
      fraction: { minDen: 2, maxDen: 10, operators: '+-' },
      word: { minNumber: 2, maxNumber: 10, maxSteps: 1 },
    },
  },
} as const satisfies Record<string, TaskPreset>;

/** The spec of preset `name` for a split, size and seed. */
export function presetSpec(name: keyof typeof PRESETS, split: SplitName, n: number, seed: number): TaskSpec {
  const preset: TaskPreset | undefined = PRESETS[name];
  if (preset === undefined) throw new Error(`unknown preset "${name}"; known: ${Object.keys(PRESETS).join(', ')}`);
  return { ...preset, split, n, seed } as TaskSpec;
}
