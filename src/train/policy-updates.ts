/**
 * The parts of an RL step that single-agent and collaborative training share: sampling and scoring an agent's
 * rollouts, the metrics of those rollouts, and the mini-batch update loop that turns a loss over per-sequence
 * log-probs into optimizer steps.
 */
import { performance } from 'node:perf_hooks';
import type { Kernels } from '../backend/kernels.js';
import { packPromptResponses, type PromptResponse } from '../model/pack.js';
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
import { rewardPartMeans } from './reward-metrics.js';

/** Metrics of one step (the names the run log and the report use). */
export type StepMetrics = Record<string, number>;

/** How an agent samples its rollouts and how they are scored. */
export interface RolloutOptions {
  /** Responses per prompt G. */
  groupSize: number;
  sampling: Omit<SamplingOptions, 'rng' | 'seed' | 'decode'>;
  prompt: PromptOptions;
  rewards: readonly WeightedReward[];
  /** Sequences per generation call. */
  generationBatch: number;
}

/** An agent's scored rollouts of one step. */
export interface ScoredRollouts {
  rollouts: Rollout[];
  /** Total reward of each rollout. */
  rewards: number[];
  /** The step's metrics of these rollouts: rewards, accuracy, lengths, timings. */
  metrics: StepMetrics;
}

const mean = (xs: readonly number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);

/** Samples G responses per problem from `agent` and scores them. */
export async function sampleAndScore(
  agent: Agent,
  k: Kernels,
  problems: readonly Problem[],
  o: RolloutOptions,
  rng: Rng,
): Promise<ScoredRollouts> {
  const t0 = performance.now();
  const rollouts = sampleRollouts(agent, k, problems, o.groupSize, o.sampling, rng, o.prompt, o.generationBatch);
  const t1 = performance.now();
  const scored = await scoreSamples(
    rollouts.map((r) => ({ prompt: r.problem.prompt, response: r.text, gold: r.problem.answer })),
    o.rewards,
  );
  const t2 = performance.now();
  const rewards = scored.scores.map((s) => s.total);
  const lengths = rollouts.map((r) => r.responseIds.length);
  // Accuracy is the math reward's verdict when there is one (a format bonus must not count as correct).
  const correct = scored.scores.map((s) => s.values.math ?? s.total);
  const metrics: StepMetrics = {
    reward_mean: mean(rewards),
    reward_std: Math.sqrt(mean(rewards.map((r) => (r - mean(rewards)) ** 2))),
    accuracy: mean(correct.map((c) => (c > 0 ? 1 : 0))),
    length_mean: mean(lengths),
    length_min: Math.min(...lengths),
    length_max: Math.max(...lengths),
    truncated_frac: mean(rollouts.map((r) => (r.truncated ? 1 : 0))),
    tokens: lengths.reduce((a, b) => a + b, 0),
    time_generate_s: (t1 - t0) / 1e3,
    time_score_s: (t2 - t1) / 1e3,
    reward_failures: scored.stats.reduce((n, r) => n + r.failures, 0),
    ...rewardPartMeans(scored.scores, o.rewards),
  };
  return { rollouts, rewards, metrics };
}

/** One mini-batch's loss over its sequences' current log-probs (one array per sequence, in `batch` order). */
export type MiniBatchLoss = (
  batch: readonly number[],
  logProbs: readonly Float32Array[],
  update: number,
) => { loss: number; grad: Float32Array[]; stats: Record<string, number> };

/** What the update loop did. */
export interface UpdateResult {
  /** Every statistic of every update, by name, in update order (plus loss and grad_norm). */
  stats: Record<string, number[]>;
  /** Updates skipped because the loss or gradient was not finite. */
  skippedUpdates: number;
}

/** Splits `order` into `count` consecutive mini-batches of near-equal size (the last ones may be one shorter). */
export function splitMiniBatches(order: readonly number[], count: number): number[][] {
  const size = Math.ceil(order.length / count);
  const out: number[][] = [];
  for (let start = 0; start < order.length; start += size) out.push(order.slice(start, start + size));
  return out;
}

/**
 * One optimizer update per mini-batch of `batches`, in order: forward pass over the mini-batch's prompt+response
 * pairs, the loss and its gradient in the response log-probs from `lossFn`, backward, gradient clip, AdamW step.
 * An update whose loss or gradient norm is not finite is skipped (no step) and counted.
 */
export function runUpdates(
  model: Transformer,
  optimizer: AdamW,
  k: Kernels,
  items: readonly PromptResponse[],
  batches: readonly (readonly number[])[],
  lossFn: MiniBatchLoss,
  o: { clip: number; lr: number },
): UpdateResult {
  const stats: Record<string, number[]> = {};
  const note = (name: string, v: number): void => void (stats[name] ??= []).push(v);
  let skippedUpdates = 0;
  for (const [update, batch] of batches.entries()) {
    const packed = packPromptResponses(batch.map((i) => items[i]!));
    const tape = new Tape();
    const { logProb, entropy } = model.tokenLogProbs({ k, tape }, packed, packed.targets, { entropy: true });
    const rows = packed.responseRows.map((r) => logProb.data.subarray(r.start, r.start + r.length));
    note('entropy', responseTokenMean(entropy!, packed.responseRows));
    const { loss, grad, stats: s } = lossFn(batch, rows, update);
    const seed = new Float32Array(logProb.size);
    packed.responseRows.forEach((r, j) => seed.set(grad[j]!, r.start));
    optimizer.zeroGrad();
    tape.backward(logProb, seed);
    const gradNorm = clipGradNorm(k, model.params.values(), o.clip);
    if (Number.isFinite(loss) && Number.isFinite(gradNorm)) optimizer.step(k, o.lr);
    else skippedUpdates++;
    note('loss', loss);
    note('grad_norm', gradNorm);
    for (const [name, v] of Object.entries(s)) note(name, v);
  }
  return { stats, skippedUpdates };
}

/** Mean of a per-row value over the response tokens (the policy's entropy, nats, as the health warnings read it). */
function responseTokenMean(perRow: Float32Array, rows: readonly { start: number; length: number }[]): number {
  let sum = 0;
  let n = 0;
  for (const r of rows) for (let i = r.start; i < r.start + r.length; i++, n++) sum += perRow[i]!;
  return n > 0 ? sum / n : NaN;
}

/**
 * One number per statistic for the step: the mean over updates of its finite values, except names ending in _min or
 * _max (the extreme) and names ending in _m (kept per update as NAME0, NAME1, …: e.g. a per-mini-batch fraction).
 */
export function summarizeUpdates(stats: Record<string, number[]>): StepMetrics {
  const out: StepMetrics = {};
  for (const [name, values] of Object.entries(stats)) {
    const finite = values.filter(Number.isFinite);
    if (name.endsWith('_m')) values.forEach((v, m) => (out[`${name}${m}`] = v));
    else if (name.endsWith('_min')) out[name] = finite.length ? Math.min(...finite) : NaN;
    else if (name.endsWith('_max')) out[name] = finite.length ? Math.max(...finite) : NaN;
    else out[name] = mean(finite);
  }
  return out;
}
