/**
 * One collaborative step of n ≥ 2 agents (HACPO, and the naive-sharing baseline with its mechanisms switched off):
 * every agent samples G responses to the same B prompts, all responses are scored, every generator's log-probs of its
 * own responses are taken, and only then does each agent, one after another, update on its own and on the others'
 * responses (re-tokenized when tokenizers differ) — so every learner sees the same pre-update snapshot of the others.
 */
import { performance } from 'node:perf_hooks';
import type { Kernels } from '../backend/kernels.js';
import type { ClipRange } from '../algorithms/clip.js';
import type { LossAggregation } from '../algorithms/aggregate.js';
import type { KlEstimator } from '../algorithms/kl.js';
import {
  baselineRatios,
  capabilityAwareBatchAdvantages,
  discrepancyCoefficients,
  hacpoLoss,
  meanOf,
  type CapabilityTracker,
  type ForeignObjective,
  type HacpoLossStats,
  type HacpoSequence,
  type StepwiseClip,
} from '../algorithms/hacpo/index.js';
import type { PromptResponse } from '../model/pack.js';
import { scoreResponses } from '../model/score.js';
import type { Transformer } from '../model/transformer.js';
import type { AdamW } from '../optim/adamw.js';
import { retokenizeResponse, spanMean, UnencodableTextError } from '../rollout/retokenize.js';
import type { Agent, Rollout } from '../rollout/rollout.js';
import type { Problem } from '../tasks/problem.js';
import type { Rng } from '../util/rng.js';
import {
  runUpdates,
  sampleAndScore,
  splitMiniBatches,
  summarizeUpdates,
  type RolloutOptions,
  type ScoredRollouts,
  type StepMetrics,
} from './policy-updates.js';
import type { StepResult } from './rl-step.js';

/** One agent of a collaborative run with its own state and settings. */
export interface Collaborator {
  agent: Agent;
  optimizer: AdamW;
  /** The frozen reference for the KL penalty (own responses only); null without one. */
  reference: Transformer | null;
  /** Its capability history (Eq. 9); this step's accuracy is recorded into it. */
  tracker: CapabilityTracker;
  /** How it samples (its G, temperature, prompt template, …) and how responses are scored. */
  rollout: RolloutOptions;
  samplingRng: Rng;
  /** Learning rate of this step. */
  lr: number;
  /** Exponential-IS α (Eq. 12; 0 = off). */
  alpha: number;
  /** δ and δ_step of its foreign clip (Eqs. 13–14). */
  stepwise: StepwiseClip;
  /** Whether its mini-batches mix own and foreign samples or take the own ones first. */
  order: 'shuffled' | 'own-first';
}

/** The HACPO mechanisms; the naive-sharing baseline has them all off (and α = 0). */
export interface HacpoMechanisms {
  /** Capability-aware advantage baseline (Eqs. 6–8); off: the plain mean of all n·G rewards. */
  capabilityBaseline: boolean;
  /** Foreign advantages scaled by ω^(j,k) (Eq. 10); off: factor 1. */
  discrepancyCoefficient: boolean;
  /** How foreign responses enter the loss: HACPO's clip band (Eqs. 12–14), no band, or plain GSPO (naive). */
  foreign: ForeignObjective;
}

/** The run-wide settings of a collaborative step. */
export interface HacpoStepOptions {
  mechanisms: HacpoMechanisms;
  /** Optimizer mini-batches per epoch M over each learner's samples of all agents. */
  miniBatches: number;
  /** Passes over the step's samples E. */
  epochs: number;
  /** GSPO clip of own sequence ratios. */
  ownClip: ClipRange;
  aggregation: LossAggregation;
  /** KL to each learner's frozen reference on its own responses; absent = off. */
  kl?: { coef: number; estimator: KlEstimator };
  /** Leave responses cut at maxNewTokens out of the loss. */
  maskTruncated: boolean;
  /** Leave prompts whose n·G rewards are all equal out of the loss. */
  filterZeroVariance: boolean;
  /** Gradient-norm clip. */
  clip: number;
}

/** A learner's view of the step's responses (agent 0's rollouts, agent 1's, …), minus those it cannot train on. */
interface LearnerSamples {
  items: PromptResponse[];
  sequences: Omit<HacpoSequence, 'logProbs'>[];
  /** Index of each sample in the step's list of all responses (for rewards, generators and groups). */
  source: number[];
  /** Foreign responses left out: text the learner's tokenizer cannot encode, or nothing left to train on. */
  dropped: number;
}

