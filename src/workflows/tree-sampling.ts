/**
 * Rollouts of a workflow (AT-GRPO spec, "Rollout"): tree sampling — K candidates per role and turn from one state,
 * each scored with the role's own reward on a copy of the state, the episode continuing from the best (ties: the
 * first) — and the baselines: K independent episodes per instance (no-tree), of which the single-agent baseline is
 * the planner alone.
 */
import type { Policy } from './policy.js';
import { type MasBatch, type MasEpisode, type MasSample, groupKey } from './samples.js';
import { type EpisodeState, type Role, type RoleAct, type Workflow, advance, startEpisode } from './workflow.js';

/** What a rollout needs besides the workflow. */
export interface RolloutOptions {
  /** Instance seeds (one instance per seed). */
  seeds: readonly number[];
  /** Candidates per role and turn (tree) or episodes per instance (independent); ≥ 1. */
  k: number;
  /** Policies by name; every acting role's `policy` must be here. */
  policies: Readonly<Record<string, Policy>>;
}

/** The policy of a role, or an error naming what is missing. */
function policyOf(role: Role<unknown>, policies: Readonly<Record<string, Policy>>): Policy {
  const p = policies[role.policy];
  if (!p)
    throw new Error(
      `role "${role.name}" is played by policy "${role.policy}", which is not given (have: ${Object.keys(policies).join(', ') || 'none'})`,
    );
  return p;
}

/** Generates one response per prompt with the role's sampling settings, checking the policy's answer. */
async function respond(role: Role<unknown>, policies: RolloutOptions['policies'], prompts: string[]) {
  const gens = await policyOf(role, policies).generate(prompts, role.sampling);
  if (gens.length !== prompts.length)
    throw new Error(`policy "${role.policy}" returned ${gens.length} responses for ${prompts.length} prompts`);
  return gens;
}

/** Index of the largest value; the first on ties. */
export function argmaxFirst(values: readonly number[]): number {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i]! > values[best]!) best = i;
  return best;
}

/** The sample record of one response. */
function sample(
  base: Pick<MasSample, 'instance' | 'seed' | 'episode' | 'turn' | 'candidate' | 'chosen' | 'group'>,
  role: Role<unknown>,
  prompt: string,
  gen: { text: string; finishReason?: string; ids?: number[] },
  act: RoleAct<unknown>,
): MasSample {
  return {
    ...base,
    role: role.name,
    policy: role.policy,
    prompt,
    response: gen.text,
    finishReason: gen.finishReason ?? null,
    ...(gen.ids ? { responseIds: gen.ids } : {}),
    reward: act.own,
    own: act.own,
    team: 0,
    envReward: act.envReward,
    parsed: act.parsed,
    done: act.done,
    success: act.success,
    sandbox: act.sandbox,
  };
}

/**
 * Adds the team terms of one turn of one episode: each sample whose role has a team term gets weight × r_env of the
 * named role's chosen action in this turn (0 when that role did not act).
 */
function addTeamTerms(wf: Workflow<unknown>, turnSamples: MasSample[], chosenEnv: Map<string, number>): void {
  for (const s of turnSamples) {
    const team = wf.roles.find((r) => r.name === s.role)!.team;
    if (!team) continue;
    s.team = team.weight * (chosenEnv.get(team.role) ?? 0);
    s.reward = s.own + s.team;
  }
}

/** Sum of the chosen samples' rewards per role. */
function returnsOf(samples: readonly MasSample[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) if (s.chosen) out[s.role] = (out[s.role] ?? 0) + s.reward;
  return out;
}

/**
 * Tree sampling: per instance, per turn, per role in order — K candidates from the same state, each scored with the
 * role's own reward on a copy, one group (instance, role, turn), continue from the best (ties: the first). Later
 * roles act only in the chosen branch; team terms are therefore equal across a group (logged, never trained on).
 */
export async function treeRollout(wf: Workflow<unknown>, o: RolloutOptions): Promise<MasBatch> {
  checkK(o.k);
  const samples: MasSample[] = [];
  const episodes: MasEpisode[] = [];
  for (const seed of o.seeds) {
    let st: EpisodeState<unknown> = startEpisode(wf, seed);
    const instance = wf.env.instanceId(st.env);
    const mine: MasSample[] = [];
    let turn = 0;
    for (; turn < wf.maxTurns && !st.done; turn++) {
      st = { ...st, turn };
      const turnSamples: MasSample[] = [];
      const chosenEnv = new Map<string, number>();
      for (const role of wf.roles) {
        if (st.done) break;
        if (role.skips(st)) continue;
        const prompt = role.prompt(st);
        const gens = await respond(role, o.policies, Array<string>(o.k).fill(prompt));
        const acts = await Promise.all(gens.map((g) => role.act(st, g.text)));
        const best = argmaxFirst(acts.map((a) => a.own));
        const group = groupKey(instance, role.name, turn);
        gens.forEach((g, j) => {
          const base = { instance, seed, episode: 0, turn, candidate: j, chosen: j === best, group };
          turnSamples.push(sample(base, role, prompt, g, acts[j]!));
        });
        chosenEnv.set(role.name, acts[best]!.envReward);
        st = advance(st, role.name, gens[best]!.text, acts[best]!);
      }
      addTeamTerms(wf, turnSamples, chosenEnv);
      mine.push(...turnSamples);
    }
    samples.push(...mine);
    episodes.push({ instance, seed, episode: 0, turns: turn, success: st.success, returns: returnsOf(mine) });
  }
  return { samples, episodes };
}

