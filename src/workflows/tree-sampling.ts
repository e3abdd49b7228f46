/**
 * Rollouts of a workflow (AT-GRPO spec, "Rollout"): tree sampling — K candidates per role and turn from one state,
 * each scored with the role's own reward on a copy of the state, the episode continuing from the best (ties: the
 * first) — and the baselines: K independent episodes per instance (no-tree), of which the single-agent baseline is
 * the planner alone.
 */
import type { Policy } from './policy.js';
import { type Grouping, type MasBatch, type MasSample, groupKey } from './samples.js';
import { type EpisodeState, type Role, type RoleAct, type Workflow, advance, startEpisode } from './workflow.js';

/** What playing a workflow needs besides the workflow. */
export interface PlayOptions {
  /** Instance seeds (one instance per seed). */
  seeds: readonly number[];
  /** The group size K: candidates per role and turn (tree) or episodes per instance (independent); ≥ 1. */
  groupSize: number;
  /** Policies by name; every acting role's `policy` must be here. */
  policies: Readonly<Record<string, Policy>>;
  /**
   * Tree only: the later roles also act (one sampled response each) in every non-chosen branch, so a candidate's
   * team term is its own branch's and no longer cancels in the group; default false (the spec's default).
   */
  teamBranches?: boolean;
  /** Which samples of an instance form a group (workflow.grouping); default 'agent-turn'. */
  grouping?: Grouping;
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
async function respond(role: Role<unknown>, policies: PlayOptions['policies'], prompts: string[]) {
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
function addTeamTerms(
  wf: Workflow<unknown>,
  turnSamples: MasSample[],
  chosenEnv: Map<string, number>,
  branchEnv: ReadonlyMap<MasSample, number> = new Map(),
): void {
  for (const s of turnSamples) {
    const team = wf.roles.find((r) => r.name === s.role)!.team;
    if (!team) continue;
    s.team = team.weight * (branchEnv.get(s) ?? chosenEnv.get(team.role) ?? 0);
    s.reward = s.own + s.team;
  }
}

/**
 * r_env of `target`'s action in each branch: the roles after `from` up to `target` act once (one sampled response
 * each, batched over the branches) from each branch's state. These responses only score team terms; they are not
 * training samples. A branch where `target` does not act scores 0.
 */
async function branchTeamRewards(
  wf: Workflow<unknown>,
  from: Role<unknown>,
  target: string,
  branches: EpisodeState<unknown>[],
  policies: PlayOptions['policies'],
): Promise<number[]> {
  const out = new Array<number>(branches.length).fill(0);
  const states = [...branches];
  const later = wf.roles.slice(wf.roles.indexOf(from) + 1);
  for (const role of later.slice(0, later.findIndex((r) => r.name === target) + 1)) {
    const acting = states.flatMap((st, b) => (st.done || role.skips(st) ? [] : [b]));
    if (acting.length === 0) continue;
    const gens = await respond(
      role,
      policies,
      acting.map((b) => role.prompt(states[b]!)),
    );
    const acts = await Promise.all(acting.map((b, j) => role.act(states[b]!, gens[j]!.text)));
    acting.forEach((b, j) => {
      if (role.name === target) out[b] = acts[j]!.envReward;
      states[b] = advance(states[b]!, role.name, gens[j]!.text, acts[j]!);
    });
  }
  return out;
}

/** Sum of the chosen samples' rewards per role. */
function returnsOf(samples: readonly MasSample[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) if (s.chosen) out[s.role] = (out[s.role] ?? 0) + s.reward;
  return out;
}

/** One episode being played, with its samples so far. */
interface Running {
  seed: number;
  episode: number;
  instance: string;
  st: EpisodeState<unknown>;
  turns: number;
  samples: MasSample[];
}

/**
 * Plays all `episodes` in lockstep — turn by turn, role by role — so each (turn, role) step is one batched generate
 * call over every live episode: `candidates` responses per episode from its current state, scored on copies, the
 * episode continuing from the best (ties: the first). Team terms are added per episode and turn.
 */
async function lockstep(
  wf: Workflow<unknown>,
  episodes: Running[],
  candidates: number,
  o: PlayOptions,
  groupOf: (instance: string, role: string, turn: number) => string,
): Promise<void> {
  for (let turn = 0; turn < wf.maxTurns; turn++) {
    const live = episodes.filter((e) => !e.st.done);
    if (live.length === 0) break;
    const chosenEnv = new Map<Running, Map<string, number>>(live.map((e) => [e, new Map()]));
    const turnSamples = new Map<Running, MasSample[]>(live.map((e) => [e, []]));
    const branchEnv = new Map<MasSample, number>();
    for (const e of live) {
      e.st = { ...e.st, turn };
      e.turns = turn + 1;
    }
    for (const role of wf.roles) {
      const acting = live.filter((e) => !e.st.done && !role.skips(e.st));
      if (acting.length === 0) continue;
      const prompts = acting.map((e) => role.prompt(e.st));
      const gens = await respond(
        role,
        o.policies,
        prompts.flatMap((p) => Array<string>(candidates).fill(p)),
      );
      const acts = await Promise.all(gens.map((g, i) => role.act(acting[Math.floor(i / candidates)]!.st, g.text)));
      const branches: { sample: MasSample; state: EpisodeState<unknown> }[] = [];
      acting.forEach((e, a) => {
        const mine = acts.slice(a * candidates, (a + 1) * candidates);
        const best = argmaxFirst(mine.map((x) => x.own));
        const group = groupOf(e.instance, role.name, turn);
        mine.forEach((act, j) => {
          const gen = gens[a * candidates + j]!;
          const base = {
            instance: e.instance,
            seed: e.seed,
            episode: e.episode,
            turn,
            candidate: j,
            chosen: j === best,
            group,
          };
          const s = sample(base, role, prompts[a]!, gen, act);
          turnSamples.get(e)!.push(s);
          if (j !== best && o.teamBranches && role.team)
            branches.push({ sample: s, state: advance(e.st, role.name, gen.text, act) });
        });
        chosenEnv.get(e)!.set(role.name, mine[best]!.envReward);
        e.st = advance(e.st, role.name, gens[a * candidates + best]!.text, mine[best]!);
      });
      if (branches.length > 0) {
        const states = branches.map((b) => b.state);
        const rewards = await branchTeamRewards(wf, role, role.team!.role, states, o.policies);
        branches.forEach((b, i) => branchEnv.set(b.sample, rewards[i]!));
      }
    }
    for (const e of live) {
      addTeamTerms(wf, turnSamples.get(e)!, chosenEnv.get(e)!, branchEnv);
      e.samples.push(...turnSamples.get(e)!);
    }
  }
}

/**
 * The batch of played episodes: samples ordered by instance (as given), then turn, role order, episode and
 * candidate; one MasEpisode per episode.
 */
function collect(wf: Workflow<unknown>, episodes: readonly Running[]): MasBatch {
  const instanceRank = new Map<string, number>();
  for (const e of episodes) if (!instanceRank.has(e.instance)) instanceRank.set(e.instance, instanceRank.size);
  const roleRank = new Map(wf.roles.map((r, i) => [r.name, i]));
  const key = (s: MasSample): number[] => [
    instanceRank.get(s.instance)!,
    s.turn,
    roleRank.get(s.role)!,
    s.episode,
    s.candidate,
  ];
  const order = (a: MasSample, b: MasSample): number => {
    const ka = key(a);
    const kb = key(b);
    const i = ka.findIndex((v, j) => v !== kb[j]);
    return i < 0 ? 0 : ka[i]! - kb[i]!;
  };
  return {
    samples: episodes.flatMap((e) => e.samples).sort(order),
    episodes: episodes.map((e) => ({
      instance: e.instance,
      seed: e.seed,
      episode: e.episode,
      turns: e.turns,
      success: e.st.success,
      returns: returnsOf(e.samples),
    })),
  };
}

/** A fresh episode of instance `seed`. */
function begin(wf: Workflow<unknown>, seed: number, episode: number): Running {
  const st = startEpisode(wf, seed);
  return { seed, episode, instance: wf.env.instanceId(st.env), st, turns: 0, samples: [] };
}

/**
 * Tree sampling: per instance, per turn, per role in order — K candidates from the same state, each scored with the
 * role's own reward on a copy, one group (instance, role, turn), continue from the best (ties: the first). Later
 * roles act only in the chosen branch, so team terms are equal across a group (logged, never trained on) — unless
 * `teamBranches` lets them act in every branch. All instances advance together (one generate call per turn and role).
 */
export async function treeRollout(wf: Workflow<unknown>, o: PlayOptions): Promise<MasBatch> {
  checkGroupSize(o.groupSize);
  const episodes = o.seeds.map((seed) => begin(wf, seed, 0));
  await lockstep(wf, episodes, o.groupSize, o, (instance, role, turn) => groupKey(instance, role, turn, o.grouping));
  return collect(wf, episodes);
}

/**
 * K independent episodes per instance (the no-tree baseline; with only the planner acting, the single-agent
 * baseline). Each role samples one response per turn in each episode; all episodes advance together. Group keys:
 * see independentGroupKeys.
 */
export async function independentRollout(wf: Workflow<unknown>, o: PlayOptions): Promise<MasBatch> {
  checkGroupSize(o.groupSize);
  const episodes = o.seeds.flatMap((seed) => Array.from({ length: o.groupSize }, (_, e) => begin(wf, seed, e)));
  await lockstep(wf, episodes, 1, { ...o, teamBranches: false }, () => '');
  for (let i = 0; i < episodes.length; i += o.groupSize)
    independentGroupKeys(
      episodes.slice(i, i + o.groupSize).flatMap((e) => e.samples),
      o.groupSize,
      o.grouping,
    );
  return collect(wf, episodes);
}

/**
 * No-tree group keys for one instance's samples (K episodes), per role: a turn that every episode reached (and in
 * which the role acted in each) before the last such turn is its own group (instance, role, turn); the last common
 * turn and every later turn of the longer episodes form one group (instance, role, '>=T'), T the last common turn —
 * "(instance, agent) over last turns". With K episodes, every group then holds at least K samples; `grouping` then
 * pools roles or turns of those keys (groupKey), which only merges groups.
 */
export function independentGroupKeys(samples: MasSample[], k: number, grouping: Grouping = 'agent-turn'): void {
  const roles = [...new Set(samples.map((s) => s.role))];
  for (const role of roles) {
    const mine = samples.filter((s) => s.role === role);
    const turnsOf = (e: number): Set<number> => new Set(mine.filter((s) => s.episode === e).map((s) => s.turn));
    let common = turnsOf(0);
    for (let e = 1; e < k; e++) common = new Set([...common].filter((t) => turnsOf(e).has(t)));
    const last = common.size ? Math.max(...common) : -1;
    for (const s of mine) {
      const inCommon = common.has(s.turn) && s.turn < last;
      s.group = groupKey(s.instance, role, inCommon ? s.turn : last >= 0 ? `>=${last}` : 'all', grouping);
    }
  }
}

/** The group size must be a positive integer. */
function checkGroupSize(k: number): void {
  if (!Number.isInteger(k) || k < 1)
    throw new Error(`the group size (candidates or episodes per instance) must be ≥ 1, got ${k}`);
}

/** The rollout the config's `sampling` asks for: 'tree' → treeRollout; 'no-tree' and 'single' → independentRollout. */
export function rollout(wf: Workflow<unknown>, sampling: 'tree' | 'no-tree' | 'single', o: PlayOptions) {
  return sampling === 'tree' ? treeRollout(wf, o) : independentRollout(wf, o);
}
