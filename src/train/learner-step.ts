/**
 * One learner's update in a step, for every algorithm: take its view of the step's table, compute its advantages
 * (group-relative, HACRL Eq. 5, or capability-aware, Eqs. 6–9), leave out zero-variance groups if asked, and run its
 * mini-batches through the one policy loss (own responses: GRPO's or GSPO's surrogate; foreign ones: HACPO's).
 * A single-agent run is a team of one learner that does not share.
 */
import { performance } from 'node:perf_hooks';
import type { Kernels } from '../backend/kernels.js';
import {
  ADVANTAGE_ESTIMATORS,
  zeroVarianceGroups,
  type AdvantageEstimatorName,
  type AdvantageOutput,
} from '../algorithms/advantages.js';
import type { LossAggregation } from '../algorithms/aggregate.js';
import type { ClipRange } from '../algorithms/clipped-surrogate.js';
import {
  crossLogRatio,
  inBandFraction,
  RATIO_NORMALIZATIONS,
  responseCharacters,
  stepwiseLowerBound,
  type BaselineSettings,
  type RatioNormalization,
  type StepwiseClip,
} from '../algorithms/hacpo/index.js';
import type { KlEstimator } from '../algorithms/kl.js';
import { policyLoss, type PolicyLossStats } from '../algorithms/policy-loss.js';
import type { Sharing } from '../algorithms/recipes.js';
import { rolloutMismatch, type RolloutCorrection } from '../algorithms/rollout-correction.js';
import { SURROGATES, type SurrogateName } from '../algorithms/surrogates.js';
import type { PolicySequence } from '../algorithms/sequence.js';
import { scoreResponses } from '../model/response-log-probs.js';
import type { Transformer } from '../model/transformer.js';
import type { AdamW } from '../optim/adamw.js';
import type { Agent } from '../rollout/rollout.js';
import type { Rng } from '../util/rng.js';
import { mean } from '../util/stats.js';
import type { TeamMember } from './learners.js';
import { runUpdates, splitMiniBatches, summarizeUpdates } from './policy-updates.js';
import type { StepMetrics } from './sample-sources.js';
import {
  addLearnerTokens,
  generatorOldNormalized,
  generatorSpanLogProbs,
  learnerView,
  type LearnerView,
  type SampleRecord,
} from './sample-table.js';

/** The run-wide settings every learner's update follows (the algorithm's recipe with the config's overrides). */
export interface UpdateRecipe {
  /** The surrogate of own responses (SURROGATES). */
  surrogate: SurrogateName;
  sharing: Sharing;
  /** Own-response clip range. */
  clip: ClipRange;
  /** GRPO's dual clip c (null: off). */
  dualClip: number | null;
  aggregation: LossAggregation;
  /** The advantage estimator (ADVANTAGE_ESTIMATORS). */
  advantage: AdvantageEstimatorName;
  /** β·KL to the learner's reference on own responses; null: off. */
  kl: { coef: number; estimator: KlEstimator } | null;
  /** Entropy bonus β_H (0: off). */
  entropyCoef: number;
  maskTruncated: boolean;
  /** Leave out prompt groups whose rewards (over the learner's advantage group) are all equal. */
  filterZeroVariance: boolean;
  /** Mini-batches per epoch M and epochs E. */
  miniBatches: number;
  epochs: number;
  /** Largest global gradient norm (Infinity: off). */
  gradClip: number;
  /** HACPO switches (sharing 'hacpo' and 'naive'). */
  capabilityBaseline: boolean;
  discrepancyCoefficient: boolean;
  /** Which capability-aware baseline μ̂ (hacpo.baseline and its knobs); default the paper's Eq. 7. */
  baseline?: BaselineSettings;
  /** The surrogate of foreign responses (sharing 'hacpo' and 'naive'). */
  foreign: SurrogateName;
  /** Correction of own responses for the sampler/learner log-prob mismatch; absent: none. */
  rolloutCorrection?: RolloutCorrection;
  /** Recompute each transformer block in the backward instead of keeping its activations; default false. */
  activationCheckpointing?: boolean;
}

/** A policy being trained, with its optimizer, reference, this step's learning rate and its own HACPO knobs. */
export interface Learner {
  policy: Agent;
  optimizer: AdamW;
  /** The frozen reference for the KL penalty; null without one. */
  reference: Transformer | null;
  lr: number;
  /** Exponential-IS α (Eq. 12). */
  alpha: number;
  /** δ and δ_step of its foreign clip band (Eqs. 13–14). */
  stepwise: StepwiseClip;
  /** Its cross-agent ratios per token (Eq. 11) or per character of the response (spec §7); default 'token'. */
  ratioNormalization?: RatioNormalization;
  /** Whether its mini-batches mix own and foreign samples or take its own first. */
  order: 'shuffled' | 'own-first';
}

