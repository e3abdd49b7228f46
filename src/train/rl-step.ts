/**
 * One RLVR step of a single agent (GRPO, GSPO, GSPO×2): sample G responses per prompt, score them, compute group
 * advantages, take the old (and reference) log-probs before any update, then M mini-batches × E epochs of policy
 * updates. Returns the step's metrics.
 */
import { performance } from 'node:perf_hooks';
import type { Kernels } from '../backend/kernels.js';
import { groupAdvantages, zeroVarianceGroups, type AdvantageNormalization } from '../algorithms/advantages.js';
import { policyLoss, type PolicyLossOptions } from '../algorithms/policy-loss.js';
import type { PolicySequence } from '../algorithms/sequence.js';
import { packPromptResponses } from '../model/pack.js';
import { scoreResponses } from '../model/score.js';
import type { SamplingOptions } from '../model/generate.js';
import type { Transformer } from '../model/transformer.js';
import type { AdamW } from '../optim/adamw.js';
import { clipGradNorm } from '../optim/clip.js';
import { scoreSamples, type WeightedReward } from '../rewards/reward.js';
import { sampleRollouts, type Agent, type Rollout } from '../rollout/rollout.js';
import type { Problem } from '../tasks/problem.js';
import type { PromptOptions } from '../tasks/prompt.js';
import { Tape } from '../tensor/tape.js';
import type { Rng } from '../util/rng.js';

/** Everything one step needs to know. */
export interface RlStepOptions {
  /** Responses per prompt G. */
  groupSize: number;
  sampling: Omit<SamplingOptions, 'rng' | 'seed' | 'decode'>;
  prompt: PromptOptions;
  /** Optimizer mini-batches per epoch M. */
  miniBatches: number;
  /** Passes over the step's rollouts E. */
  epochs: number;
  /** Objective, clip range, aggregation, KL and truncation masking (see policyLoss). */
  loss: Omit<PolicyLossOptions, 'denominators'>;
  advantageNormalization: AdvantageNormalization;
  /** Drop groups whose rewards are all equal (they carry no signal under group advantages). */
  filterZeroVariance: boolean;
  /** Gradient-norm clip. */
  clip: number;
  /** Learning rate of this step. */
  lr: number;
  rewards: readonly WeightedReward[];
  /** Sequences per generation call. */
  generationBatch: number;
}

/** Metrics of one step (the names the run log and the report use). */
export type StepMetrics = Record<string, number>;

/** The step's rollouts with their rewards, for sample logging. */
export interface StepResult {
  metrics: StepMetrics;
  rollouts: Rollout[];
  rewards: number[];
  /** Optimizer updates skipped because the loss or gradient was not finite. */
  skippedUpdates: number;
}

