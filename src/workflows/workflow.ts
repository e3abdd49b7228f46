/**
 * What a multi-agent workflow is: roles acting in turn order on one environment state, each with its prompt builder,
 * its sampling settings, its action parser and its reward. Tree sampling and the baselines (tree-sampling.ts) run any
 * Workflow; a new one is added by registering a factory (registry.ts), without touching the trainer.
 */
import type { Environment } from '../envs/environment.js';
import type { SandboxOutcome } from '../sandbox/sandbox-types.js';
import type { SamplingSettings } from './policy.js';

/** One acted turn of one role, as later prompts may show it. */
export interface HistoryEntry {
  turn: number;
  role: string;
  /** The role's response text. */
  response: string;
  /** What came of it (the environment's feedback, the tool's output). */
  feedback: string;
}

/** The state of an episode as the workflow sees it. */
export interface EpisodeState<S> {
  /** The environment state. */
  env: S;
  /** Every acted turn so far, oldest first. */
  history: HistoryEntry[];
  /** The current turn, from 0. */
  turn: number;
  /** True once the environment says the episode is over. */
  done: boolean;
  /** True once the task is solved. */
  success: boolean;
}

/** What one response of a role amounts to, computed on a copy of the state. */
export interface RoleAct<S> {
  /** The environment state after the action (unchanged for a role that only proposes). */
  env: S;
  /** The role's own reward part for this response. */
  own: number;
  /** r_env of the role's action (the quantity teammates' team terms use). */
  envReward: number;
  /** False when no action could be parsed (the own part is then the failure reward). */
  parsed: boolean;
  /** The environment's verdict after the action. */
  done: boolean;
  success: boolean;
  /** One line for the history. */
  feedback: string;
  /** How the role's program ended, for roles whose response is run in the sandbox; else null. */
  sandbox: SandboxOutcome | null;
}

/** A team term: `weight` × r_env of the chosen action of a role acting later in the same turn. */
export interface TeamTerm {
  role: string;
  weight: number;
}

/** One role of a workflow. */
export interface Role<S> {
  /** Role name, e.g. 'tool', 'planner'. */
  name: string;
  /** Name of the policy that plays this role (routing of its samples). */
  policy: string;
  /** Sampling settings of this role. */
  sampling: SamplingSettings;
  /** The role's prompt: its observation of the state with the history the workflow shows. */
  prompt(state: EpisodeState<S>): string;
  /** Parses and scores one response on a copy of the state (never modifies `state`). */
  act(state: EpisodeState<S>, response: string): Promise<RoleAct<S>>;
  /** True when the role skips this turn (it then produces no sample). */
  skips(state: EpisodeState<S>): boolean;
  /** The team term added to this role's reward, or null. */
  team: TeamTerm | null;
  /** A correct response from `state` by the environment's solver (warm-start data), or null when there is none. */
  expert(state: EpisodeState<S>): string | null;
  /**
   * A well-formed wrong response from `state` for warm-start detours (warm-start.ts), `seed` choosing among several;
   * absent: another instance's solver answer.
   */
  detour?(state: EpisodeState<S>, seed: number): string | null;
}

/** A workflow: an environment, roles in turn order and the turn limit. */
export interface Workflow<S> {
  /** Registry name, e.g. 'plan-path'. */
  name: string;
  env: Environment<S, unknown>;
  /** Roles in the order they act within a turn. */
  roles: Role<S>[];
  /** Turns before the episode is cut off (a cut-off is not a success). */
  maxTurns: number;
}

/** The episode state at the start of instance `seed`. */
export function startEpisode<S>(wf: Workflow<S>, seed: number): EpisodeState<S> {
  return { env: wf.env.reset(seed), history: [], turn: 0, done: false, success: false };
}

/** The state after `role`'s chosen response (its act already computed): history grows, the env state moves on. */
export function advance<S>(state: EpisodeState<S>, role: string, response: string, act: RoleAct<S>): EpisodeState<S> {
  return {
    env: act.env,
    history: [...state.history, { turn: state.turn, role, response, feedback: act.feedback }],
    turn: state.turn,
    done: act.done,
    success: act.success,
  };
}
