/**
 * `hacrl mas eval`: greedy episodes of a workflow on held-out, calibration or train-side instances, with a checkpoint
 * per policy and, optionally, roles answered by their solver (--expert): e.g. a trained coder with the reference's test
 * cases, or a warm-start tester with a trained coder — the numbers that say which role an RL run changed.
 */
import { z } from 'zod';
import { engine } from '../backend/engine.js';
import { loadPretrained } from '../model/pretrained.js';
import { parseWith } from '../util/json-file.js';
import { Rng } from '../util/rng.js';
import { mean } from '../util/stats.js';
import { calibrationSeeds, heldOutSeeds, playGreedy, successRate, trainProbeSeeds } from '../workflows/play.js';
import { EXPERT_POLICY, withExpertRoles } from '../workflows/expert-roles.js';
import { modelPolicy } from '../workflows/model-policy.js';
import type { Policy } from '../workflows/policy.js';
import { workflowOf } from '../workflows/registry.js';
import { parseWorkflowConfig } from '../workflows/workflow-config.js';

/** Options of `hacrl mas eval`. */
export const MasEvalSchema = z
  .object({
    /** The `workflow` config section (docs/at-grpo.md); default plan-path with its defaults. */
    workflow: z.record(z.string(), z.unknown()).default({}),
    /** Checkpoint folder per policy name ('shared' when no name is given); every policy a model plays needs one. */
    models: z.record(z.string(), z.string()),
    /** Roles answered by the environment's solver instead of a model; default none. */
    expert: z.array(z.string().min(1)).default([]),
    /**
     * Instances: the held-out ones (those `hacrl bench mas` reports), the calibration ones, or train-side ones never
     * trained on (coding: task keys training sees, with other arguments); default held-out.
     */
    split: z.enum(['heldout', 'calibration', 'train']).default('heldout'),
    /** Instances played, one greedy episode each; default 100, at most 100000. */
    instances: z.number().int().positive().max(100_000, '--instances is at most 100000').default(100),
  })
  .strict();
/** Options as passed. */
export type MasEvalOptions = z.input<typeof MasEvalSchema>;

/** Success of the episodes and, per role, its mean r_env and the fraction of its responses that parsed. */
export interface MasEvalSummary {
  workflow: string;
  split: string;
  instances: number;
  successRate: number;
  roles: Record<string, { policy: string; envReward: number; parsed: number }>;
}

/** Plays the episodes and summarizes them. */
export async function runMasEval(raw: MasEvalOptions): Promise<MasEvalSummary> {
  const o = parseWith(MasEvalSchema, raw, 'mas eval options');
  const config = parseWorkflowConfig(o.workflow);
  const { workflow: wf, expert } = withExpertRoles(workflowOf(config), o.expert);
  const k = engine();
  // Greedy decoding draws nothing; the RNG only satisfies the sampler's signature.
  const rng = new Rng(0);
  const policies: Record<string, Policy> = { [EXPERT_POLICY]: expert };
  for (const name of new Set(wf.roles.map((r) => r.policy).filter((p) => p !== EXPERT_POLICY))) {
    const dir = o.models[name];
    if (dir === undefined) throw new Error(`no checkpoint for policy "${name}": pass --model ${name}=DIR`);
    const { model, tokenizer } = await loadPretrained(dir);
    policies[name] = modelPolicy(model, tokenizer, k, rng, `policy ${name} (${dir})`);
  }
  const seeds = { heldout: heldOutSeeds, calibration: calibrationSeeds, train: trainProbeSeeds }[o.split](o.instances);
  const batch = await playGreedy(wf, policies, seeds);
  const roles: MasEvalSummary['roles'] = {};
  for (const r of wf.roles) {
    const mine = batch.samples.filter((s) => s.role === r.name);
    roles[r.name] = {
      policy: r.policy,
      envReward: mean(mine.map((s) => s.envReward)),
      parsed: mean(mine.map((s) => (s.parsed ? 1 : 0))),
    };
  }
  return { workflow: wf.name, split: o.split, instances: seeds.length, successRate: successRate(batch), roles };
}
