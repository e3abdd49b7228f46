/**
 * The resolved run as the trainer's source of samples: single-turn rollouts of every agent on the training problems,
 * or, when the config has a `workflow` section, the episodes of the workflow it names (each agent the policy of the
 * roles mapped to it). The trainer sees only the SampleSource either way.
 */
import type { Kernels } from '../backend/kernels.js';
import type { ResolvedAgent } from '../config/rl-config.js';
import { loadRewardModule } from '../rewards/load-reward.js';
import { formatReward, mathReward, type WeightedReward } from '../rewards/reward.js';
import type { DataCursor } from '../run/train-state.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import { modelPolicy } from '../workflows/model-policy.js';
import { workflowOf } from '../workflows/registry.js';
import type { TeamMember } from './learners.js';
import type { ResolvedRun, RolloutSettings, WorkflowSettings } from './resolved-run.js';
import { ProblemStream, RolloutSource, type RolloutOptions, type SampleSource } from './sample-sources.js';
import { WorkflowSource, type WorkflowPolicy } from './workflow-source.js';

/** Sequences per generation call of a single-turn run (the rest of the step's wait their turn). */
export const GENERATION_BATCH = 64;

/** What a source is built from: the source's settings and the run's agents, seed and prompts per step. */
type SourceInputs = Pick<ResolvedRun, 'agents' | 'seed' | 'promptsPerStep'>;

/** The source of the run `run`, sampling from `team`'s policies with their RNGs. */
export async function runSource(
  run: SourceInputs & Pick<ResolvedRun, 'source'>,
  team: readonly TeamMember[],
  cursor: DataCursor,
  k: Kernels,
): Promise<SampleSource> {
  return run.source.kind === 'workflow'
    ? workflowSource(run, run.source, team, k)
    : rolloutSource(run, run.source, team, cursor);
}

/** The rewards the reward section asks for. */
export async function buildRewards(reward: RolloutSettings['rewards']): Promise<WeightedReward[]> {
  const out: WeightedReward[] = [];
  if (reward.math !== 0) out.push({ name: 'math', fn: mathReward(), weight: reward.math });
  if (reward.format !== 0) out.push({ name: 'format', fn: formatReward(), weight: reward.format });
  for (const c of reward.custom)
    out.push({ name: c.name ?? c.path, fn: await loadRewardModule(c.path), weight: c.weight });
  return out;
}
/** How one agent samples and is scored under the config. */
function rolloutOptions(a: ResolvedAgent, rewards: WeightedReward[]): RolloutOptions {
  return {
    groupSize: a.groupSize,
    sampling: {
      temperature: a.temperature,
      topP: a.topP,
      topK: a.topK,
      maxNewTokens: a.maxNewTokens,
      stopStrings: a.stopStrings,
    },
    prompt: { template: a.template, ...(a.system === undefined ? {} : { system: a.system }) },
    rewards,
    generationBatch: GENERATION_BATCH,
  };
}

/**
 * Every agent this process trains answering the training problems, one role each, validated on the validation sets
 * (the other agents' processes sample theirs).
 */
async function rolloutSource(
  run: SourceInputs,
  settings: RolloutSettings,
  team: readonly TeamMember[],
  cursor: DataCursor,
): Promise<RolloutSource> {
  const train = (await loadDataSpec(settings.train)).problems;
  const validation = await Promise.all(settings.validation.map(loadDataSpec));
  const rewards = await buildRewards(settings.rewards);
  const agents = new Map(run.agents.map((a) => [a.name, a]));
  const roles = team.flatMap((l) => {
    const a = agents.get(l.policy.name)!;
    return l.local
      ? [{ name: l.policy.name, policy: l.policy, rollout: rolloutOptions(a, rewards), rng: l.rng, validation: a }]
      : [];
  });
  return new RolloutSource(roles, {
    train: new ProblemStream(train, run.seed, cursor),
    promptsPerStep: run.promptsPerStep,
    validation,
    samplesLogged: settings.samplesLogged,
    oldLogProbs: settings.oldLogProbs,
  });
}

/** The workflow `settings` names, each learner the policy of the roles mapped to it, instances drawn per step. */
function workflowSource(
  run: SourceInputs,
  settings: WorkflowSettings,
  team: readonly TeamMember[],
  k: Kernels,
): WorkflowSource {
  // Workflows run in one process (hacrl agent refuses them): every member is a local learner.
  const policies = new Map<string, WorkflowPolicy>(
    team.flatMap((l) =>
      l.local
        ? [
            [
              l.policy.name,
              {
                agent: l.policy,
                policy: modelPolicy(l.policy.model, l.policy.tokenizer, k, l.rng, `agent ${l.policy.name}`),
              },
            ],
          ]
        : [],
    ),
  );
  return new WorkflowSource(workflowOf(settings.workflow), settings.workflow, policies, {
    instancesPerStep: run.promptsPerStep,
    seed: run.seed,
    episodesLogged: settings.episodesLogged,
  });
}
