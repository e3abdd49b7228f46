/**
 * Warm-start data for small agents: expert episodes played by the environments' solvers (BFS for Plan-Path and
 * Sokoban, the unique solution for Sudoku, the gold answer for math and a program computing it for math's tool agent),
 * turned into SFT rows whose prompt is exactly the role's observation in the workflow and whose response is the correct
 * action.
 *
 * Pure expert episodes only ever show states on the solver's path: the planner always sees a correct proposal and no
 * episode reaches a second turn, so an agent trained on them meets its first wrong proposal or missed turn in RL
 * and answers garbage there. Detours fix that: with probability `detour` the response a role APPLIES is a wrong one
 * (the role's own `detour`, e.g. the coding tester's cases of a mutant, else another instance's solver answer:
 * well-formed, usually wrong) while its row still teaches this state's solver answer.
 */
import { Rng } from '../util/rng.js';
import type { EpisodeState, Role, Workflow } from './workflow.js';
import { advance, startEpisode } from './workflow.js';

/** One SFT example. */
export interface WarmStartRow {
  prompt: string;
  response: string;
  role: string;
  instance: string;
  turn: number;
}

/** How many rows, from which instances. */
export interface WarmStartOptions {
  /** Rows to produce (≥ 1). */
  count: number;
  /** Seed of the first instance; instances seed, seed + 1, … are played in order. */
  seed: number;
  /** Roles to produce rows for; default every acting role of the workflow. */
  roles?: readonly string[];
  /** Probability (0–1) that an applied response before the last turn is a detour (see above); default 0. */
  detour?: number;
  /**
   * Detour the last turn's responses too, all but its final role's (which stays the solver's, so the episode still
   * ends solved): a one-turn workflow's later roles then see wrong earlier answers; default false.
   */
  detourLastTurn?: boolean;
  /**
   * Roles whose applied response may be a detour; default every role. Rows of a role after a detoured one teach it to
   * answer as the solver whatever it was told, so a planner that should copy a right proposal is also taught to
   * overrule a wrong one: naming only the planner keeps its copy clean.
   */
  detourRoles?: readonly string[];
}

/** Offset of the instance whose solver answer is a detour: far enough that it is an unrelated instance. */
const DETOUR_SOURCE_OFFSET = 7_919_000;

/**
 * A well-formed wrong response for `role` in `state`: the role's own detour where it has one, else its solver's answer
 * at the start of an unrelated instance, if any.
 */
function detourResponse(
  wf: Workflow<unknown>,
  role: Role<unknown>,
  state: EpisodeState<unknown>,
  seed: number,
): string | null {
  return role.detour ? role.detour(state, seed) : role.expert(startEpisode(wf, seed + DETOUR_SOURCE_OFFSET));
}

/**
 * Plays expert episodes (every acting role answers with its expert response, which is also applied, except for
 * detours) on instances seed, seed + 1, … and returns the first `count` rows of the chosen roles. The last turn is
 * always the solver's (with detourLastTurn, its final role's), so a detoured episode still ends solved. Throws when a solver's episode without detours does not
 * succeed within maxTurns (the data would teach a wrong answer); an instance a detour made unsolvable (a Sokoban box
 * pushed into a corner) is skipped.
 */
export async function warmStartRows(wf: Workflow<unknown>, o: WarmStartOptions): Promise<WarmStartRow[]> {
  if (!Number.isInteger(o.count) || o.count < 1) throw new Error(`warm start count must be ≥ 1, got ${o.count}`);
  const roles = o.roles ?? wf.roles.map((r) => r.name);
  const detourRoles = o.detourRoles ?? wf.roles.map((r) => r.name);
  for (const r of [...roles, ...detourRoles])
    if (!wf.roles.some((x) => x.name === r))
      throw new Error(`warm start: workflow "${wf.name}" has no acting role "${r}"`);
  const detour = o.detour ?? 0;
  if (!(detour >= 0 && detour <= 1)) throw new Error(`warm start detour must be in [0, 1], got ${detour}`);
  const finalRole = wf.roles[wf.roles.length - 1];
  const detourable = (turn: number, role: Role<unknown>): boolean =>
    detourRoles.includes(role.name) && (turn < wf.maxTurns - 1 || (o.detourLastTurn === true && role !== finalRole));
  const rows: WarmStartRow[] = [];
  instances: for (let seed = o.seed; rows.length < o.count; seed++) {
    const rng = new Rng(seed);
    let st = startEpisode(wf, seed);
    const instance = wf.env.instanceId(st.env);
    const episode: WarmStartRow[] = [];
    let detoured = false;
    for (let turn = 0; turn < wf.maxTurns && !st.done; turn++) {
      st = { ...st, turn };
      for (const role of wf.roles) {
        if (st.done || role.skips(st)) continue;
        const response = role.expert(st);
        if (response === null) {
          if (detoured) continue instances;
          throw new Error(`warm start: no solver answer for ${instance}, role ${role.name}`);
        }
        const wrong = detourable(turn, role) && detour > 0 && rng.next() < detour;
        const applied = (wrong ? detourResponse(wf, role, st, seed) : null) ?? response;
        detoured ||= applied !== response;
        if (roles.includes(role.name))
          episode.push({ prompt: role.prompt(st), response, role: role.name, instance, turn });
        st = advance(st, role.name, applied, await role.act(st, applied));
      }
    }
    if (!st.success && !detoured)
      throw new Error(`warm start: the solver did not solve ${instance} in ${wf.maxTurns} turns`);
    if (st.success) rows.push(...episode.slice(0, o.count - rows.length));
  }
  return rows;
}