/** True when a rollout ended on its generator's EOS (and so the learner's copy must end on the learner's). */
const stoppedByEos = (r: Rollout, eosId: number): boolean => !r.truncated && r.responseIds.at(-1) === eosId;

/**
 * Learner k's copy of every response: its own as sampled, the others' re-tokenized into its vocabulary after its own
 * rendering of the prompt (spec §6), each with the generator's pre-update mean log-prob over the generator's span.
 */
function learnerSamples(
  k: number,
  team: readonly Collaborator[],
  scored: readonly ScoredRollouts[],
  old: readonly number[][][],
): LearnerSamples {
  const learner = team[k]!.agent;
  const promptOf = new Map<number, number[]>();
  for (const r of scored[k]!.rollouts) promptOf.set(r.group, r.promptIds);
  const out: LearnerSamples = { items: [], sequences: [], source: [], dropped: 0 };
  let index = 0;
  scored.forEach((s, j) => {
    const generator = team[j]!.agent;
    s.rollouts.forEach((r, i) => {
      const oldLogProbs = old[j]![i]!;
      const at = index++;
      if (j === k) {
        out.source.push(at);
        out.items.push({ prompt: r.promptIds, response: r.responseIds });
        out.sequences.push({
          generatorOldMean: meanOf(oldLogProbs),
          advantage: 0,
          own: true,
          oldLogProbs,
          truncated: r.truncated,
        });
        return;
      }
      const prompt = promptOf.get(r.group)!;
      let mine;
      try {
        mine = retokenizeResponse(
          r.responseIds,
          stoppedByEos(r, generator.tokenizer.eosId),
          generator.tokenizer,
          learner.tokenizer,
          prompt,
        );
      } catch (e) {
        // A character-level learner has no id for a character outside its alphabet: that sample is not learnable.
        if (!(e instanceof UnencodableTextError)) throw e;
        out.dropped++;
        return;
      }
      if (mine.responseIds.length === 0) {
        out.dropped++;
        return;
      }
      out.source.push(at);
      out.items.push({ prompt, response: mine.responseIds });
      out.sequences.push({
        generatorOldMean: spanMean(oldLogProbs, mine.generatorSpan),
        advantage: 0,
        own: false,
        truncated: r.truncated,
      });
    });
  });
  return out;
}

/** The mini-batches of one learner: per epoch its samples shuffled together, or its own ones first. */
function learnerBatches(
  kept: readonly number[],
  own: (i: number) => boolean,
  c: Collaborator,
  o: HacpoStepOptions,
  rng: Rng,
): number[][] {
  const batches: number[][] = [];
  for (let epoch = 0; epoch < o.epochs && kept.length > 0; epoch++) {
    const order =
      c.order === 'shuffled'
        ? rng.shuffle([...kept])
        : [...rng.shuffle(kept.filter(own)), ...rng.shuffle(kept.filter((i) => !own(i)))];
    batches.push(...splitMiniBatches(order, o.miniBatches));
  }
  return batches;
}

/**
 * Runs one collaborative step: samples and scores every agent's rollouts, records each agent's accuracy in its
 * capability tracker, takes every generator's old log-probs, then updates the agents in order. Returns one result
 * per agent (its own rollouts and metrics).
 */
