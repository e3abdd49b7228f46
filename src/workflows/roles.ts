/**
 * The role kinds the built-in workflows are made of: an actor (planner, reasoner) whose action moves the environment,
 * a proposer (tool agent) whose proposal is only simulated on a copy of the state, and a coder whose program runs in
 * the sandbox. Each builds its prompt from the environment's observation and the history the workflow shows.
 */
import type { Environment } from '../envs/environment.js';
import { type SandboxLimits, runSandboxed } from '../sandbox/run-code.js';
import type { SandboxResult } from '../sandbox/sandbox-types.js';
import type { SamplingSettings } from './policy.js';
import type { EpisodeState, Role, RoleAct, TeamTerm } from './workflow.js';

/** Settings every role kind takes (resolved from the config and the workflow's defaults). */
export interface RoleSettings {
  name: string;
  policy: string;
  sampling: SamplingSettings;
  /** Turns (from 0) the role sits out. */
  skipTurns: readonly number[];
  /** Own reward = ownScale · r_env. */
  ownScale: number;
  /** Own reward when nothing can be parsed. */
  parseFailure: number;
  /** The team term, or null. */
  team: TeamTerm | null;
  /** How many past history entries the prompt shows. */
  history: number;
  /** The role's instruction, first line of its prompt. */
  instruction: string;
}

/**
 * The prompt: instruction, observation, the last `history` entries of earlier turns (this turn's are shown by the
 * roles that use them), extra lines, the action format, "Answer:".
 */
export function buildPrompt<S>(
  s: RoleSettings,
  env: Environment<S, unknown>,
  state: EpisodeState<S>,
  format: string,
  extra: readonly string[] = [],
): string {
  const past = state.history.filter((h) => h.turn < state.turn);
  const shown = s.history > 0 ? past.slice(-s.history) : [];
  const history = shown.length
    ? ['History:', ...shown.map((h) => `turn ${h.turn + 1} ${h.role}: ${oneLine(h.response)} -> ${h.feedback}`)]
    : [];
  return [`[${s.name}] ${s.instruction}`, env.render(state.env), ...history, ...extra, format, 'Answer:'].join('\n');
}

/** Newlines shown as " / " so each history entry is one line. */
function oneLine(text: string): string {
  return text.trim().replace(/\s*\n\s*/g, ' / ');
}

/** The fields of Role every kind fills the same way. */
function base<S>(s: RoleSettings): Pick<Role<S>, 'name' | 'policy' | 'sampling' | 'skips' | 'team'> {
  return {
    name: s.name,
    policy: s.policy,
    sampling: s.sampling,
    skips: (state) => s.skipTurns.includes(state.turn),
    team: s.team,
  };
}

/**
 * An actor: its action is applied to the environment. Own reward ownScale · r_env(action); when nothing parses,
 * parseFailure + r_env(no action) (the spec's planner: 2·r_env, or −2 + r_env).
 */
export function actorRole<S, A>(s: RoleSettings, env: Environment<S, A>): Role<S> {
  return {
    ...base<S>(s),
    prompt: (state) => buildPrompt(s, env as Environment<S, unknown>, state, env.actionFormat, proposalLines(state)),
    act: async (state, response) => {
      const action = env.parseAction(response);
      const step = env.step(state.env, action);
      const own = action === null ? s.parseFailure + step.reward : s.ownScale * step.reward;
      return { ...step, env: step.state, own, envReward: step.reward, parsed: action !== null, sandbox: null };
    },
    expert: (state) => {
      const action = env.solve(state.env);
      return action === null ? null : env.formatAction(action);
    },
  };
}

/** The tool agent's proposals of the current turn, shown to the roles after it. */
function proposalLines<S>(state: EpisodeState<S>): string[] {
  return state.history.filter((h) => h.turn === state.turn).map((h) => `The ${h.role} says: ${h.feedback}`);
}

/** What a tool role reads of a program's run. */
type SandboxRun = Pick<SandboxResult, 'outcome' | 'stdout'>;

/**
 * Runs the program in a tool agent's response: in the sandbox, after the environment's routines, unless it is in the
 * environment's expert template, whose output the environment works out without running it (envs.test.ts checks it
 * against sandboxed runs): warm starts apply tens of thousands of such programs and a sandboxed run costs about 55 ms
 * of process start. Worked-out programs count as 'ok'.
 */
