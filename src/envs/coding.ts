/**
 * Coding in miniature (AT-GRPO spec, "Code"; PettingLLMs' coder and tester): a generated specification of a one-line
 * JavaScript function f, with an exact reference solution, hidden test cases and known-wrong mutants. A tester writes
 * test cases (data: arguments and the expected result in JSON); a coder writes the function, which runs in the
 * sandbox on the hidden cases and on the tester's. This file is pure: it builds the program the sandbox runs and reads
 * its output; src/workflows/coding.ts runs it.
 *
 * Train and test tasks are disjoint: a task's key (operation, constant, parameter names) lies on one side by its hash,
 * and instance seeds from `testSeedsFrom` on (the held-out and calibration seeds) draw only test-side keys.
 */
import { z } from 'zod';
import { isTestKey } from '../tasks/splits.js';
import { parseSection } from '../util/json-file.js';
import { Rng } from '../util/rng.js';
import { type EnvStep, type Environment, finishedStep } from './environment.js';

/** The task families: arithmetic on integers, string operations, operations on integer arrays. */
export const CODING_FAMILIES = ['arith', 'string', 'array'] as const;
/** One task family. */
export type CodingFamily = (typeof CODING_FAMILIES)[number];

/** Coding knobs. */
export const CodingOptionsSchema = z
  .object({
    /** Families tasks are drawn from; default all three. */
    families: z
      .array(z.enum(CODING_FAMILIES))
      .min(1)
      .default([...CODING_FAMILIES]),
    /** Hidden test cases scoring the coder (every mutant fails at least one); default 5. */
    hiddenCases: z.number().int().min(1).max(20).default(5),
    /** Known-wrong mutants scoring the tester (fewer when the family offers fewer); default 3. */
    mutants: z.number().int().min(1).max(8).default(3),
    /** Cases in the tester's expert suite (warm starts), chosen so that they fail every mutant; default 3. */
    suiteCases: z.number().int().min(1).max(8).default(3),
    /** Share of task keys reserved for the test side, in (0, 1); default 0.2. */
    testShare: z.number().gt(0).lt(1).default(0.2),
    /**
     * First instance seed drawing test-side tasks; smaller seeds draw train-side ones. Default 1,500,000,000, the
     * first held-out seed of src/workflows/play.ts (warm-start and training seeds lie below it).
     */
    testSeedsFrom: z.number().int().default(1_500_000_000),
  })
  .strict();
/** Coding knobs with defaults filled in. */
export type CodingOptions = z.output<typeof CodingOptionsSchema>;

/** A value passed to or returned by f: an integer, a string, or an array of integers. */
export type CodingValue = number | string | number[];
/** The kind of a parameter. */
type Kind = 'int' | 'str' | 'ints';

/** One operation of a family: its specification phrase, its JavaScript body and its meaning (trusted, in-process). */
interface Op {
  family: CodingFamily;
  kinds: readonly Kind[];
  /** True when the operation takes a constant N (2–9). */
  usesN: boolean;
  /** The specification's phrase for parameters `p` and constant `n`, e.g. "a times 3 plus b". */
  text(p: readonly string[], n: number): string;
  /** The return expression, e.g. "a*3+b". */
  body(p: readonly string[], n: number): string;
  /** What the body returns, computed here (only on arguments inside the input domain). */
  run(args: readonly CodingValue[], n: number): CodingValue;
}

const int = (v: CodingValue): number => v as number;
const str = (v: CodingValue): string => v as string;
const ints = (v: CodingValue): number[] => v as number[];

