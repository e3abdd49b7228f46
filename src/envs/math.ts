/**
 * Math with a tool (AT-GRPO spec): a generated problem with an exact answer. The reasoner's action is its final
 * answer; r_env is 1 when it equals the gold answer. The tool agent's code is run by the workflow (in the sandbox),
 * and its output is scored with toolOutputReward.
 */
import { z } from 'zod';
import { parseWith } from '../util/json-file.js';
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
  solved: boolean;
}

/** True when `candidate` is the gold answer (exact or rational equality; no symbolic engine in the loop). */
export function mathAnswerCorrect(gold: string, candidate: string): boolean {
  return verifyFast(gold, candidate).equal === true;
}

/** The math environment: the reasoner answers with \boxed{…}. */
export function mathEnv(options: Partial<MathOptions> = {}): Environment<MathState, string> {
  const o = parseWith(MathOptionsSchema, options, 'workflow.env (math knobs)');
  const gen = BASE_GENERATORS[o.task];
  const knobs = gen.resolve(o.difficulty as never);
  return {
    name: 'math',
    actionFormat: 'Give the final answer as \\boxed{ANSWER}.',
    reset: (seed) => {
      const p = gen.generate(new Rng(seed), knobs as never);
      return { id: `math-${o.task}:${seed}`, question: p.prompt, answer: p.answer, solved: false };
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
  };
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