/** What one learner's update did. */
export interface LearnerResult {
  metrics: StepMetrics;
  /** Optimizer updates skipped because the loss or gradient was not finite, and attempted. */
  skippedUpdates: number;
  updates: number;
}

/**
 * The records whose prompt group carries signal: false for every record of a group whose rewards over `pool` (the
 * records the learner's advantages compare) are all equal. One flag per table record.
 */
export function groupsWithVariance(table: readonly SampleRecord[], pool: readonly number[]): boolean[] {
  const zero = zeroVarianceGroups(
    pool.map((i) => table[i]!.reward),
    { groupIds: pool.map((i) => table[i]!.group) },
  );
  const keepGroup = new Map<number, boolean>();
  pool.forEach((i, j) => keepGroup.set(table[i]!.group, zero.keep[j]!));
  return table.map((r) => keepGroup.get(r.group) ?? false);
}

/** The estimator's advantages for learner `k` over `pool`, per table record (NaN outside the pool). */
function advantages(
  table: readonly SampleRecord[],
  pool: readonly number[],
  team: readonly Learner[],
  k: number,
  recipe: UpdateRecipe,
  capability: readonly number[],
): AdvantageOutput & { values: Float64Array } {
  const index = new Map(team.map((l, j) => [l.policy.name, j]));
  // Under sharing the pool holds every agent's records: the baseline uses foreign rewards the learner cannot train on.
  const out = ADVANTAGE_ESTIMATORS[recipe.advantage].estimate({
    rewards: pool.map((i) => table[i]!.reward),
    groups: pool.map((i) => table[i]!.group),
    generators: pool.map((i) => index.get(table[i]!.generator)!),
    learner: k,
    capability,
    capabilityBaseline: recipe.capabilityBaseline,
    discrepancyCoefficient: recipe.discrepancyCoefficient,
    baseline: recipe.baseline,
  });
  const values = new Float64Array(table.length).fill(NaN);
  pool.forEach((i, j) => (values[i] = out.advantages[j]!));
  return { ...out, values };
}

/** An own record's sampling log-probs, for a rollout correction; an error naming the fix where none were recorded. */
function samplingLogProbs(r: SampleRecord): number[] {
  if (r.samplingLogProbs === undefined)
    throw new Error(
      `record ${r.id} of ${r.generator} has no sampling log-probs (its source does not record them), so the rollout ` +
        'correction cannot weigh it: set optim.rolloutCorrection: none',
    );
  return r.samplingLogProbs;
}

/** What learner `name` trains on in a step, and in which mini-batches. */
export interface LearnerBatches {
  view: LearnerView;
  /** The records its advantages compare (its own, or every agent's when sharing). */
  pool: number[];
  /** Per table record: whether its prompt group carries signal over `pool` (groupsWithVariance). */
  signal: boolean[];
  /** Its mini-batches, every epoch's, as table indices. */
  batches: number[][];
}

/**
 * The mini-batches of learner `name` in the step (per epoch its view shuffled together, or its own records first),
 * drawn from `rng`. The draws depend on the table alone, so a process that trains only some of the learners calls
 * this for the others to leave a shared `rng` where one process training all of them would (src/distributed).
 */
export function learnerBatches(
  table: readonly SampleRecord[],
  name: string,
  order: Learner['order'],
  recipe: UpdateRecipe,
  rng: Rng,
): LearnerBatches {
  const shared = recipe.sharing !== 'none';
  const view = learnerView(table, name, shared);
  const own = (i: number): boolean => table[i]!.generator === name;
  const pool = table.filter((r) => shared || r.generator === name).map((r) => r.id);
  const signal = groupsWithVariance(table, pool);
  const kept = view.records.filter((i) => !recipe.filterZeroVariance || signal[i]);
  const batches: number[][] = [];
  for (let epoch = 0; epoch < recipe.epochs && kept.length > 0; epoch++) {
    const shuffled =
      order === 'shuffled'
        ? rng.shuffle([...kept])
        : [...rng.shuffle(kept.filter(own)), ...rng.shuffle(kept.filter((i) => !own(i)))];
    batches.push(...splitMiniBatches(shuffled, recipe.miniBatches));
  }
  return { view, pool, signal, batches };
}