/** The operations by name. Every input in the domain gives a finite number, a string or an integer array. */
const OPS: Readonly<Record<string, Op>> = {
  add: arith2(
    'plus',
    (a, b) => `${a}+${b}`,
    (a, b) => a + b,
  ),
  sub: arith2(
    'minus',
    (a, b) => `${a}-${b}`,
    (a, b) => a - b,
  ),
  mul: arith2(
    'times',
    (a, b) => `${a}*${b}`,
    (a, b) => a * b,
  ),
  max: {
    ...arith2(
      '',
      (a, b) => `Math.max(${a},${b})`,
      (a, b) => Math.max(a, b),
    ),
    text: (p) => `the larger of ${p[0]} and ${p[1]}`,
  },
  min: {
    ...arith2(
      '',
      (a, b) => `Math.min(${a},${b})`,
      (a, b) => Math.min(a, b),
    ),
    text: (p) => `the smaller of ${p[0]} and ${p[1]}`,
  },
  mulNAdd: {
    family: 'arith',
    kinds: ['int', 'int'],
    usesN: true,
    text: (p, n) => `${p[0]} times ${n} plus ${p[1]}`,
    body: (p, n) => `${p[0]}*${n}+${p[1]}`,
    run: (a, n) => int(a[0]!) * n + int(a[1]!),
  },
  addN: arith1('plus', '+', (a, n) => a + n),
  subN: arith1('minus', '-', (a, n) => a - n),
  mulN: arith1('times', '*', (a, n) => a * n),
  square: {
    family: 'arith',
    kinds: ['int'],
    usesN: false,
    text: (p) => `${p[0]} squared`,
    body: (p) => `${p[0]}*${p[0]}`,
    run: (a) => int(a[0]!) * int(a[0]!),
  },
  upper: string1(
    'in capital letters',
    (s) => `${s}.toUpperCase()`,
    (s) => s.toUpperCase(),
  ),
  twice: string1(
    'written twice',
    (s) => `${s}+${s}`,
    (s) => s + s,
  ),
  length: {
    ...string1(
      '',
      (s) => `${s}.length`,
      (s) => s.length,
    ),
    text: (p) => `the length of ${p[0]}`,
  },
  dropFirst: string1(
    'without its first letter',
    (s) => `${s}.slice(1)`,
    (s) => s.slice(1),
  ),
  reverse: string1(
    'reversed',
    (s) => `[...${s}].reverse().join("")`,
    (s) => [...s].reverse().join(''),
  ),
  firstN: {
    family: 'string',
    kinds: ['str'],
    usesN: true,
    text: (p, n) => `the first ${n} letters of ${p[0]}`,
    body: (p, n) => `${p[0]}.slice(0,${n})`,
    run: (a, n) => str(a[0]!).slice(0, n),
  },
  mapMul: array1(
    (p, n) => `every number of ${p} times ${n}`,
    (p, n) => `${p}.map(x=>x*${n})`,
    (xs, n) => xs.map((x) => x * n),
  ),
  mapAdd: array1(
    (p, n) => `every number of ${p} plus ${n}`,
    (p, n) => `${p}.map(x=>x+${n})`,
    (xs, n) => xs.map((x) => x + n),
  ),
  above: array1(
    (p, n) => `the numbers of ${p} greater than ${n}`,
    (p, n) => `${p}.filter(x=>x>${n})`,
    (xs, n) => xs.filter((x) => x > n),
  ),
  take: array1(
    (p, n) => `the first ${n} numbers of ${p}`,
    (p, n) => `${p}.slice(0,${n})`,
    (xs, n) => xs.slice(0, n),
  ),
  sum: {
    ...array1(
      (p) => `the sum of ${p}`,
      (p) => `${p}.reduce((t,x)=>t+x,0)`,
      (xs) => xs.reduce((t, x) => t + x, 0),
    ),
    usesN: false,
  },
  count: {
    ...array1(
      (p) => `the length of ${p}`,
      (p) => `${p}.length`,
      (xs) => xs.length,
    ),
    usesN: false,
  },
  flip: {
    ...array1(
      (p) => `${p} reversed`,
      (p) => `${p}.slice().reverse()`,
      (xs) => xs.slice().reverse(),
    ),
    usesN: false,
  },
};

/** An operation on two integers without a constant, e.g. "a plus b". */
function arith2(word: string, body: (a: string, b: string) => string, run: (a: number, b: number) => number): Op {
  return {
    family: 'arith',
    kinds: ['int', 'int'],
    usesN: false,
    text: (p) => `${p[0]} ${word} ${p[1]}`,
    body: (p) => body(p[0]!, p[1]!),
    run: (a) => run(int(a[0]!), int(a[1]!)),
  };
}

