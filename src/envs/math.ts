/**
 * Math with a tool (AT-GRPO spec): a generated problem with an exact answer. The reasoner's action is its final
 * answer; r_env is 1 when it equals the gold answer. The tool agent's code is run by the workflow (in the sandbox),
 * and its output is scored with toolOutputReward. Its expert program computes the answer from the question's numbers
 * (`console.log(47+38)`), as the paper's tool agent does, where the task gives an expression (arith, expr, linear,
 * word); fraction's prints the gold answer.
 */
import { z } from 'zod';
import { parseSection } from '../util/json-file.js';
import { extractAnswer } from '../rewards/extract.js';
import { verifyFast } from '../rewards/math-equal.js';
import { BASE_GENERATORS, BASE_TASKS, type BaseTask } from '../tasks/generators/mix.js';
import { Rng } from '../util/rng.js';
import type { EnvStep, Environment } from './environment.js';

/** Math knobs. */
export const MathOptionsSchema = z
  .object({
    /** Which generated task; default 'arith'. */
    task: z.enum(BASE_TASKS as [BaseTask, ...BaseTask[]]).default('arith'),
    /** Difficulty knobs of that task (see `hacrl eval --help` for each task's knobs); default the task's own. */
    difficulty: z.record(z.string(), z.unknown()).default({}),
  })
  .strict();
/** Math knobs with defaults filled in. */
export type MathOptions = z.output<typeof MathOptionsSchema>;

/** A math state: the problem and whether it has been answered correctly. */
export interface MathState {
  id: string;
  question: string;
  answer: string;
  /** The answer as a JavaScript expression on the question's numbers (Generated.expression), or null where none. */
  expression: string | null;
  solved: boolean;
}

/** True when `candidate` is the gold answer (exact or rational equality; no symbolic engine in the loop). */
export function mathAnswerCorrect(gold: string, candidate: string): boolean {
  return verifyFast(gold, candidate).equal === true;
}

/** The math environment: the reasoner answers with \boxed{…}. */
export function mathEnv(options: Partial<MathOptions> = {}): Environment<MathState, string> {
  const o = parseSection(MathOptionsSchema, options, 'workflow.env', 'math knobs');
  const gen = BASE_GENERATORS[o.task];
  const knobs = gen.resolve(o.difficulty as never);
  return {
    name: 'math',
    actionFormat: 'Give the final answer as \\boxed{ANSWER}.',
    reset: (seed) => {
      const p = gen.generate(new Rng(seed), knobs as never);
      const expression = p.expression ?? null;
      return { id: `math-${o.task}:${seed}`, question: p.prompt, answer: p.answer, expression, solved: false };
    },
    instanceId: (s) => s.id,
    render: (s) => `Problem: ${s.question}`,
    parseAction: (text) => extractAnswer(text),
    step: (s, answer): EnvStep<MathState> => {
      const correct = answer !== null && mathAnswerCorrect(s.answer, answer);
      const feedback = answer === null ? 'no \\boxed{} answer' : `answered ${answer}`;
      return {
        state: { ...s, solved: correct },
        reward: correct ? 1 : 0,
        done: correct,
        success: correct,
        parts: { correct: correct ? 1 : 0 },
        feedback,
      };
    },
    solve: (s) => s.answer,
    formatAction: (a) => `\\boxed{${a}}`,
    program: mathProgram,
    programOutput: mathProgramOutput,
  };
}

/**
 * The tool agent's expert program: `console.log(<expression>)`, computing the answer from the question's numbers in
 * one expression (`console.log(47+38)`, `console.log(40-5*7)`); `console.log("5/12")`, the gold answer, where the
 * task gives no expression (fraction).
 */
export function mathProgram(s: MathState): string {
  return `console.log(${s.expression ?? JSON.stringify(s.answer)})`;
}

/** mathProgram's templates: an argument of integers, + - * /, parentheses and spaces, or a quoted answer. */
const PROGRAM_TEMPLATE = /^console\.log\(([-+*/() 0-9]*)\)$/;
const PRINT_TEMPLATE = /^console\.log\("([-/0-9]+)"\)$/;

/**
 * What a program in mathProgram's templates prints, without running it: the quoted text, or the expression's value
 * in doubles, written as console.log writes a number; null for anything else (it runs in the sandbox), including
 * text JavaScript reads otherwise (`--`, `**`, `//`, a literal with a leading zero, unbalanced parentheses).
 */
export function mathProgramOutput(code: string): string | null {
  const c = code.trim();
  const printed = PRINT_TEMPLATE.exec(c)?.[1];
  if (printed !== undefined) return `${printed}\n`;
  const arg = PROGRAM_TEMPLATE.exec(c)?.[1];
  const v = arg === undefined ? null : evaluateArithmetic(arg);
  return v === null ? null : `${Object.is(v, -0) ? '-0' : String(v)}\n`;
}

/**
 * Deepest nesting (parentheses and unary minus) evaluateArithmetic follows, bounding its recursion; deeper code goes
 * to the sandbox.
 */
const MAX_NESTING = 64;

/**
 * The value JavaScript gives `text` — integer literals, binary + - * /, unary minus and parentheses, left-associative,
 * * and / before + and − — in doubles, as the engine computes it; null when `text` is not such an expression or
 * JavaScript would read it differently (`--` is a decrement there, `**` a power, `//` a comment, `07` octal).
 */
function evaluateArithmetic(text: string): number | null {
  if (/--|\+\+/.test(text)) return null;
  const tokens = text.match(/\d+|\S/g) ?? [];
  let at = 0;
  let depth = 0;
  const fail = (): never => {
    throw new SyntaxError(text);
  };
  const unary = (): number => {
    if (++depth > MAX_NESTING) fail();
    const t = tokens[at++] ?? fail();
    let v: number;
    if (t === '-') v = -unary();
    else if (t === '(') {
      v = sum();
      if (tokens[at++] !== ')') fail();
    } else v = /^(0|[1-9]\d*)$/.test(t) ? Number(t) : fail();
    depth--;
    return v;
  };
  const product = (): number => {
    let v = unary();
    while (tokens[at] === '*' || tokens[at] === '/') v = tokens[at++] === '*' ? v * unary() : v / unary();
    return v;
  };
  const sum = (): number => {
    let v = product();
    while (tokens[at] === '+' || tokens[at] === '-') v = tokens[at++] === '+' ? v + product() : v - product();
    return v;
  };
  try {
    const v = sum();
    return at === tokens.length ? v : null;
  } catch (e) {
    if (e instanceof SyntaxError) return null;
    throw e;
  }
}

/** Reward of the tool agent's own part: 1 when its program printed the answer, 0 when it printed another, −1 on an error. */
export const TOOL_REWARD = { correct: 1, wrong: 0, error: -1 } as const;

/**
 * Scores a program's output against the gold answer: the last non-empty line of stdout is the tool's answer.
 * `ran` is false when the program failed (error, time-out, memory, denied access, too much output).
 */
export function toolOutputReward(gold: string, stdout: string, ran: boolean): number {
  if (!ran) return TOOL_REWARD.error;
  const last = stdout.trim().split('\n').pop()?.trim() ?? '';
  return last !== '' && mathAnswerCorrect(gold, last) ? TOOL_REWARD.correct : TOOL_REWARD.wrong;
}