const mean = (xs: readonly number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** Runs one step for `agent` on `problems` (B prompts); updates the agent's weights in place through `optimizer`. */
export async function rlStep(
  agent: Agent,
  reference: Transformer | null,
  optimizer: AdamW,
  k: Kernels,
  problems: readonly Problem[],
  o: RlStepOptions,
  rngs: { sampling: Rng; order: Rng },
): Promise<StepResult> {
  const t0 = performance.now();
  const rollouts = sampleRollouts(
    agent,
    k,
    problems,
    o.groupSize,
    o.sampling,
    rngs.sampling,
    o.prompt,
    o.generationBatch,
  );
  const t1 = performance.now();
  const scored = await scoreSamples(
    rollouts.map((r) => ({ prompt: r.problem.prompt, response: r.text, gold: r.problem.answer })),
    o.rewards,
  );
  const rewards = scored.scores.map((s) => s.total);
  const t2 = performance.now();

  const grouping = { groupSize: o.groupSize };
  const advantages = groupAdvantages(rewards, grouping, { normalization: o.advantageNormalization });
  const zero = zeroVarianceGroups(rewards, grouping);
  const items = rollouts.map((r) => ({ prompt: r.promptIds, response: r.responseIds }));
  // Old log-probs come from the training forward pass, not from sampling, so the first ratio is exactly 1.
  const old = scoreResponses(agent.model, k, items);
  const ref = o.loss.kl ? scoreResponses(reference ?? agent.model, k, items) : null;
  const kept = rollouts.map((_, i) => i).filter((i) => !o.filterZeroVariance || zero.keep[rollouts[i]!.group]!);

  const stats: Record<string, number[]> = {};
  const note = (name: string, v: number): void => void (stats[name] ??= []).push(v);
  let skippedUpdates = 0;
  for (let epoch = 0; epoch < o.epochs && kept.length > 0; epoch++) {
    const order = rngs.order.shuffle([...kept]);
    const size = Math.ceil(order.length / o.miniBatches);
    for (let start = 0; start < order.length; start += size) {
      const batch = order.slice(start, start + size);
      const packed = packPromptResponses(batch.map((i) => items[i]!));
      const tape = new Tape();
      const { logProb } = agent.model.tokenLogProbs({ k, tape }, packed, packed.targets);
      const sequences: PolicySequence[] = batch.map((i, j) => {
        const rows = packed.responseRows[j]!;
        return {
          logProbs: logProb.data.subarray(rows.start, rows.start + rows.length),
          oldLogProbs: old[i]!,
          ...(ref ? { refLogProbs: ref[i]! } : {}),
          advantage: advantages[i]!,
          truncated: rollouts[i]!.truncated,
        };
      });
      const { loss, grad, stats: s } = policyLoss(sequences, o.loss);
      const seed = new Float32Array(logProb.size);
      packed.responseRows.forEach((rows, j) => seed.set(grad[j]!, rows.start));
      optimizer.zeroGrad();
      tape.backward(logProb, seed);
      const gradNorm = clipGradNorm(k, agent.model.params.values(), o.clip);
      if (Number.isFinite(loss) && Number.isFinite(gradNorm)) optimizer.step(k, o.lr);
      else skippedUpdates++;
      note('loss', loss);
      note('grad_norm', gradNorm);
      note('clip_frac_low', s.clipFracLow);
      note('clip_frac_high', s.clipFracHigh);
      note('ratio_mean', s.ratioMean);
      note('ratio_min', s.ratioMin);
      note('ratio_max', s.ratioMax);
      note('approx_kl', s.approxKl);
      if (ref) note('kl', s.kl);
    }
  }
  const t3 = performance.now();
  const lengths = rollouts.map((r) => r.responseIds.length);
  const tokens = lengths.reduce((a, b) => a + b, 0);
  const correct = scored.scores.map((s) => s.values.math ?? s.total);
  const metrics: StepMetrics = {
    reward_mean: mean(rewards),
    reward_std: Math.sqrt(mean(rewards.map((r) => (r - mean(rewards)) ** 2))),
    accuracy: mean(correct.map((c) => (c > 0 ? 1 : 0))),
    zero_var_groups_frac: zero.fraction,
    length_mean: mean(lengths),
    length_min: Math.min(...lengths),
    length_max: Math.max(...lengths),
    truncated_frac: mean(rollouts.map((r) => (r.truncated ? 1 : 0))),
    tokens,
    time_generate_s: (t1 - t0) / 1e3,
    time_score_s: (t2 - t1) / 1e3,
    time_train_s: (t3 - t2) / 1e3,
    tokens_per_s: tokens / ((t3 - t0) / 1e3),
    lr: o.lr,
    skipped_updates: skippedUpdates,
    reward_failures: scored.stats.reduce((n, r) => n + r.failures, 0),
  };
  for (const [name, values] of Object.entries(stats)) {
    const finite = values.filter(Number.isFinite);
    metrics[name] =
      name === 'ratio_min' ? Math.min(...finite) : name === 'ratio_max' ? Math.max(...finite) : mean(finite);
  }
  return { metrics, rollouts, rewards, skippedUpdates };
}
