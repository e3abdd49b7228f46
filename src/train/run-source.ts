/**
 * The run config as the trainer's source of samples: single-turn rollouts of every agent on the training problems,
 * or, when the config has a `workflow` section, the episodes of the workflow it names (each agent the policy of the
 * roles mapped to it). The trainer sees only the SampleSource either way.
 */
import type { Kernels } from '../backend/kernels.js';
import { resolveAgents, type ResolvedAgent, type RunConfig } from '../config/rl-config.js';
import { loadRewardModule } from '../rewards/load-reward.js';
import { formatReward, mathReward, type WeightedReward } from '../rewards/reward.js';
import type { DataCursor } from '../run/train-state.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import { modelPolicy } from '../workflows/model-policy.js';
import { workflowOf } from '../workflows/registry.js';
import type { WorkflowConfig } from '../workflows/workflow-config.js';
import type { TeamMember } from './learners.js';
import { ProblemStream, RolloutSource, type RolloutOptions, type SampleSource } from './sample-sources.js';
import { WorkflowSource, type WorkflowPolicy } from './workflow-source.js';

/** Sequences per generation call of a single-turn run (the rest of the step's wait their turn). */
export const GENERATION_BATCH = 64;

/** The source of the run described by `cfg`, sampling from `team`'s policies with their RNGs. */
export async function runSource(
  cfg: RunConfig,
  team: readonly TeamMember[],
  cursor: DataCursor,
  k: Kernels,
): Promise<SampleSource> {
  return cfg.workflow === undefined ? rolloutSource(cfg, team, cursor) : workflowSource(cfg, cfg.workflow, team, k);
}

/** The rewards the config asks for. */
async function buildRewards(cfg: RunConfig): Promise<WeightedReward[]> {
  const out: WeightedReward[] = [];
  if (cfg.reward.math !== 0) out.push({ name: 'math', fn: mathReward(), weight: cfg.reward.math });
  if (cfg.reward.format !== 0) out.push({ name: 'format', fn: formatReward(), weight: cfg.reward.format });
  for (const c of cfg.reward.custom)
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
async function rolloutSource(cfg: RunConfig, team: readonly TeamMember[], cursor: DataCursor): Promise<RolloutSource> {
  const train = (await loadDataSpec(cfg.data.train)).problems;
  const validation = await Promise.all(cfg.data.validation.map(loadDataSpec));
  const rewards = await buildRewards(cfg);
  const settings = resolveAgents(cfg);
  const roles = team.flatMap((l, i) =>
    l.local
      ? [
          {
            name: l.policy.name,
            policy: l.policy,
            rollout: rolloutOptions(settings[i]!, rewards),
            rng: l.rng,
            validation: settings[i]!,
          },
        ]
      : [],
  );
  return new RolloutSource(roles, {
    train: new ProblemStream(train, cfg.seed, cursor),
    promptsPerStep: cfg.rollout.promptsPerStep,
    validation,
    samplesLogged: cfg.samplesPerStep,
    oldLogProbs: cfg.optim.oldLogProbs,
  });
}

/** The workflow `config` names, each learner the policy of the roles mapped to it, instances drawn per step. */
function workflowSource(
  cfg: RunConfig,
  config: WorkflowConfig,
  team: readonly TeamMember[],
  k: Kernels,
): WorkflowSource {
  const policies = new Map<string, WorkflowPolicy>(
    team.map((l) => [
      l.policy.name,
      { agent: l.policy, policy: modelPolicy(l.policy.model, l.policy.tokenizer, k, l.rng, `agent ${l.policy.name}`) },
    ]),
  );
  return new WorkflowSource(workflowOf(config), config, policies, {
    instancesPerStep: cfg.rollout.promptsPerStep,
    seed: cfg.seed,
    episodesLogged: cfg.samplesPerStep,
  });
}
