/**
 * The contract every multi-agent environment meets: seeded instances, immutable states (a step returns a new state,
 * so scoring a candidate "on a copy of the state" is just calling step), text observations and a parser per action.
 */

/** The result of applying one action (or none) to a state. */
export interface EnvStep<S> {
  /** The state after the action; the input state is never modified. */
  state: S;
  /** r_env of this action: the environment's reward, before any role weighting. */
  reward: number;
  /** True when the episode is over (success, or the environment's own step limit). */
  done: boolean;
  /** True only when the task is solved (a time-out is never a success). */
  success: boolean;
  /** The reward's named parts (summing to `reward`), for metrics and hand-worked tests. */
  parts: Record<string, number>;
  /** One line for the history shown to later turns, e.g. "moved to (2, 3); 1 invalid move". */
  feedback: string;
}

/** A generated, seeded environment with state `S` and parsed action `A`. */
export interface Environment<S, A> {
  /** Short name, e.g. 'plan-path'. */
  readonly name: string;
  /** The initial state of instance `seed` (the same seed gives the same instance). */
  reset(seed: number): S;
  /** Stable id of the state's instance (same for every state of one episode). */
  instanceId(state: S): string;
  /** The observation text of a state (what an agent sees of the task now). */
  render(state: S): string;
  /** One sentence telling an agent how to write an action. */
  readonly actionFormat: string;
  /** The action in `text`, or null when none can be parsed. */
  parseAction(text: string): A | null;
  /** Applies an action; null means "no action could be parsed" (r_env of doing nothing). */
  step(state: S, action: A | null): EnvStep<S>;
  /** A correct action from `state` by the environment's solver (warm starts), or null when there is none. */
  solve(state: S): A | null;
  /** The canonical text of an action (what a perfect agent would write). */
  formatAction(action: A): string;
  /**
   * A JavaScript program that computes a correct action from the data the observation shows (a tool agent's expert
   * in code mode: Plan-Path's path search, math's expression), or absent: a proposer's expert then prints the
   * solver's action, and a coder has none.
   */
  program?(state: S): string;
  /** Routines a tool program may call: their JavaScript, run before every tool program, and one line saying what they do. */
  readonly programLibrary?: { readonly code: string; readonly help: string };
  /**
   * What a program written in `program`'s template prints, worked out without running it, or null when `code` is not
   * in the template (or its run is not certain to end that way): such code goes to the sandbox.
   */
  programOutput?(code: string): string | null;
}

/**
 * r_env of "no action" in the grid environments (an empty move list, or nothing parsable): the reference's value, so
 * that doing nothing never beats a walk toward the goal.
 */
export const NO_ACTION_REWARD = -1;

/** The step of "no action" from an unfinished state: nothing moves, r_env = NO_ACTION_REWARD, the episode goes on. */
export function noActionStep<S>(state: S, feedback: string): EnvStep<S> {
  return {
    state,
    reward: NO_ACTION_REWARD,
    done: false,
    success: false,
    parts: { noAction: NO_ACTION_REWARD },
    feedback,
  };
}

/**
 * The step of any action (or none) on a finished episode: ignored, r_env 0, still done, success as it was — so a
 * solved task is never paid twice and a timed-out one never charged again.
 */
export function finishedStep<S>(state: S, success: boolean): EnvStep<S> {
  return { state, reward: 0, done: true, success, parts: {}, feedback: 'the episode is over; the action is ignored' };
}