/** The per-update numbers of the loss under the names the run log and the report use. */
function lossMetrics(s: PolicyLossStats, sharing: boolean, kl: boolean): Record<string, number> {
  return {
    clip_frac_low: s.clipFracLow,
    clip_frac_high: s.clipFracHigh,
    ratio_mean: s.ratioMean,
    ratio_min: s.ratioMin,
    ratio_max: s.ratioMax,
    approx_kl: s.approxKl,
    ...(kl ? { kl: s.kl } : {}),
    ...(Number.isNaN(s.entropy) ? {} : { entropy: s.entropy }),
    ...(sharing
      ? {
          foreign_ratio_mean: s.foreign.ratioMean,
          foreign_ratio_min: s.foreign.ratioMin,
          foreign_ratio_max: s.foreign.ratioMax,
          foreign_in_band_frac: s.foreign.inBandFrac,
          // Per mini-batch, so the stepwise tightening of the band (Eq. 14) shows in the log.
          foreign_in_band_frac_m: s.foreign.inBandFrac,
        }
      : {}),
  };
}

/**
 * For each ratio normalisation, the share of the mini-batch's foreign responses whose ratio lies in Eq. 14's band at
 * this update, whichever form trains (spec §7: both are reported side by side). NaN without foreign responses.
 */
function inBandByForm(
  table: readonly SampleRecord[],
  batch: readonly number[],
  logProbs: readonly Float32Array[],
  learner: string,
  band: StepwiseClip,
  update: number,
): Record<string, number> {
  const foreign = batch.flatMap((i, j) =>
    table[i]!.generator === learner ? [] : [[table[i]!, logProbs[j]!] as const],
  );
  const lower = stepwiseLowerBound(band, update);
  return Object.fromEntries(
    RATIO_NORMALIZATIONS.map((mode) => [
      `foreign_in_band_frac_${mode}`,
      inBandFraction(
        foreign.map(([r, lp]) => crossLogRatio(lp, generatorSpanLogProbs(r, learner), r.text, mode)),
        lower,
      ),
    ]),
  );
}

/**
 * The update of every learner this process trains (`local`) at training step `step` on the step's complete `table`,
 * one result each in team order; a learner another process trains only draws its mini-batches, so the shared `rng`
 * moves as in one process. When the recipe shares rollouts, each learner first gets its tokens of every foreign
 * record and records this step's P_t (HACRL Eq. 9: the mean reward of its own records; an agent with no records in
 * the table — left out as late by the exchange — records none), so every learner sees the same P̂ of every agent.
 */
export function teamStep(
  table: SampleRecord[],
  members: readonly TeamMember[],
  recipe: UpdateRecipe,
  kernels: Kernels,
  rng: Rng,
  step: number,
): (LearnerResult & { seconds: number })[] {
  if (recipe.sharing !== 'none') {
    const byName = new Map(members.map((l) => [l.policy.name, l.policy]));
    for (const l of members) addLearnerTokens(table, l.policy, byName);
    // An agent left out as late (exchange onLate: continue) has no records this step and no accuracy to record.
    for (const l of members) {
      const own = table.filter((r) => r.generator === l.policy.name);
      if (own.length > 0) l.capability.record(mean(own.map((r) => r.reward)));
    }
  }
  const capability = members.map((l) => l.capability.estimate());
  const team: Learner[] = members.map((l) => ({ ...l, lr: l.lr(step) }));
  return team.flatMap((l, k) => {
    // A learner another process trains still draws its mini-batches, so the shared order stream moves as in one process.
    if (!members[k]!.local) {
      learnerBatches(table, l.policy.name, l.order, recipe, rng);
      return [];
    }
    const t0 = performance.now();
    const r = learnerStep(table, team, k, recipe, capability, kernels, rng);
    return [{ ...r, seconds: (performance.now() - t0) / 1e3 }];
  });
}

/**
 * Updates learner `k` of `team` on its view of the step's `table`; `capability` holds every learner's P̂ (Eq. 9)
 * when the recipe shares rollouts. Mini-batch order is drawn from `rng`.
 */