export async function runToolProgram<S, A>(
  env: Environment<S, A>,
  response: string,
  sandbox: Partial<SandboxLimits>,
): Promise<SandboxRun> {
  const code = extractCode(response);
  const known = env.programOutput?.(code) ?? null;
  if (known !== null) return { outcome: 'ok', stdout: known };
  return runSandboxed(env.programLibrary === undefined ? code : `${env.programLibrary.code}\n${code}`, sandbox);
}

/** The program in a response: the last ``` fenced block, else the whole response. */
export function extractCode(response: string): string {
  const blocks = [...response.matchAll(/```[a-zA-Z]*\n?([\s\S]*?)```/g)];
  return blocks.length ? blocks[blocks.length - 1]![1]! : response;
}

/**
 * A proposer (the tool agent of the grid workflows): its proposal — the response itself ('text'), or what the
 * response's JavaScript prints ('code', run in the sandbox) — is simulated on a copy of the state, which does not
 * move. Own reward ownScale · r_env(proposal); parseFailure when nothing parses or the program fails, whose logged
 * r_env is that of no action (as the actor's).
 */
export function proposerRole<S, A>(
  s: RoleSettings,
  env: Environment<S, A>,
  mode: 'text' | 'code',
  sandbox: Partial<SandboxLimits>,
): Role<S> {
  const format =
    mode === 'text'
      ? `Propose the action for the planner. ${env.actionFormat}`
      : [
          `Write JavaScript that prints (console.log) the action for the planner. ${env.actionFormat}`,
          ...(env.programLibrary ? [`Defined for you: ${env.programLibrary.help}`] : []),
        ].join(' ');
  return {
    ...base<S>(s),
    prompt: (state) => buildPrompt(s, env as Environment<S, unknown>, state, format),
    act: async (state, response): Promise<RoleAct<S>> => {
      const run = mode === 'code' ? await runToolProgram(env, response, sandbox) : null;
      const text = run === null ? response : run.outcome === 'ok' ? run.stdout : '';
      const action = env.parseAction(text);
      const keep = { env: state.env, done: state.done, success: state.success, sandbox: run?.outcome ?? null };
      if (action === null) {
        const why = run && run.outcome !== 'ok' ? `program failed (${run.outcome})` : 'no action could be read';
        const envReward = env.step(state.env, null).reward;
        return { ...keep, own: s.parseFailure, envReward, parsed: false, feedback: why };
      }
      const sim = env.step(state.env, action);
      const feedback = `${env.formatAction(action)} (simulated: ${sim.feedback})`;
      return { ...keep, own: s.ownScale * sim.reward, envReward: sim.reward, parsed: true, feedback };
    },
    expert: (state) => {
      const action = env.solve(state.env);
      if (action === null) return null;
      const text = env.formatAction(action);
      if (mode === 'text') return text;
      return env.program?.(state.env) ?? `console.log(${JSON.stringify(text)})`;
    },
  };
}

/**
 * A coder (the math tool agent): its JavaScript runs as runToolProgram runs it and `score(stdout, ran)` gives its own
 * reward (math: 1 correct, 0 wrong, −1 when the program fails). The environment does not move. Its expert response is
 * the environment's expert program (math: one computing the answer from the question's numbers).
 */
export function coderRole<S>(
  s: RoleSettings,
  env: Environment<S, unknown>,
  sandbox: Partial<SandboxLimits>,
  score: (state: S, stdout: string, ran: boolean) => number,
): Role<S> {
  return {
    ...base<S>(s),
    prompt: (state) =>
      buildPrompt(s, env, state, 'Write JavaScript that prints (console.log) the answer as its last line.'),
    act: async (state, response) => {
      const run = await runToolProgram(env, response, sandbox);
      const ran = run.outcome === 'ok';
      const last = run.stdout.trim().split('\n').pop() ?? '';
      const own = s.ownScale * score(state.env, run.stdout, ran);
      const feedback = ran ? `the program printed ${last.slice(0, 80)}` : `the program failed (${run.outcome})`;
      const keep = { env: state.env, done: state.done, success: state.success };
      return { ...keep, own, envReward: own, parsed: true, feedback, sandbox: run.outcome };
    },
    expert: (state) => env.program?.(state.env) ?? null,
  };
}