export async function hacpoStep(
  team: readonly Collaborator[],
  k: Kernels,
  problems: readonly Problem[],
  o: HacpoStepOptions,
  orderRng: Rng,
): Promise<StepResult[]> {
  if (team.length < 2) throw new Error(`a collaborative step needs at least 2 agents, got ${team.length}`);
  const t0 = performance.now();
  const scored: ScoredRollouts[] = [];
  for (const c of team) scored.push(await sampleAndScore(c.agent, k, problems, c.rollout, c.samplingRng));
  // Eq. 9: this step's batch mean reward enters the window before anyone updates.
  team.forEach((c, j) => c.tracker.record(scored[j]!.metrics.reward_mean!));
  const pHat = team.map((c) => c.tracker.estimate());
  const old = team.map((c, j) =>
    scoreResponses(
      c.agent.model,
      k,
      scored[j]!.rollouts.map((r) => ({ prompt: r.promptIds, response: r.responseIds })),
    ),
  );
  const rewards = scored.flatMap((s) => s.rewards);
  const generators = scored.flatMap((s, j) => s.rollouts.map(() => j));
  const groups = scored.flatMap((s) => s.rollouts.map((r) => r.group));
  const constant = constantGroups(rewards, groups);
  const samples = team.map((_, learner) => learnerSamples(learner, team, scored, old));
  const t1 = performance.now();

  return team.map((c, learner) => {
    const t2 = performance.now();
    const { items, sequences, source, dropped } = samples[learner]!;
    const omega = baselineRatios(pHat, learner);
    const coefficients = discrepancyCoefficients(pHat, learner);
    // The baseline uses every response's reward, including foreign ones this learner cannot train on.
    const adv = capabilityAwareBatchAdvantages(rewards, generators, groups, learner, omega, {
      capabilityAware: o.mechanisms.capabilityBaseline,
    });
    sequences.forEach((s, i) => {
      s.advantage = adv.advantages[source[i]!]!;
      s.coefficient = o.mechanisms.discrepancyCoefficient ? coefficients[generators[source[i]!]!]! : 1;
    });
    const ref = o.kl
      ? scoreResponses(
          c.reference ?? c.agent.model,
          k,
          items.filter((_, i) => sequences[i]!.own),
        )
      : [];
    let nextRef = 0;
    for (const s of sequences) if (s.own && o.kl) s.refLogProbs = ref[nextRef++]!;
    const kept = sequences.map((_, i) => i).filter((i) => !o.filterZeroVariance || !constant.has(groups[source[i]!]!));
    const batches = learnerBatches(kept, (i) => sequences[i]!.own, c, o, orderRng);
    const updates = runUpdates(
      c.agent.model,
      c.optimizer,
      k,
      items,
      batches,
      (batch, logProbs, update) => {
        const { loss, grad, stats } = hacpoLoss(
          batch.map((i, j) => ({ ...sequences[i]!, logProbs: logProbs[j]! })),
          {
            ownClip: o.ownClip,
            foreign: o.mechanisms.foreign,
            alpha: c.alpha,
            stepwise: c.stepwise,
            update,
            aggregation: o.aggregation,
            maskTruncated: o.maskTruncated,
            ...(o.kl ? { kl: o.kl } : {}),
          },
        );
        return { loss, grad, stats: lossMetrics(stats) };
      },
      { clip: o.clip, lr: c.lr },
    );
    const t3 = performance.now();
    const own = scored[learner]!;
    const metrics: StepMetrics = {
      ...own.metrics,
      p_hat: pHat[learner]!,
      ...Object.fromEntries(
        team.flatMap((other, j) => (j === learner ? [] : [[`omega_${other.agent.name}`, omega[j]!]])),
      ),
      zero_var_groups_frac: constant.size / problems.length,
      baseline_fallback_groups: adv.fallbackGroups,
      foreign_samples: sequences.filter((s) => !s.own).length,
      foreign_dropped: dropped,
      time_train_s: (t3 - t2) / 1e3,
      tokens_per_s: own.metrics.tokens! / ((t3 - t2 + (t1 - t0) / team.length) / 1e3),
      lr: c.lr,
      skipped_updates: updates.skippedUpdates,
      ...summarizeUpdates(updates.stats),
    };
    return {
      metrics,
      rollouts: own.rollouts,
      rewards: own.rewards,
      skippedUpdates: updates.skippedUpdates,
      updates: batches.length,
    };
  });
}

/** The per-update numbers of a HACPO loss under the names the run log and the report use. */
function lossMetrics(s: HacpoLossStats): Record<string, number> {
  return {
    own_ratio_mean: s.own.ratioMean,
    own_ratio_min: s.own.ratioMin,
    own_ratio_max: s.own.ratioMax,
    own_clip_frac: s.own.clipFracLow + s.own.clipFracHigh,
    foreign_ratio_mean: s.foreign.ratioMean,
    foreign_ratio_min: s.foreign.ratioMin,
    foreign_ratio_max: s.foreign.ratioMax,
    foreign_in_band_frac: s.foreign.inBandFrac,
    // Per mini-batch, so the stepwise tightening of the band (Eq. 14) shows in the log.
    foreign_in_band_frac_m: s.foreign.inBandFrac,
    approx_kl: s.approxKl,
    ...(Number.isNaN(s.kl) ? {} : { kl: s.kl }),
  };
}

/** The prompts whose rewards across all agents are all equal (no signal under any baseline). */
function constantGroups(rewards: readonly number[], groups: readonly number[]): Set<number> {
  const lo = new Map<number, number>();
  const hi = new Map<number, number>();
  groups.forEach((g, i) => {
    lo.set(g, Math.min(lo.get(g) ?? Infinity, rewards[i]!));
    hi.set(g, Math.max(hi.get(g) ?? -Infinity, rewards[i]!));
  });
  return new Set([...lo.keys()].filter((g) => lo.get(g) === hi.get(g)));
}
