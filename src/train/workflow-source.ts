/**
 * AT-GRPO's source of samples: each step plays a multi-agent workflow on fresh instances (playStep, src/workflows/
 * play.ts: tree-sampled, no-tree or single-agent episodes, their validated (instance, agent, turn) groups and the
 * low-mean group filter's verdict per policy, as `hacrl mas rollout` reports it) and appends the kept responses to
 * the table — each record carrying its role, turn, group key and the policy that generated it, so the learner step
 * routes it to that policy alone. Zero-variance groups are the learner's to leave out, as for every source.
 */
import type { Kernels } from '../backend/kernels.js';
import { scoreResponses } from '../model/response-log-probs.js';
import type { Agent } from '../rollout/rollout.js';
import type { GroupFilterResult } from '../workflows/group-filter.js';
import type { SampleGroup } from '../workflows/groups.js';
import { heldOutSandboxCounts, playHeldOut, playStep, successRate, trainingSeeds } from '../workflows/play.js';
import type { Policy } from '../workflows/policy.js';
import type { MasBatch, MasSample } from '../workflows/samples.js';
import { mean, std } from '../util/stats.js';
import type { WorkflowConfig } from '../workflows/workflow-config.js';
import type { Workflow } from '../workflows/workflow.js';
import type { SampleLogRow, SampleSource, StepInputs, StepMetrics, Validation } from './sample-sources.js';
import type { PhaseStart } from './step-watch.js';
import type { SampleRecord } from './sample-table.js';
import type { ValidationOptions } from './validation.js';

/** A policy that learns: its weights and tokenizer (`agent`) and what generates its responses (normally the model). */
export interface WorkflowPolicy {
  agent: Agent;
  policy: Policy;
}

/** How many instances a step plays and which. */
export interface WorkflowSourceOptions {
  /** Instances per step (the config's rollout.promptsPerStep). */
  instancesPerStep: number;
  /** The run's seed: training instances are seed·10⁷ + step·B + i. */
  seed: number;
  /** Episodes per step written turn by turn to samples.jsonl (the config's samplesPerStep). */
  episodesLogged: number;
}

/** The fraction of `xs` that are true, in [0, 1]. */
const frac = (xs: readonly boolean[]): number => mean(xs.map((x) => (x ? 1 : 0)));

/** Reward, success, parse, sandbox and group numbers of a set of samples (one role, or one role's turn). */
function sampleMetrics(samples: readonly MasSample[]): StepMetrics {
  const out: StepMetrics = {
    samples: samples.length,
    reward_mean: mean(samples.map((s) => s.reward)),
    own_mean: mean(samples.map((s) => s.own)),
    team_mean: mean(samples.map((s) => s.team)),
    env_reward_mean: mean(samples.map((s) => s.envReward)),
    success_rate: frac(samples.map((s) => s.success)),
    parse_failures: samples.filter((s) => !s.parsed).length,
  };
  for (const s of samples) if (s.sandbox) out[`sandbox_${s.sandbox}`] = (out[`sandbox_${s.sandbox}`] ?? 0) + 1;
  return out;
}

/** Group counts and sizes of `groups`, and what the filter dropped. */
function groupMetrics(groups: readonly SampleGroup[], f: GroupFilterResult): StepMetrics {
  const sizes = groups.map((g) => g.members.length);
  return {
    groups: groups.length,
    group_size_mean: mean(sizes),
    group_size_min: sizes.length ? Math.min(...sizes) : NaN,
    group_size_max: sizes.length ? Math.max(...sizes) : NaN,
    groups_kept: f.kept.length,
    groups_dropped_low_mean: f.droppedLowMean.length,
  };
}

/** `metrics` under the prefix `prefix/`. */
const prefixed = (prefix: string, metrics: StepMetrics): StepMetrics =>
  Object.fromEntries(Object.entries(metrics).map(([k, v]) => [`${prefix}/${k}`, v]));

/** The workflow's episodes as the learner pipeline's samples. */
export class WorkflowSource implements SampleSource {
  /** The last step's batch (for the turn-by-turn episode log). */
  private last: MasBatch | null = null;
  private readonly generators: Record<string, Policy>;