export function learnerStep(
  table: SampleRecord[],
  team: readonly Learner[],
  k: number,
  recipe: UpdateRecipe,
  capability: readonly number[],
  kernels: Kernels,
  rng: Rng,
): LearnerResult {
  const l = team[k]!;
  const lr = l.lr;
  const name = l.policy.name;
  const shared = recipe.sharing !== 'none';
  const { view, pool, signal, batches } = learnerBatches(table, name, l.order, recipe, rng);
  const isOwn = (i: number): boolean => table[i]!.generator === name;
  const adv = advantages(table, pool, team, k, recipe, capability);
  if (recipe.kl) {
    const own = view.records.filter(isOwn);
    const items = own.map((i) => ({
      prompt: table[i]!.tokens[name]!.prompt,
      response: table[i]!.tokens[name]!.response,
    }));
    const ref = scoreResponses(l.reference ?? l.policy.model, kernels, items);
    own.forEach((i, j) => (table[i]!.refLogProbs[name] = ref[j]!));
  }
  const generatorIndex = new Map(team.map((t, j) => [t.policy.name, j]));
  const perChar = l.ratioNormalization === 'char';
  const correction = recipe.rolloutCorrection;

  /** Record i as learner k's loss sequence, with its current log-probs. */
  const sequence = (i: number, logProbs: Float32Array): PolicySequence => {
    const r = table[i]!;
    const base = { logProbs, advantage: adv.values[i]!, truncated: r.truncated };
    if (r.generator === name)
      return {
        ...base,
        oldLogProbs: r.generatorLogProbs,
        ...(recipe.kl ? { refLogProbs: r.refLogProbs[name]! } : {}),
        ...(correction ? { samplingLogProbs: samplingLogProbs(r) } : {}),
      };
    const j = generatorIndex.get(r.generator)!;
    return {
      ...base,
      own: false,
      generatorOldMean: generatorOldNormalized(r, name, perChar ? 'char' : 'token'),
      ...(perChar ? { ratioCharacters: responseCharacters(r.text) } : {}),
      coefficient: adv.coefficients ? adv.coefficients[j]! : 1,
    };
  };
  const items = table.map((r) =>
    r.tokens[name] ? { prompt: r.tokens[name].prompt, response: r.tokens[name].response } : null,
  );
  const updates = runUpdates(
    l.policy.model,
    l.optimizer,
    kernels,
    (i) => items[i]!,
    batches,
    (batch, logProbs, entropy, update) => {
      const seqs = batch.map((i, j) => ({
        ...sequence(i, logProbs[j]!),
        ...(entropy ? { entropy: entropy[j]! } : {}),
      }));
      const r = policyLoss(seqs, {
        objective: {
          surrogate: recipe.surrogate,
          clip: recipe.clip,
          ...(recipe.dualClip ? { dualClip: recipe.dualClip } : {}),
        },
        ...(shared ? { foreign: { surrogate: recipe.foreign, alpha: l.alpha, stepwise: l.stepwise, update } } : {}),
        aggregation: recipe.aggregation,
        maskTruncated: recipe.maskTruncated,
        ...(recipe.kl ? { kl: recipe.kl } : {}),
        entropyCoef: recipe.entropyCoef,
        ...(correction ? { rolloutCorrection: correction } : {}),
      });
      const stats = lossMetrics(r.stats, shared, recipe.kl !== null);
      if (shared && SURROGATES[recipe.foreign].stepwise)
        Object.assign(stats, inBandByForm(table, batch, logProbs, name, l.stepwise, update));
      return { ...r, stats };
    },
    { clip: recipe.gradClip, lr, ...(recipe.activationCheckpointing ? { checkpointing: true } : {}) },
  );
  const omega = adv.omega;
  const sharingMetrics: StepMetrics = shared
    ? {
        p_hat: capability[k]!,
        ...(omega
          ? Object.fromEntries(team.flatMap((o, j) => (j === k ? [] : [[`omega_${o.policy.name}`, omega[j]!]])))
          : {}),
      }
    : {};
  // The mismatch is fixed for the step (both log-probs precede its updates): measured once over every own response.
  const mismatch = correction
    ? rolloutMismatch(
        view.records
          .filter(isOwn)
          .map((i) => ({ old: table[i]!.generatorLogProbs, sampler: samplingLogProbs(table[i]!) })),
        correction,
      )
    : null;
  const groupCount = new Set(pool.map((i) => table[i]!.group)).size;
  const zeroGroups = new Set(pool.filter((i) => !signal[i]).map((i) => table[i]!.group)).size;
  return {
    metrics: {
      ...sharingMetrics,
      zero_var_groups_frac: groupCount === 0 ? 0 : zeroGroups / groupCount,
      ...(shared
        ? {
            baseline_fallback_groups: adv.fallbackGroups,
            foreign_samples: view.records.filter((i) => !isOwn(i)).length,
            foreign_dropped: view.dropped,
          }
        : {}),
      ...(mismatch
        ? {
            rollout_kl: mismatch.kl,
            rollout_ratio_max: mismatch.ratioMax,
            rollout_corrected_frac: mismatch.correctedFrac,
          }
        : {}),
      lr,
      skipped_updates: updates.skippedUpdates,
      ...summarizeUpdates(updates.stats),
    },
    skippedUpdates: updates.skippedUpdates,
    updates: batches.length,
  };
}