/** An operation on one integer and the constant, e.g. "a plus 3". */
function arith1(word: string, sign: string, run: (a: number, n: number) => number): Op {
  return {
    family: 'arith',
    kinds: ['int'],
    usesN: true,
    text: (p, n) => `${p[0]} ${word} ${n}`,
    body: (p, n) => `${p[0]}${sign}${n}`,
    run: (a, n) => run(int(a[0]!), n),
  };
}

/** An operation on one string, e.g. "s reversed". */
function string1(words: string, body: (s: string) => string, run: (s: string) => CodingValue): Op {
  return {
    family: 'string',
    kinds: ['str'],
    usesN: false,
    text: (p) => `${p[0]} ${words}`,
    body: (p) => body(p[0]!),
    run: (a) => run(str(a[0]!)),
  };
}

/** An operation on one integer array and (by default) the constant. */
function array1(
  text: (p: string, n: number) => string,
  body: (p: string, n: number) => string,
  run: (xs: number[], n: number) => CodingValue,
): Op {
  return {
    family: 'array',
    kinds: ['ints'],
    usesN: true,
    text: (p, n) => text(p[0]!, n),
    body: (p, n) => body(p[0]!, n),
    run: (a, n) => run(ints(a[0]!), n),
  };
}

/** Parameter names by the kinds of an operation (varied, so a task's key is more than its operation). */
const PARAM_NAMES: Readonly<Record<string, readonly (readonly string[])[]>> = {
  'int,int': [
    ['a', 'b'],
    ['x', 'y'],
    ['m', 'n'],
    ['p', 'q'],
  ],
  int: [['a'], ['x'], ['n'], ['k']],
  str: [['s'], ['t'], ['w'], ['word']],
  ints: [['xs'], ['ys'], ['v'], ['nums']],
};

/** The input domain: what a test case may pass (bounded, so trusted code on it is cheap). */
const DOMAIN = {
  /** Largest magnitude of an integer. */
  maxInt: 1000,
  /** Longest string (letters only). */
  maxString: 12,
  /** Longest array. */
  maxArray: 10,
} as const;

/** True when `v` is an argument of kind `k` inside the domain. */
function inDomain(k: Kind, v: unknown): boolean {
  const isInt = (x: unknown): boolean => Number.isInteger(x) && Math.abs(x as number) <= DOMAIN.maxInt;
  if (k === 'int') return isInt(v);
  if (k === 'str') return typeof v === 'string' && v.length <= DOMAIN.maxString && /^[a-zA-Z]*$/.test(v);
  return Array.isArray(v) && v.length <= DOMAIN.maxArray && v.every(isInt);
}

/** Draws an argument of kind `k` (generated cases: small values a small agent can work with). */
function drawArg(rng: Rng, k: Kind): CodingValue {
  if (k === 'int') return rng.int(10);
  if (k === 'str') return Array.from({ length: 1 + rng.int(5) }, () => 'abcdefgh'[rng.int(8)]).join('');
  return Array.from({ length: 1 + rng.int(4) }, () => rng.int(10));
}

/** An operation with its constant (ignored when the operation takes none). */
interface OpRef {
  op: string;
  n: number;
}

/** One test case: the arguments of f and the result expected. */
export interface TestCase {
  args: CodingValue[];
  expected: CodingValue;
}

/** One generated task. */
export interface CodingTask {
  /** 'coding:<seed>'. */
  id: string;
  /** What decides the split: operation, constant and parameter names. */
  key: string;
  /** The operation and constant of the reference solution. */
  op: string;
  n: number;
  /** Parameter names of f, in order. */
  params: string[];
  /** The specification shown to both roles. */
  spec: string;
  /** The reference solution, in the canonical form an expert coder writes. */
  reference: string;
  /** Hidden cases (never shown): they score the coder. */
  hidden: TestCase[];
  /** Known-wrong programs (other operations or constants) that score the tester; each fails a hidden case. */
  mutants: OpRef[];
  /** The tester's expert suite: cases that pass the reference and together fail every mutant. */
  suite: TestCase[];
}

