/**
 * The run config's `workflow` section as the trainer's source of samples: the workflow it names, each agent as the
 * policy of the roles mapped to it (its own tokenizer and sampling RNG), instances drawn per step from the seed.
 */
import type { Kernels } from '../backend/kernels.js';
import type { RunConfig } from '../config/rl-config.js';
import type { Agent } from '../rollout/rollout.js';
import type { Rng } from '../util/rng.js';
import { modelPolicy } from '../workflows/model-policy.js';
import { buildWorkflow } from '../workflows/registry.js';
import { parseWorkflowConfig } from '../workflows/workflow-config.js';
import { WorkflowSource, type WorkflowPolicy } from './workflow-source.js';

/** The run's workflow source, or null when the config has no `workflow` section (single-turn rollouts). */
export function workflowSourceOf(
  cfg: RunConfig,
  agents: readonly Agent[],
  samplingRngs: readonly Rng[],
  k: Kernels,
): WorkflowSource | null {
  if (cfg.workflow === undefined) return null;
  const config = parseWorkflowConfig(cfg.workflow);
  const policies = new Map<string, WorkflowPolicy>(
    agents.map((agent, i) => [
      agent.name,
      { agent, policy: modelPolicy(agent.model, agent.tokenizer, k, samplingRngs[i]!, `agent ${agent.name}`) },
    ]),
  );
  return new WorkflowSource(buildWorkflow(config), config, policies, {
    instancesPerStep: cfg.rollout.promptsPerStep,
    seed: cfg.seed,
    episodesLogged: cfg.samplesPerStep,
  });
}
