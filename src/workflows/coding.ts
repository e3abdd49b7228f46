/**
 * The coding workflow (PettingLLMs' coder and tester, in miniature): each turn a tester writes test cases for the
 * task's function f, then a coder writes f, seeing the tester's cases (or, with workflow.agents coder then tester,
 * the coder answers first and revises after the tester's cases in the next turn). The coder's program runs in the
 * sandbox on the hidden cases and on the tester's; the episode is solved when it passes every hidden case.
 * Rewards: coder 2·(hidden pass rate); tester ½·validity + ½·(mutants failed) of its cases, plus the coder's pass
 * rate as its team term. src/envs/coding.ts defines the tasks and the scores.
 */
import {
  type CaseOutput,
  type CodingState,
  type CodingValue,
  codingEnv,
  formatCases,
  knownOutputs,
  mutantProgram,
  mutantSuite,
  parseTestCases,
  passRate,
  programHarness,
  readHarness,
  scoreTester,
  withCases,
} from '../envs/coding.js';
import type { Environment } from '../envs/environment.js';
import { type SandboxLimits, runSandboxed } from '../sandbox/run-code.js';
import type { SandboxOutcome } from '../sandbox/sandbox-types.js';
import { actingRoles, roleSettings } from './builtin.js';
import { type RoleSettings, actorRole, buildPrompt, extractCode } from './roles.js';
import type { WorkflowConfig } from './workflow-config.js';
import type { Role, Workflow } from './workflow.js';

/** The outputs of `code` on `inputs`: worked out for a canonical program, else from a sandboxed run of the harness. */
export async function runProgram(
  code: string,
  inputs: readonly (readonly CodingValue[])[],
  limits: Partial<SandboxLimits>,
): Promise<{ outputs: CaseOutput[]; outcome: SandboxOutcome }> {
  const known = knownOutputs(code, inputs);
  if (known !== null) return { outputs: known, outcome: 'ok' };
  const run = await runSandboxed(programHarness(code, inputs), limits);
  return { outputs: readHarness(run.stdout, inputs.length, run.outcome === 'ok', run.outcome), outcome: run.outcome };
}

/**
 * The tester: its cases are scored against the reference and the mutants (scoreTester) and become the state the
 * coder sees. Own reward ownScale · r_env; parseFailure when no case can be read.
 */
export function codingTesterRole(s: RoleSettings, env: Environment<CodingState, unknown>): Role<CodingState> {
  const format =
    'Write test cases for f, one per line: f(ARGUMENTS) == RESULT, values in JSON (strings in double quotes).';
  return {
    // An actor's name, policy, sampling, skipped turns and team term; prompt, act and expert are the coding ones.
    ...actorRole(s, env),
    prompt: (state) => buildPrompt(s, env, state, format),
    act: async (state, response) => {
      const keep = { done: state.done, success: state.success, sandbox: null };
      const cases = parseTestCases(response);
      if (cases === null)
        return { ...keep, env: state.env, own: s.parseFailure, envReward: 0, parsed: false, feedback: 'no test case' };
      const score = scoreTester(state.env.task, cases);
      const feedback = formatCases(cases).replace(/\n/g, '; ');
      return {
        ...keep,
        env: withCases(state.env, cases),
        own: s.ownScale * score.reward,
        envReward: score.reward,
        parsed: true,
        feedback,
      };
    },
    expert: (state) => formatCases(state.env.task.suite),
    // A tester wrong about f: cheap to apply (a canonical coder's outputs on them are worked out, not run).
    detour: (state, seed) => formatCases(mutantSuite(state.env.task, seed)),
  };
}

/**
 * The coder: its program runs (in the sandbox unless canonical) on the hidden cases and the tester's current ones.
 * Own reward ownScale · (hidden pass rate); parseFailure when the response defines no f. The feedback names how many
 * of the tester's cases it passes, never the hidden ones.
 */
export function codingCoderRole(
  s: RoleSettings,
  env: Environment<CodingState, unknown>,
  limits: Partial<SandboxLimits>,
): Role<CodingState> {
  return {
    // An actor's name, policy, sampling, skipped turns and team term; prompt, act and expert are the coding ones.
    ...actorRole(s, env),
    prompt: (state) => buildPrompt(s, env, state, env.actionFormat),
    act: async (state, response) => {
      const action = env.parseAction(extractCode(response)) as { code: string } | null;
      if (action === null) {
        const step = env.step(state.env, null);
        const keep = { env: state.env, done: state.done, success: state.success, sandbox: null };
        return { ...keep, own: s.parseFailure, envReward: 0, parsed: false, feedback: step.feedback };
      }
      const { task, cases } = state.env;
      const hidden = task.hidden.map((c) => c.args);
      const run = await runProgram(action.code, [...hidden, ...cases.map((c) => c.args)], limits);
      const step = env.step(state.env, { code: action.code, outputs: run.outputs.slice(0, hidden.length) });
      // Later prompts show how the program did on the tester's cases only: the hidden cases stay hidden, so a coder
      // learns what to fix from its teammate, not from the grader.
      const passed = Math.round(passRate(cases, run.outputs.slice(hidden.length)) * cases.length);
      const theirs = cases.length ? `passes ${passed} of ${cases.length} of the tester's cases` : 'no tester cases';
      const failed = run.outcome === 'ok' ? '' : ` (the program failed: ${run.outcome})`;
      return {
        env: step.state as CodingState,
        own: s.ownScale * step.reward,
        envReward: step.reward,
        parsed: true,
        done: step.done,
        success: step.success,
        feedback: `${theirs}${failed}`,
        sandbox: run.outcome,
      };
    },
    expert: (state) => state.env.task.reference,
    // A coder wrong about f before the last turn (a first answer to revise): a mutant, worked out without a run.
    detour: (state, seed) => mutantProgram(state.env.task, seed),
  };
}

/** Coding: tester then coder, or in workflow.agents order (knobs in `env`: src/envs/coding.ts). */
export function codingWorkflow(config: WorkflowConfig): Workflow<unknown> {
  const env = codingEnv(config.env) as Environment<CodingState, unknown>;
  const acting = actingRoles('coding', ['tester', 'coder'], config);
  const roles = acting.map((r) =>
    r === 'tester'
      ? codingTesterRole(
          roleSettings(
            r,
            {
              instruction: 'You are the tester: write test cases that the right f passes and wrong ones fail.',
              maxNewTokens: 96,
              stopStrings: ['\n\n'],
              ownScale: 1,
              parseFailure: -1,
              team: 'coder',
            },
            config,
            acting,
          ),
          env,
        )
      : codingCoderRole(
          roleSettings(
            r,
            {
              instruction: 'You are the coder: write the function f.',
              maxNewTokens: 64,
              stopStrings: ['\n'],
              ownScale: 2,
              parseFailure: -1,
              team: null,
            },
            config,
            acting,
          ),
          env,
          config.sandbox,
        ),
  );
  return {
    name: 'coding',
    env: env as Environment<unknown, unknown>,
    roles: roles as Role<unknown>[],
    maxTurns: config.maxTurns,
  };
}