/** The canonical program of an operation: `function f(a,b){return a*3+b}`. */
export function canonicalProgram(ref: OpRef, params: readonly string[]): string {
  return `function f(${params.join(',')}){return ${OPS[ref.op]!.body(params, ref.n)}}`;
}

/** The value of an operation on in-domain arguments, as the JSON text the harness prints. */
function valueText(ref: OpRef, args: readonly CodingValue[]): string {
  return JSON.stringify(OPS[ref.op]!.run(args, ref.n));
}

/** True when `args` fit the parameter kinds of `op` and the domain. */
function argsFit(op: string, args: readonly unknown[]): boolean {
  const kinds = OPS[op]!.kinds;
  return args.length === kinds.length && kinds.every((k, i) => inDomain(k, args[i]));
}

/** Draws before a seed gives up on finding a task of its split (the test side holds about testShare of the keys). */
const TASK_DRAWS = 1000;

/** Task `seed`: an operation of the chosen families on the seed's side of the split, its cases and mutants. */
export function generateCodingTask(seed: number, o: CodingOptions): CodingTask {
  const rng = new Rng(seed);
  const wantTest = seed >= o.testSeedsFrom;
  const names = Object.keys(OPS).filter((k) => o.families.includes(OPS[k]!.family));
  for (let draw = 0; draw < TASK_DRAWS; draw++) {
    const op = names[rng.int(names.length)]!;
    const def = OPS[op]!;
    const n = def.usesN ? 2 + rng.int(8) : 0;
    const choices = PARAM_NAMES[def.kinds.join(',')]!;
    const params = [...choices[rng.int(choices.length)]!];
    const key = `${op}|${n}|${params.join(',')}`;
    if (isTestKey(key, o.testShare) !== wantTest) continue;
    const ref = { op, n };
    const draws = (count: number): CodingValue[][] =>
      Array.from({ length: count }, () => def.kinds.map((k) => drawArg(rng, k)));
    const caseOf = (args: CodingValue[]): TestCase => ({ args, expected: def.run(args, n) });
    const differ = (m: OpRef, args: CodingValue[]): boolean => valueText(m, args) !== valueText(ref, args);
    const pool = draws(40);
    // Mutants: same parameter kinds, another operation or the same one with a neighbouring constant, each failing
    // some drawn case; the hidden cases then cover every mutant before random ones fill them.
    const candidates = mutantCandidates(ref).filter((m) => pool.some((args) => differ(m, args)));
    if (candidates.length === 0) continue;
    const mutants = rng.shuffle(candidates).slice(0, o.mutants);
    const covering = (count: number, from: CodingValue[][]): CodingValue[][] => {
      const chosen: CodingValue[][] = [];
      for (const m of mutants) {
        const hit = chosen.some((args) => differ(m, args)) ? undefined : from.find((args) => differ(m, args));
        if (hit !== undefined && chosen.length < count) chosen.push(hit);
      }
      return [...chosen, ...from.filter((args) => !chosen.includes(args))].slice(0, count);
    };
    const hidden = covering(o.hiddenCases, pool.slice(0, 20));
    const suite = covering(o.suiteCases, pool.slice(20));
    if (!mutants.every((m) => hidden.some((a) => differ(m, a)) && suite.some((a) => differ(m, a)))) continue;
    const signature = `f(${params.join(', ')})`;
    return {
      id: `coding:${seed}`,
      key,
      op,
      n,
      params,
      spec: `Write a JavaScript function ${signature} that returns ${def.text(params, n)}.`,
      reference: canonicalProgram(ref, params),
      hidden: hidden.map(caseOf),
      mutants,
      suite: suite.map(caseOf),
    };
  }
  throw new Error(
    `coding: no ${wantTest ? 'test' : 'train'}-side task in ${TASK_DRAWS} draws for seed ${seed} and ` +
      `${JSON.stringify(o.families)}; add families or move testShare away from 0 and 1`,
  );
}