  constructor(
    private readonly wf: Workflow<unknown>,
    private readonly config: WorkflowConfig,
    private readonly policies: ReadonlyMap<string, WorkflowPolicy>,
    private readonly o: WorkflowSourceOptions,
  ) {
    const acting = [...new Set(wf.roles.map((r) => r.policy))];
    for (const r of wf.roles)
      if (!policies.has(r.policy))
        throw new Error(
          `workflow role "${r.name}" is played by policy "${r.policy}", which is not an agent of the run (agents: ` +
            `${[...policies.keys()].join(', ')}): name an agent "${r.policy}" or set workflow.roles.${r.name}.policy`,
        );
    for (const name of policies.keys())
      if (!acting.includes(name))
        throw new Error(
          `agent "${name}" plays no role of workflow "${wf.name}" (roles: ${wf.roles.map((r) => `${r.name} → ${r.policy}`).join(', ')}): ` +
            'remove it or set workflow.roles.ROLE.policy to it',
        );
    if (config.grouping === 'turn' && acting.length > 1)
      throw new Error(
        `workflow.grouping 'turn' pools all roles of a turn into one group, but the roles are played by ${acting.length} ` +
          `policies (${acting.join(', ')}): a group trains one policy; use one shared policy or grouping 'agent-turn'`,
      );
    this.generators = Object.fromEntries([...policies].map(([name, p]) => [name, p.policy]));
  }

  /** Plays this step's instances, appends the records of the groups that survive the filter, returns metrics. */
  async collect(step: StepInputs, table: SampleRecord[]): Promise<Map<string, StepMetrics>> {
    const seeds = trainingSeeds(this.o.seed, step.step, this.o.instancesPerStep);
    step.phase?.('sampling', `workflow ${this.wf.name}`);
    const { batch, groups, byPolicy } = await playStep(this.wf, this.config, this.generators, seeds);
    this.last = batch;
    const out = new Map<string, StepMetrics>();
    for (const [name, p] of this.policies) {
      step.phase?.('scoring', name);
      const mine = byPolicy.get(name)!;
      const kept = new Set(mine.filter.kept);
      const records = this.records(batch, groups, (g) => kept.has(g.key), p.agent, step.k, table.length);
      table.push(...records);
      out.set(name, this.metrics(batch, mine.groups, mine.filter, name, records.length));
    }
    return out;
  }

  /** The records of the groups `keep` accepts, with the generator's pre-update log-probs; ids from `firstId`. */
  private records(
    batch: MasBatch,
    groups: readonly SampleGroup[],
    keep: (g: SampleGroup) => boolean,
    agent: Agent,
    k: Kernels,
    firstId: number,
  ): SampleRecord[] {
    const episodeIds = new Map(batch.episodes.map((e, i) => [`${e.instance}#${e.episode}`, i]));
    const chosen = groups.flatMap((g, gi) => (keep(g) ? g.members.map((i) => ({ s: batch.samples[i]!, gi })) : []));
    const { tokenizer } = agent;
    const items = chosen.map(({ s }) => ({
      prompt: tokenizer.encode(s.prompt),
      // A text-only policy (tests) gives no ids: its text is encoded and ended with EOS.
      response: s.responseIds ?? [...tokenizer.encode(s.response), tokenizer.eosId],
    }));
    // Old log-probs from the training forward pass, so the first ratio is exactly 1.
    const old = scoreResponses(agent.model, k, items);
    return chosen.map(({ s, gi }, j): SampleRecord => {
      const r = items[j]!;
      return {
        id: firstId + j,
        generator: agent.name,
        role: s.role,
        episode: episodeIds.get(`${s.instance}#${s.episode}`)!,
        group: gi,
        turn: s.turn,
        groupKey: s.group,
        prompt: s.prompt,
        gold: '',
        text: s.response,
        tokens: { prompt: r.prompt, response: r.response },
        generatorLogProbs: old[j]!,
        reward: s.reward,
        rewardParts: { own: s.own, team: s.team, env: s.envReward },
        truncated: s.finishReason === 'length',
        stoppedByEos: r.response.at(-1) === tokenizer.eosId,
      };
    });
  }