/**
 * K independent episodes per instance (the no-tree baseline; with only the planner acting, the single-agent
 * baseline). Each role samples one response per turn in each episode; the K episodes of an instance are generated
 * in one batch per (turn, role). Group keys: see independentGroupKeys.
 */
export async function independentRollout(wf: Workflow<unknown>, o: RolloutOptions): Promise<MasBatch> {
  checkK(o.k);
  const samples: MasSample[] = [];
  const episodes: MasEpisode[] = [];
  for (const seed of o.seeds) {
    const states = Array.from({ length: o.k }, () => startEpisode(wf, seed));
    const instance = wf.env.instanceId(states[0]!.env);
    const mine: MasSample[] = [];
    const turns = new Array<number>(o.k).fill(0);
    for (let turn = 0; turn < wf.maxTurns; turn++) {
      const live = states.flatMap((s, e) => (s.done ? [] : [e]));
      if (live.length === 0) break;
      const turnSamples = new Map<number, MasSample[]>(live.map((e) => [e, []]));
      const chosenEnv = new Map<number, Map<string, number>>(live.map((e) => [e, new Map()]));
      for (const e of live) {
        states[e] = { ...states[e]!, turn };
        turns[e] = turn + 1;
      }
      for (const role of wf.roles) {
        const acting = live.filter((e) => !states[e]!.done && !role.skips(states[e]!));
        if (acting.length === 0) continue;
        const prompts = acting.map((e) => role.prompt(states[e]!));
        const gens = await respond(role, o.policies, prompts);
        const acts = await Promise.all(acting.map((e, j) => role.act(states[e]!, gens[j]!.text)));
        acting.forEach((e, j) => {
          const base = { instance, seed, episode: e, turn, candidate: 0, chosen: true, group: '' };
          turnSamples.get(e)!.push(sample(base, role, prompts[j]!, gens[j]!, acts[j]!));
          chosenEnv.get(e)!.set(role.name, acts[j]!.envReward);
          states[e] = advance(states[e]!, role.name, gens[j]!.text, acts[j]!);
        });
      }
      for (const e of live) {
        addTeamTerms(wf, turnSamples.get(e)!, chosenEnv.get(e)!);
        mine.push(...turnSamples.get(e)!);
      }
    }
    independentGroupKeys(mine, o.k);
    samples.push(...mine);
    states.forEach((s, e) => {
      const own = mine.filter((x) => x.episode === e);
      episodes.push({ instance, seed, episode: e, turns: turns[e]!, success: s.success, returns: returnsOf(own) });
    });
  }
  return { samples, episodes };
}

/**
 * No-tree group keys for one instance's samples (K episodes), per role: a turn that every episode reached (and in
 * which the role acted in each) before the last such turn is its own group (instance, role, turn); the last common
 * turn and every later turn of the longer episodes form one group (instance, role, '>=T'), T the last common turn —
 * "(instance, agent) over last turns". With K episodes, every group then holds at least K samples.
 */
export function independentGroupKeys(samples: MasSample[], k: number): void {
  const roles = [...new Set(samples.map((s) => s.role))];
  for (const role of roles) {
    const mine = samples.filter((s) => s.role === role);
    const turnsOf = (e: number): Set<number> => new Set(mine.filter((s) => s.episode === e).map((s) => s.turn));
    let common = turnsOf(0);
    for (let e = 1; e < k; e++) common = new Set([...common].filter((t) => turnsOf(e).has(t)));
    const last = common.size ? Math.max(...common) : -1;
    for (const s of mine) {
      const inCommon = common.has(s.turn) && s.turn < last;
      s.group = groupKey(s.instance, role, inCommon ? s.turn : last >= 0 ? `>=${last}` : 'all');
    }
  }
}

/** K must be a positive integer. */
function checkK(k: number): void {
  if (!Number.isInteger(k) || k < 1) throw new Error(`k (candidates or episodes per instance) must be ≥ 1, got ${k}`);
}

/** The rollout the config's `sampling` asks for: 'tree' → treeRollout; 'no-tree' and 'single' → independentRollout. */
export function rollout(wf: Workflow<unknown>, sampling: 'tree' | 'no-tree' | 'single', o: RolloutOptions) {
  return sampling === 'tree' ? treeRollout(wf, o) : independentRollout(wf, o);
}