/** Wrong programs for `ref`: other operations on the same kinds, and the same operation with constant n ± 1. */
function mutantCandidates(ref: OpRef): OpRef[] {
  const def = OPS[ref.op]!;
  const same = Object.keys(OPS).filter((k) => k !== ref.op && OPS[k]!.kinds.join() === def.kinds.join());
  const others = same.map((op) => ({ op, n: OPS[op]!.usesN ? (def.usesN ? ref.n : 3) : 0 }));
  const neighbours = def.usesN ? [ref.n - 1, ref.n + 1].map((n) => ({ op: ref.op, n })) : [];
  return [...neighbours, ...others];
}

/**
 * The expert suite's arguments with the results of mutant `index` (modulo their number): the cases of a tester who is
 * wrong about f (a warm-start detour: well-formed, of the right kinds, and failing the reference).
 */
export function mutantSuite(task: CodingTask, index: number): TestCase[] {
  const m = mutantAt(task, index);
  return task.suite.map((c) => ({ args: c.args, expected: OPS[m.op]!.run(c.args, m.n) }));
}

/** The canonical text of test cases: one `f(ARGS) == RESULT` line each, values in JSON. */
export function formatCases(cases: readonly TestCase[]): string {
  return cases
    .map((c) => `f(${c.args.map((a) => JSON.stringify(a)).join(',')}) == ${JSON.stringify(c.expected)}`)
    .join('\n');
}

/** Most cases read from one tester answer; later lines are ignored. */
export const MAX_TESTER_CASES = 8;

const CASE_LINE = /^\s*f\((.*)\)\s*={2,3}\s*(.+?)\s*;?\s*$/;

/**
 * The test cases in `text`: lines `f(ARGS) == RESULT` (or ===) whose ARGS and RESULT are JSON, at most
 * MAX_TESTER_CASES; null when no line is one. Cases are data: they are never run as code.
 */
export function parseTestCases(text: string): TestCase[] | null {
  const cases: TestCase[] = [];
  for (const line of text.split('\n')) {
    const m = CASE_LINE.exec(line);
    if (m === null) continue;
    try {
      const args: unknown = JSON.parse(`[${m[1]}]`);
      const expected: unknown = JSON.parse(m[2]!);
      cases.push({ args: args as CodingValue[], expected: expected as CodingValue });
    } catch {
      continue;
    }
    if (cases.length === MAX_TESTER_CASES) break;
  }
  return cases.length > 0 ? cases : null;
}

/** How a tester's cases score against the reference solution and the mutants. */
export interface TesterScore {
  /** Per case: the arguments fit f and the domain, and the reference returns the expected result. */
  valid: boolean[];
  /** Fraction of the cases that are valid. */
  validity: number;
  /** Fraction of the mutants that some valid case fails. */
  killRate: number;
  /** r_env of the tester: ½·validity + ½·killRate, in [0, 1]. */
  reward: number;
}

/**
 * Scores test cases: validity against the reference, separation against the mutants. The reference and the mutants
 * are the project's own operations, evaluated here on arguments checked against the domain first (a case outside it
 * is invalid and is never evaluated).
 */
export function scoreTester(task: CodingTask, cases: readonly TestCase[]): TesterScore {
  const ref = { op: task.op, n: task.n };
  const valid = cases.map((c) => argsFit(task.op, c.args) && valueText(ref, c.args) === JSON.stringify(c.expected));
  const good = cases.filter((_, i) => valid[i]);
  const killed = task.mutants.filter((m) => good.some((c) => valueText(m, c.args) !== JSON.stringify(c.expected)));
  const validity = cases.length ? good.length / cases.length : 0;
  const killRate = killed.length / task.mutants.length;
  return { valid, validity, killRate, reward: 0.5 * validity + 0.5 * killRate };
}

/** What the harness reports for one case: the JSON text of the result, or why there is none. */
export type CaseOutput = { value: string } | { error: string };

/**
 * Most ms one case (or the program's own top level) may run inside the harness; a case over it fails, and the cases
 * after it are not run (a loop costs one limit, not one per case). One-line functions on domain inputs take
 * microseconds, so only runaway code comes near it.
 */
export const CASE_TIMEOUT_MS = 250;

/** Prefix of a result line of the harness. */
const CASE_MARK = '@case ';

