/**
 * The numbers a learner's update reports, under the names the run log and the report use: per update, the loss's
 * statistics (and, with a stepwise foreign band, the in-band share under each ratio normalisation); per step, what
 * its view held, how its advantages fell back, the rollout mismatch and the summary of its updates.
 */
import type { AdvantageOutput } from '../algorithms/advantages.js';
import {
  crossLogRatio,
  inBandFraction,
  RATIO_NORMALIZATIONS,
  stepwiseLowerBound,
  type RatioNormalization,
  type StepwiseClip,
} from '../algorithms/hacpo/index.js';
import type { PolicyLossStats } from '../algorithms/policy-loss.js';
import type { RolloutMismatch } from '../algorithms/rollout-correction.js';
import { summarizeUpdates, type UpdateResult } from './policy-updates.js';
import type { StepMetrics } from './sample-sources.js';
import { generatorSpanLogProbs, type LearnerView, type SampleRecord } from './sample-table.js';

/** The per-update numbers of the loss. */
export function lossMetrics(s: PolicyLossStats, sharing: boolean, kl: boolean): Record<string, number> {
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
 * this update, whichever form trains (spec §7: both are reported side by side), NaN without foreign responses; and
 * per partner P in the batch the same share in the form that trains (`trained`), `partner_P_in_band_frac`.
 */
export function inBandByForm(
  table: readonly SampleRecord[],
  view: LearnerView,
  batch: readonly number[],
  logProbs: readonly Float32Array[],
  learner: string,
  band: StepwiseClip,
  update: number,
  trained: RatioNormalization,
): Record<string, number> {
  const foreign = batch.flatMap((i, j) =>
    table[i]!.generator === learner ? [] : [[table[i]!, view.tokens[i]!, logProbs[j]!] as const],
  );
  const lower = stepwiseLowerBound(band, update);
  const inBand = (of: typeof foreign, mode: RatioNormalization): number =>
    inBandFraction(
      of.map(([r, mine, lp]) => crossLogRatio(lp, generatorSpanLogProbs(r, mine), r.text, mode)),
      lower,
    );
  const partners = [...new Set(foreign.map(([r]) => r.generator))];
  return Object.fromEntries([
    ...RATIO_NORMALIZATIONS.map((mode) => [`foreign_in_band_frac_${mode}`, inBand(foreign, mode)]),
    ...partners.map((p) => [
      `partner_${p}_in_band_frac`,
      inBand(
        foreign.filter(([r]) => r.generator === p),
        trained,
      ),
    ]),
  ]);
}

/** What a learner's step metrics are made of. */
export interface LearnerStepFacts {
  /** Whether rollouts are shared (then P̂, ω and the foreign counts are reported). */
  shared: boolean;
  /** Its P̂ (Eq. 9) and the advantage estimator's output (ω per generator slot, baseline fallbacks). */
  pHat: number;
  advantages: AdvantageOutput;
  /** Per partner name, the generator slots of its records this step (its team index; in an asynchronous step, its versions'). */
  partnerSlots: ReadonlyMap<string, readonly number[]>;
  /** Prompt groups its advantages compared, and how many of them had no reward variance. */
  groups: number;
  zeroVarianceGroups: number;
  /** Foreign records it trained on and could not train on. */
  foreignSamples: number;
  foreignDropped: number;
  /** The sampler/learner mismatch of its own responses under a rollout correction; null without one. */
  mismatch: RolloutMismatch | null;
  lr: number;
  updates: UpdateResult;
}

/** A learner's metrics for the step. */
export function learnerMetrics(f: LearnerStepFacts): StepMetrics {
  const omega = f.advantages.omega;
  // A partner's ω (Eq. 8) as its records met it: in an asynchronous step the mean over the versions used, whose P̂
  // is what each was sampled at (the partner's own team slot has no records there and would read 1).
  const mean = (slots: readonly number[]) => slots.reduce((sum, s) => sum + omega![s]!, 0) / slots.length;
  return {
    ...(f.shared
      ? {
          p_hat: f.pHat,
          ...(omega
            ? Object.fromEntries([...f.partnerSlots].map(([name, slots]) => [`omega_${name}`, mean(slots)]))
            : {}),
        }
      : {}),
    zero_var_groups_frac: f.groups === 0 ? 0 : f.zeroVarianceGroups / f.groups,
    ...(f.shared
      ? {
          baseline_fallback_groups: f.advantages.fallbackGroups,
          foreign_samples: f.foreignSamples,
          foreign_dropped: f.foreignDropped,
        }
      : {}),
    ...(f.mismatch
      ? {
          rollout_kl: f.mismatch.kl,
          rollout_ratio_max: f.mismatch.ratioMax,
          rollout_corrected_frac: f.mismatch.correctedFrac,
        }
      : {}),
    lr: f.lr,
    skipped_updates: f.updates.skippedUpdates,
    ...summarizeUpdates(f.updates.stats),
  };
}
