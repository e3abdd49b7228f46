/**
 * The plain-data records a multi-agent rollout produces: one per response (the training sample) and one per episode.
 * Everything is JSON-serialisable so the trainer's table of samples, the logs and the report can take it as is.
 */
import type { SandboxOutcome } from '../sandbox/sandbox-types.js';

/** One response of one role in one turn: a training sample. */
export interface MasSample {
  /** Instance id (e.g. 'plan-path:17') and the seed it was generated from. */
  instance: string;
  seed: number;
  /** Episode index within the instance: 0 under tree sampling; 0…K−1 for no-tree and single-agent episodes. */
  episode: number;
  role: string;
  /** Turn, from 0. */
  turn: number;
  /** Policy that generated it (and that trains on it). */
  policy: string;
  /** Candidate index within its tree group (0…K−1); 0 for no-tree samples. */
  candidate: number;
  /** True for the response the episode continued from. */
  chosen: boolean;
  prompt: string;
  response: string;
  finishReason: string | null;
  /** The token ids the policy sampled (what a trainer scores and updates on); absent for text-only policies. */
  responseIds?: number[];
  /** The scalar reward that trains: own + team. */
  reward: number;
  /** Own part (the role's reward on its own response). */
  own: number;
  /**
   * Team part: weight × r_env of a later role's chosen action in the same turn. Equal for all K members of a tree
   * group, so it cancels in the group-normalised advantage: logged, it trains nothing there.
   */
  team: number;
  /** r_env of this response's action. */
  envReward: number;
  /** False when no action could be parsed. */
  parsed: boolean;
  /** The environment's verdict after this response (for a proposer: unchanged). */
  done: boolean;
  success: boolean;
  /** How the role's program ended in the sandbox, or null when nothing ran. */
  sandbox: SandboxOutcome | null;
  /** Group key (instance, role, turn under workflow.grouping): set by the sampler (see docs/at-grpo.md). */
  group: string;
}

/** One episode's outcome. */
export interface MasEpisode {
  instance: string;
  seed: number;
  episode: number;
  /** Turns played (the last may be partial when the environment ended it). */
  turns: number;
  /** True only when the environment says solved (a cut-off at maxTurns is not). */
  success: boolean;
  /** Sum of the chosen responses' rewards, per role. */
  returns: Record<string, number>;
}

/** What a rollout batch returns. */
export interface MasBatch {
  samples: MasSample[];
  episodes: MasEpisode[];
}

/**
 * How samples of one instance are grouped for advantages (workflow.grouping): 'agent-turn' — one group per role and
 * turn (AT-GRPO); 'agent' — one per role, all turns pooled; 'turn' — one per turn, all roles pooled (ablations).
 */
export const GROUPINGS = ['agent-turn', 'agent', 'turn'] as const;
/** A grouping mode. */
export type Grouping = (typeof GROUPINGS)[number];

/**
 * The group key of (instance, role, turn) under `grouping` (default 'agent-turn'); `turn` may be a label such as '>=2'
 * for no-tree tails. A pooled part is written '*', so keys of different modes never collide.
 */
export function groupKey(
  instance: string,
  role: string,
  turn: number | string,
  grouping: Grouping = 'agent-turn',
): string {
  return `${instance}|${grouping === 'turn' ? '*' : role}|t${grouping === 'agent' ? '*' : turn}`;
}