/**
 * The script the sandbox runs for `code` on `inputs`: the program is evaluated in a fresh V8 context (no require, no
 * process, no console), then f is called on each input in turn under CASE_TIMEOUT_MS; one line per case with the
 * JSON text of the result or the error's kind. A program that escapes the context can still only end the run early
 * or print lines of its own: results are compared outside the sandbox, and the first line per case counts.
 */
export function programHarness(code: string, inputs: readonly (readonly CodingValue[])[]): string {
  return `"use strict";
const vm = require("vm");
const inputs = ${JSON.stringify(inputs)};
const ctx = vm.createContext({});
const say = (i, r) => process.stdout.write(${JSON.stringify(CASE_MARK)} + i + " " + JSON.stringify(r) + "\\n");
const kind = (e) => { try { return e && e.code === "ERR_SCRIPT_EXECUTION_TIMEOUT" ? "timeout" : "error"; } catch { return "error"; } };
let failed = null;
try {
  vm.runInContext(${JSON.stringify(code)}, ctx, { timeout: ${CASE_TIMEOUT_MS} });
  if (vm.runInContext("typeof f", ctx, { timeout: ${CASE_TIMEOUT_MS} }) !== "function") failed = "no function f";
} catch (e) { failed = kind(e); }
for (let i = 0; i < inputs.length; i++) {
  if (failed !== null) { say(i, { error: failed }); continue; }
  try {
    ctx.__args = inputs[i];
    const t = vm.runInContext("JSON.stringify(f(...__args))", ctx, { timeout: ${CASE_TIMEOUT_MS} });
    say(i, typeof t === "string" ? { value: t } : { error: "no JSON value" });
  } catch (e) {
    const k = kind(e);
    if (k === "timeout") failed = k;
    say(i, { error: k });
  }
}
`;
}

/**
 * The per-case outputs of a harness run: the first well-formed line for each case; a case without one (the run ended
 * early) is an error. `ran` false (the run did not end 'ok') fails every case with `outcome`.
 */
export function readHarness(stdout: string, count: number, ran: boolean, outcome = 'failed'): CaseOutput[] {
  const out: (CaseOutput | undefined)[] = Array.from({ length: count });
  if (ran)
    for (const line of stdout.split('\n')) {
      if (!line.startsWith(CASE_MARK)) continue;
      const space = line.indexOf(' ', CASE_MARK.length);
      const i = Number(line.slice(CASE_MARK.length, space));
      if (!Number.isInteger(i) || i < 0 || i >= count || out[i] !== undefined) continue;
      try {
        const r = JSON.parse(line.slice(space + 1)) as Record<string, unknown>;
        if (typeof r['value'] === 'string') out[i] = { value: r['value'] };
        else if (typeof r['error'] === 'string') out[i] = { error: r['error'] };
      } catch {
        continue;
      }
    }
  return out.map((o) => o ?? { error: ran ? 'missing' : outcome });
}

/**
 * The canonical program of mutant `index` (modulo their number) in the task's parameter names: a coder wrong about f
 * (a warm-start detour: it defines f, runs without the sandbox, and fails a hidden case).
 */
export function mutantProgram(task: CodingTask, index: number): string {
  return canonicalProgram(mutantAt(task, index), task.params);
}

/** Mutant `index` of the task, modulo their number (detours choose one by their seed). */
function mutantAt(task: CodingTask, index: number): OpRef {
  return task.mutants[index % task.mutants.length]!;
}

/**
 * The outputs of `code` on `inputs` worked out without running it, when `code` is exactly the canonical program of
 * an operation whose parameters every input fits (the reference of this task or of another: warm starts apply tens of thousands
 * of them, and test/coding.test.ts checks them against sandboxed runs) and every input fits the domain; else null.
 */
export function knownOutputs(code: string, inputs: readonly (readonly CodingValue[])[]): CaseOutput[] | null {
  const ref = CANONICAL.get(code.trim());
  if (ref === undefined || !inputs.every((a) => argsFit(ref.op, a))) return null;
  return inputs.map((args) => ({ value: valueText(ref, args) }));
}

