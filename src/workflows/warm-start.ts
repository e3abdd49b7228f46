/**
 * Warm-start data for small agents: expert episodes played by the environments' solvers (BFS for Plan-Path and
 * Sokoban, the unique solution for Sudoku, the gold answer for math), turned into SFT rows whose prompt is exactly
 * the role's observation in the workflow and whose response is the correct action.
 */
import type { Workflow } from './workflow.js';
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
}

/**
 * Plays expert episodes (every acting role answers with its expert response, which is also applied) on instances
 * seed, seed + 1, … and returns the first `count` rows of the chosen roles. Throws when a solver's episode does not
 * succeed within maxTurns (the data would teach a wrong answer).
 */
export async function warmStartRows(wf: Workflow<unknown>, o: WarmStartOptions): Promise<WarmStartRow[]> {
  if (!Number.isInteger(o.count) || o.count < 1) throw new Error(`warm start count must be ≥ 1, got ${o.count}`);
  const roles = o.roles ?? wf.roles.map((r) => r.name);
  for (const r of roles)
    if (!wf.roles.some((x) => x.name === r))
      throw new Error(`warm start: workflow "${wf.name}" has no acting role "${r}"`);
  const rows: WarmStartRow[] = [];
  for (let seed = o.seed; rows.length < o.count; seed++) {
    let st = startEpisode(wf, seed);
    const instance = wf.env.instanceId(st.env);
    for (let turn = 0; turn < wf.maxTurns && !st.done && rows.length < o.count; turn++) {
      st = { ...st, turn };
      for (const role of wf.roles) {
        if (st.done || role.skips(st)) continue;
        const response = role.expert(st);
        if (response === null) throw new Error(`warm start: no solver answer for ${instance}, role ${role.name}`);
        const prompt = role.prompt(st);
        const act = await role.act(st, response);
        if (roles.includes(role.name) && rows.length < o.count)
          rows.push({ prompt, response, role: role.name, instance, turn });
        st = advance(st, role.name, response, act);
      }
    }
    if (!st.success && rows.length < o.count)
      throw new Error(`warm start: the solver did not solve ${instance} in ${wf.maxTurns} turns`);
  }
  return rows;
}
