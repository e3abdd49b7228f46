/**
 * Sources of samples: each fills the step's table (sample-table.ts) with records. `RolloutSource` samples G
 * single-turn responses per prompt from each role's policy, scores them and takes the generator's pre-update log-probs
 * — before any learner updates, so every learner sees the same snapshot. Other sources (multi-turn workflows) append
 * records the same way, with their own roles and episodes.
 */
import { performance } from 'node:perf_hooks';
import type { Kernels } from '../backend/kernels.js';
import type { SamplingOptions } from '../model/generate.js';
import { scoreResponses } from '../model/response-log-probs.js';
import { scoreSamples, type WeightedReward } from '../rewards/reward.js';
import { sampleRollouts, type Agent } from '../rollout/rollout.js';
import type { Problem } from '../tasks/problem.js';
import type { PromptOptions } from '../tasks/prompt.js';
import type { Rng } from '../util/rng.js';
import { rewardPartMeans } from './reward-metrics.js';
import type { SampleRecord } from './sample-table.js';

/** Metrics by name (the names the run log and the report use). */
export type StepMetrics = Record<string, number>;

/** What a source gets to produce one step's samples. */
export interface StepInputs {
  /** The step's B prompts. */
  problems: readonly Problem[];
  k: Kernels;
  /** The step's index (from 0): a workflow draws its instances from it. */
  step: number;
}

/** A producer of records for the step's table. */
export interface SampleSource {
  /**
   * Appends this step's records to `table` (ids continuing its numbering, episode ids unique in the step) and returns
   * metrics of what it produced per generating policy (rewards, accuracy, lengths, timings).
   */
  collect(step: StepInputs, table: SampleRecord[]): Promise<Map<string, StepMetrics>>;
}

/** How a role samples its responses and how they are scored. */
export interface RolloutOptions {
  /** Responses per prompt G. */
  groupSize: number;
  sampling: Omit<SamplingOptions, 'rng' | 'seed' | 'decode'>;
  prompt: PromptOptions;
  rewards: readonly WeightedReward[];
  /** Sequences per generation call. */
  generationBatch: number;
}

/** A role of a single-turn run: one policy answering every prompt, with its sampling settings and RNG. */
export interface RolloutRole {
  /** The role's name (single-turn runs: the policy's). */
  name: string;
  policy: Agent;
  rollout: RolloutOptions;
  rng: Rng;
}

const mean = (xs: readonly number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** The metrics of one policy's records: rewards, accuracy, lengths. */
export function recordMetrics(records: readonly SampleRecord[]): StepMetrics {
  const rewards = records.map((r) => r.reward);
  const lengths = records.map((r) => r.tokens[r.generator]!.response.length);
  // Accuracy is the math reward's verdict when there is one (a format bonus must not count as correct).
  const correct = records.map((r) => r.rewardParts.math ?? r.reward);
  return {
    reward_mean: mean(rewards),
    reward_std: Math.sqrt(mean(rewards.map((r) => (r - mean(rewards)) ** 2))),
    accuracy: mean(correct.map((c) => (c > 0 ? 1 : 0))),
    length_mean: mean(lengths),
    length_min: Math.min(...lengths),
    length_max: Math.max(...lengths),
    truncated_frac: mean(records.map((r) => (r.truncated ? 1 : 0))),
    tokens: lengths.reduce((a, b) => a + b, 0),
  };
}

/** Own rollouts: every role's policy answers each prompt G times. */
export class RolloutSource implements SampleSource {
  /** `roles` in the order their records enter the table. */
  constructor(private readonly roles: readonly RolloutRole[]) {}

  /** Samples, scores and takes old log-probs for every role, in order. */
  async collect(step: StepInputs, table: SampleRecord[]): Promise<Map<string, StepMetrics>> {
    const out = new Map<string, StepMetrics>();
    for (const role of this.roles) {
      const { policy, rollout: o } = role;
      const t0 = performance.now();
      const rollouts = sampleRollouts(
        policy,
        step.k,
        step.problems,
        o.groupSize,
        { ...o.sampling, name: `agent ${policy.name} at training step ${step.step + 1}` },
        role.rng,
        o.prompt,
        o.generationBatch,
      );
      const t1 = performance.now();
      const scored = await scoreSamples(
        rollouts.map((r) => ({ prompt: r.problem.prompt, response: r.text, gold: r.problem.answer })),
        o.rewards,
      );
      const t2 = performance.now();
      // Old log-probs come from the training forward pass, not from sampling, so the first own ratio is exactly 1.
      const old = scoreResponses(
        policy.model,
        step.k,
        rollouts.map((r) => ({ prompt: r.promptIds, response: r.responseIds })),
      );
      const records = rollouts.map((r, i): SampleRecord => {
        const id = table.length + i;
        return {
          id,
          generator: policy.name,
          role: role.name,
          episode: id,
          group: r.group,
          prompt: r.problem.prompt,
          gold: r.problem.answer,
          text: r.text,
          tokens: {
            [policy.name]: { prompt: r.promptIds, response: r.responseIds, generatorSpan: r.responseIds.length },
          },
          dropped: {},
          generatorLogProbs: old[i]!,
          refLogProbs: {},
          reward: scored.scores[i]!.total,
          rewardParts: scored.scores[i]!.values,
          truncated: r.truncated,
          stoppedByEos: !r.truncated && r.responseIds.at(-1) === policy.tokenizer.eosId,
        };
      });
      table.push(...records);
      out.set(policy.name, {
        ...recordMetrics(records),
        time_generate_s: (t1 - t0) / 1e3,
        time_score_s: (t2 - t1) / 1e3,
        reward_failures: scored.stats.reduce((n, s) => n + s.failures, 0),
        ...rewardPartMeans(scored.scores, o.rewards),
      });
    }
    return out;
  }
}