/** Every canonical program (all operations, constants and parameter names) → its operation. */
const CANONICAL: ReadonlyMap<string, OpRef> = new Map(
  Object.entries(OPS).flatMap(([op, def]) =>
    (def.usesN ? [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] : [0]).flatMap((n) =>
      PARAM_NAMES[def.kinds.join(',')]!.map((p) => [canonicalProgram({ op, n }, p), { op, n }] as const),
    ),
  ),
);

/** Fraction of `cases` whose output is the expected result (JSON texts equal). */
export function passRate(cases: readonly TestCase[], outputs: readonly CaseOutput[]): number {
  if (cases.length === 0) return 0;
  const passed = cases.filter((c, i) => {
    const o = outputs[i];
    return o !== undefined && 'value' in o && o.value === JSON.stringify(c.expected);
  });
  return passed.length / cases.length;
}

/** A coding episode's state. */
export interface CodingState {
  task: CodingTask;
  /** The tester's latest cases (shown to the coder); none before the tester acts. */
  cases: TestCase[];
  /** The coder's latest program, or null before it writes one. */
  code: string | null;
  /** Hidden pass rate of that program. */
  passRate: number;
  /** True once a program passes every hidden case. */
  solved: boolean;
}

/**
 * The coder's action: a program and, unless it is a canonical program, its outputs on the hidden cases (in order),
 * which the workflow obtains from the sandbox before calling step.
 */
export interface CodingAction {
  code: string;
  outputs?: readonly CaseOutput[];
}

/** A program defines f: `function f(` or `f =` (const, let, var). */
const DEFINES_F = /\bfunction\s+f\s*\(|\b(?:const|let|var)\s+f\s*=/;

/** The state after the tester's cases: the coder now sees them (the tester's own score is scoreTester's). */
export function withCases(s: CodingState, cases: readonly TestCase[]): CodingState {
  return { ...s, cases: [...cases] };
}

/**
 * Applies the coder's program: r_env = its pass rate on the hidden cases (0–1); solved (and done) at 1. No program
 * read: r_env 0, the state unchanged. A finished episode ignores further programs.
 */
export function stepCoding(s: CodingState, action: CodingAction | null): EnvStep<CodingState> {
  if (s.solved) return finishedStep(s, true);
  if (action === null)
    return {
      state: s,
      reward: 0,
      done: false,
      success: false,
      parts: { pass: 0 },
      feedback: 'no function f could be read',
    };
  const outputs =
    action.outputs ??
    knownOutputs(
      action.code,
      s.task.hidden.map((c) => c.args),
    );
  if (outputs === null)
    throw new Error('coding: run the program in the sandbox (programHarness) and pass its outputs to step');
  const rate = passRate(s.task.hidden, outputs);
  const solved = rate === 1;
  const passed = Math.round(rate * s.task.hidden.length);
  return {
    state: { ...s, code: action.code, passRate: rate, solved },
    reward: rate,
    done: solved,
    success: solved,
    parts: { pass: rate },
    feedback: `passes ${passed} of ${s.task.hidden.length} hidden tests`,
  };
}

/** The specification, then the tester's current cases when there are any. */
export function renderCoding(s: CodingState): string {
  const cases = s.cases.length ? ["The tester's cases:", formatCases(s.cases)] : [];
  return [`Task: ${s.task.spec}`, ...cases].join('\n');
}

/** The coding environment (the coder's side; the tester's cases go through parseTestCases, scoreTester, withCases). */
export function codingEnv(options: Partial<CodingOptions> = {}): Environment<CodingState, CodingAction> {
  const o = parseSection(CodingOptionsSchema, options, 'workflow.env', 'coding knobs');
  return {
    name: 'coding',
    actionFormat: 'Answer with the function on one line, e.g. function f(a,b){return a+b}',
    reset: (seed) => ({ task: generateCodingTask(seed, o), cases: [], code: null, passRate: 0, solved: false }),
    instanceId: (s) => s.task.id,
    render: renderCoding,
    parseAction: (text) => (DEFINES_F.test(text) ? { code: text.trim() } : null),
    step: stepCoding,
    solve: (s) => ({ code: s.task.reference }),
    formatAction: (a) => a.code,
  };
}