  /** One policy's metrics: overall, per role (`role/R/…`) and per role and turn (`role/R/tT/…`). */
  private metrics(
    batch: MasBatch,
    groups: readonly SampleGroup[],
    f: GroupFilterResult,
    policy: string,
    trained: number,
  ): StepMetrics {
    const samples = batch.samples.filter((s) => s.policy === policy);
    const lengths = samples.map((s) => s.responseIds?.length ?? s.response.length);
    const episodes = new Set(samples.map((s) => `${s.instance}#${s.episode}`));
    const played = batch.episodes.filter((e) => episodes.has(`${e.instance}#${e.episode}`));
    const out: StepMetrics = {
      ...sampleMetrics(samples),
      reward_std: std(samples.map((s) => s.reward)),
      // The policy's accuracy is the success rate of the episodes it acted in (a cut-off is not a success).
      accuracy: frac(played.map((e) => e.success)),
      episodes: played.length,
      length_mean: mean(lengths),
      length_min: Math.min(...lengths),
      length_max: Math.max(...lengths),
      truncated_frac: frac(samples.map((s) => s.finishReason === 'length')),
      tokens: lengths.reduce((a, b) => a + b, 0),
      samples_trained: trained,
      ...groupMetrics(groups, f),
    };
    for (const role of [...new Set(samples.map((s) => s.role))]) {
      const mine = samples.filter((s) => s.role === role);
      // Under grouping 'turn' a group holds several roles: it counts for each of them.
      const roleGroups = groups.filter((g) => g.members.some((i) => batch.samples[i]!.role === role));
      const keys = new Set(roleGroups.map((g) => g.key));
      const roleFilter: GroupFilterResult = {
        kept: f.kept.filter((k) => keys.has(k)),
        droppedLowMean: f.droppedLowMean.filter((k) => keys.has(k)),
      };
      Object.assign(out, prefixed(`role/${role}`, { ...sampleMetrics(mine), ...groupMetrics(roleGroups, roleFilter) }));
      for (const turn of [...new Set(mine.map((s) => s.turn))].sort((a, b) => a - b))
        Object.assign(out, prefixed(`role/${role}/t${turn}`, sampleMetrics(mine.filter((s) => s.turn === turn))));
    }
    return out;
  }

  /**
   * The team's greedy success rate on `set.problems` held-out instances, as `val/<workflow name>/greedy`: it belongs
   * to the team, so it is measured once and given to every policy. Beside it, for every role that ran programs, how
   * each program ended in the sandbox, as counts `heldout/<workflow name>/role/<role>/sandbox_<outcome>` (every
   * outcome, 0 included), as training logs them per step.
   */
  async validate(set: ValidationOptions, phase?: PhaseStart): Promise<Validation[]> {
    phase?.('validating', `workflow ${this.wf.name}`);
    const played = await playHeldOut(this.wf, this.generators, set.problems);
    return [
      {
        label: 'workflow',
        policies: [...this.policies.keys()],
        metrics: { [`val/${this.wf.name}/greedy`]: successRate(played) },
        counts: heldOutSandboxCounts(this.wf.name, played),
      },
    ];
  }

  /**
   * The first `episodesLogged` episodes of the last step, turn by turn: each chosen response as one samples.jsonl
   * row with its role, turn, policy, reward parts and its group's rewards (tree sampling: the K candidates').
   */
  logRows(step: number): SampleLogRow[] {
    const batch = this.last;
    if (!batch) return [];
    const groupRewards = new Map<string, number[]>();
    for (const s of batch.samples) groupRewards.set(s.group, [...(groupRewards.get(s.group) ?? []), s.reward]);
    return batch.episodes.slice(0, this.o.episodesLogged).flatMap((e) =>
      batch.samples
        .filter((s) => s.chosen && s.instance === e.instance && s.episode === e.episode)
        .map((s) => ({
          step,
          agent: s.policy,
          episode: `${e.instance}#${e.episode}`,
          episode_success: e.success,
          role: s.role,
          turn: s.turn,
          prompt: s.prompt,
          response: s.response,
          reward: s.reward,
          own: s.own,
          team: s.team,
          env_reward: s.envReward,
          parsed: s.parsed,
          sandbox: s.sandbox,
          correct: s.success,
          group_rewards: groupRewards.get(s.group)!,
        })),
    );
  }
}
