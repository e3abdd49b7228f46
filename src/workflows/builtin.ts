/**
 * The built-in workflows of the AT-GRPO spec: a tool agent then a planner on Plan-Path, Sokoban and Sudoku, and a
 * coder then a reasoner on math. Each is a factory from the `workflow` config section.
 */
import type { Environment } from '../envs/environment.js';
import { type MathState, mathEnv, toolOutputReward } from '../envs/math.js';
import { planPathEnv } from '../envs/plan-path.js';
import { sokobanEnv } from '../envs/sokoban.js';
import { sudokuEnv } from '../envs/sudoku.js';
import { type RoleSettings, actorRole, coderRole, proposerRole } from './roles.js';
import type { RoleConfig, WorkflowConfig } from './workflow-config.js';
import type { Role, Workflow } from './workflow.js';

/** A role's defaults before the config's overrides. */
type RoleDefaults = Omit<RoleSettings, 'name' | 'policy' | 'sampling' | 'skipTurns' | 'history' | 'team'> & {
  maxNewTokens: number;
  stopStrings: string[];
  team: string | null;
};

/** The role's settings: the config's `roles.<name>` over the defaults; the team term only when its role acts. */
export function roleSettings(name: string, d: RoleDefaults, config: WorkflowConfig, acting: string[]): RoleSettings {
  const c: RoleConfig = config.roles[name] ?? {};
  const teamWeight = c.teamWeight ?? 1;
  return {
    name,
    policy: c.policy ?? 'shared',
    sampling: {
      temperature: c.temperature ?? 1.0,
      topP: c.topP ?? 0.95,
      maxNewTokens: c.maxNewTokens ?? d.maxNewTokens,
      stopStrings: c.stopStrings ?? d.stopStrings,
    },
    skipTurns: c.skipTurns ?? [],
    ownScale: c.ownScale ?? d.ownScale,
    parseFailure: c.parseFailure ?? d.parseFailure,
    team: d.team !== null && acting.includes(d.team) && teamWeight > 0 ? { role: d.team, weight: teamWeight } : null,
    history: config.history,
    instruction: d.instruction,
  };
}

/** The acting roles in order: config.agents (checked against the workflow's roles) or all of them. */
export function actingRoles(workflow: string, all: readonly string[], config: WorkflowConfig): string[] {
  const agents =
    config.sampling === 'single' ? [config.agents?.[0] ?? all[all.length - 1]!] : (config.agents ?? [...all]);
  for (const a of agents)
    if (!all.includes(a))
      throw new Error(`workflow "${workflow}" has roles ${all.join(', ')}: no role "${a}" (workflow.agents)`);
  for (const name of Object.keys(config.roles))
    if (!all.includes(name))
      throw new Error(`workflow "${workflow}" has roles ${all.join(', ')}: no role "${name}" (workflow.roles)`);
  return agents;
}

/** A tool agent proposing a move list or grid, then a planner acting: Plan-Path, Sokoban, Sudoku. */
function toolPlannerWorkflow<S, A>(
  name: string,
  env: Environment<S, A>,
  config: WorkflowConfig,
  lineAnswer: boolean,
): Workflow<S> {
  const acting = actingRoles(name, ['tool', 'planner'], config);
  const maxNewTokens = lineAnswer ? 48 : 32;
  const stopStrings = lineAnswer ? ['\n'] : ['\n\n'];
  const code = config.toolMode === 'code';
  const defaults: Record<string, RoleDefaults> = {
    tool: {
      instruction: 'You are the tool agent: work out an action that solves the task and propose it to the planner.',
      // Expert programs call a sandbox routine on the copied grid (50 characters on Plan-Path 5×5, 63 on a 6×6 Sokoban
      // room); the rest leaves room for programs written out in full.
      maxNewTokens: code ? 512 : maxNewTokens,
      stopStrings: code ? [] : stopStrings,
      ownScale: 1,
      parseFailure: -2,
      team: 'planner',
    },
    planner: {
      instruction: 'You are the planner: choose the action to take now.',
      maxNewTokens,
      stopStrings,
      ownScale: 2,
      parseFailure: -2,
      team: null,
    },
  };
  const roles: Role<S>[] = acting.map((r) => {
    const s = roleSettings(r, defaults[r]!, config, acting);
    return r === 'tool' ? proposerRole(s, env, config.toolMode, config.sandbox) : actorRole(s, env);
  });
  return { name, env: env as Environment<S, unknown>, roles, maxTurns: config.maxTurns };
}

/** Plan-Path: tool agent, then planner. */
export function planPathWorkflow(config: WorkflowConfig): Workflow<unknown> {
  return toolPlannerWorkflow('plan-path', planPathEnv(config.env), config, true) as Workflow<unknown>;
}

/** Sokoban: tool agent, then planner. */
export function sokobanWorkflow(config: WorkflowConfig): Workflow<unknown> {
  return toolPlannerWorkflow('sokoban', sokobanEnv(config.env), config, true) as Workflow<unknown>;
}

/** Sudoku 4×4: tool agent, then planner (answers are 4 lines, so they stop at a blank line). */
export function sudokuWorkflow(config: WorkflowConfig): Workflow<unknown> {
  return toolPlannerWorkflow('sudoku', sudokuEnv(config.env), config, false) as Workflow<unknown>;
}

/** Math with a tool: a coder whose program runs in the sandbox, then a reasoner answering in \boxed{}. */
export function mathToolWorkflow(config: WorkflowConfig): Workflow<unknown> {
  const env = mathEnv(config.env);
  const acting = actingRoles('math-tool', ['tool', 'reasoner'], config);
  const defaults: Record<string, RoleDefaults> = {
    tool: {
      instruction: 'You are the tool agent: write a program that computes the answer.',
      maxNewTokens: 128,
      stopStrings: [],
      ownScale: 1,
      parseFailure: -1,
      team: 'reasoner',
    },
    reasoner: {
      instruction: 'You are the reasoner: give the final answer.',
      maxNewTokens: 64,
      stopStrings: ['\n'],
      ownScale: 2,
      parseFailure: 0,
      team: null,
    },
  };
  const roles = acting.map((r) => {
    const s = roleSettings(r, defaults[r]!, config, acting);
    return r === 'tool'
      ? coderRole(s, env as Environment<unknown, unknown>, config.sandbox, (st, out, ran) =>
          toolOutputReward((st as MathState).answer, out, ran),
        )
      : actorRole(s, env);
  });
  return {
    name: 'math-tool',
    env: env as Environment<unknown, unknown>,
    roles: roles as Role<unknown>[],
    maxTurns: config.maxTurns,
  };
}
