/**
 * One learner's update in a step, for every algorithm: given its view of the step's table, compute its advantages
 * (group-relative, HACRL Eq. 5, or capability-aware, Eqs. 6–9), leave out zero-variance groups if asked, and run its
 * mini-batches through the one policy loss (own responses: GRPO's or GSPO's surrogate; foreign ones: HACPO's).
 * A single-agent run is a team of one learner that does not share; team-step.ts runs the whole team.
 */
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
  responseCharacters,
  type BaselineSettings,
  type RatioNormalization,
  type StepwiseClip,
} from '../algorithms/hacpo/index.js';
import type { KlEstimator } from '../algorithms/kl.js';
import { policyLoss, type ForeignTerms, type PolicyLossOptions } from '../algorithms/policy-loss.js';
import type { Sharing } from '../algorithms/recipes.js';
import { rolloutMismatch, type RolloutCorrection } from '../algorithms/rollout-correction.js';
import { SURROGATES, type SurrogateName } from '../algorithms/surrogates.js';
import type { PolicySequence } from '../algorithms/sequence.js';
import { scoreResponses } from '../model/response-log-probs.js';
import type { Transformer } from '../model/transformer.js';
import type { AdamW } from '../optim/adamw.js';
import type { Agent } from '../rollout/rollout.js';
import type { Rng } from '../util/rng.js';
import { inBandByForm, learnerMetrics, lossMetrics } from './learner-metrics.js';
import { runUpdates, splitMiniBatches, type MiniBatchLoss } from './policy-updates.js';
import type { StepMetrics } from './sample-sources.js';
import { generatorOldNormalized, type LearnerView, type SampleRecord } from './sample-table.js';

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

/**
 * Where the partner records of an asynchronous step come from (src/distributed/async-exchange.ts): each (agent, step)
 * version of a partner is a generator of its own, with the P̂ (Eq. 9) its agent had when it sampled them, so ω
 * (Eqs. 8, 10) follows the generator's version rather than the partner's latest.
 */
export interface PartnerVersions {
  /** Per table record: the index of its version in `capability`, or null for this process's own records. */
  slot: readonly (number | null)[];
  /** Each version's P̂ when its agent sampled it. */
  capability: readonly number[];
  /** Per partner-only group (its learner has no answer to the prompt): the learner's rendering of the prompt. */
  prompts: ReadonlyMap<number, number[]>;
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
  k: number,
  recipe: UpdateRecipe,
  capability: readonly number[],
  slots: readonly number[],
  partnerOnly: boolean,
): AdvantageOutput & { values: Float64Array } {
  // Under sharing the pool holds every agent's records: the baseline uses foreign rewards the learner cannot train on.
  const out = ADVANTAGE_ESTIMATORS[recipe.advantage].estimate({
    rewards: pool.map((i) => table[i]!.reward),
    groups: pool.map((i) => table[i]!.group),
    generators: pool.map((i) => slots[i]!),
    learner: k,
    capability,
    capabilityBaseline: recipe.capabilityBaseline,
    discrepancyCoefficient: recipe.discrepancyCoefficient,
    baseline: recipe.baseline,
    partnerOnly,
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

/** What a learner trains on in a step, and in which mini-batches. */
export interface LearnerBatches {
  /** The records its advantages compare (its own, or every agent's when sharing). */
  pool: number[];
  /** Per table record: whether its prompt group carries signal over `pool` (groupsWithVariance). */
  signal: boolean[];
  /** Its mini-batches, every epoch's, as table indices. */
  batches: number[][];
}

/**
 * The mini-batches of learner `name` over its `view` of the step (per epoch the view shuffled together, or its own
 * records first), drawn from `rng`. The draws depend on the table alone, so a process that trains only some of the
 * learners calls this for the others to leave a shared `rng` where one process training all of them would
 * (src/distributed).
 */
export function learnerBatches(
  table: readonly SampleRecord[],
  view: LearnerView,
  name: string,
  order: Learner['order'],
  recipe: UpdateRecipe,
  rng: Rng,
): LearnerBatches {
  const shared = recipe.sharing !== 'none';
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
  return { pool, signal, batches };
}

/**
 * The loss settings of learner `l` under `recipe`, built once per step: the own terms, and the foreign terms (null
 * without sharing) that take each update's index for their band.
 */
function lossOptions(
  recipe: UpdateRecipe,
  l: Learner,
): { own: Omit<PolicyLossOptions, 'foreign'>; foreign: Omit<ForeignTerms, 'update'> | null } {
  return {
    own: {
      objective: {
        surrogate: recipe.surrogate,
        clip: recipe.clip,
        ...(recipe.dualClip ? { dualClip: recipe.dualClip } : {}),
      },
      aggregation: recipe.aggregation,
      maskTruncated: recipe.maskTruncated,
      ...(recipe.kl ? { kl: recipe.kl } : {}),
      entropyCoef: recipe.entropyCoef,
      ...(recipe.rolloutCorrection ? { rolloutCorrection: recipe.rolloutCorrection } : {}),
    },
    foreign: recipe.sharing !== 'none' ? { surrogate: recipe.foreign, alpha: l.alpha, stepwise: l.stepwise } : null,
  };
}

/**
 * Record i of the table as learner `l`'s loss sequence given its current log-probs: an own response with its old,
 * reference and sampling log-probs as the recipe needs them; a foreign one with the generator's side of Eq. 11 and
 * its ω (Eq. 10).
 */
function sequenceMaker(
  table: readonly SampleRecord[],
  view: LearnerView,
  l: Learner,
  slots: readonly number[],
  adv: AdvantageOutput & { values: Float64Array },
  ref: ReadonlyMap<number, number[]> | null,
  correction: boolean,
): (i: number, logProbs: Float32Array) => PolicySequence {
  const perChar = l.ratioNormalization === 'char';
  return (i, logProbs) => {
    const r = table[i]!;
    const base = { logProbs, advantage: adv.values[i]!, truncated: r.truncated };
    if (r.generator === l.policy.name)
      return {
        ...base,
        oldLogProbs: r.generatorLogProbs,
        ...(ref ? { refLogProbs: ref.get(i)! } : {}),
        ...(correction ? { samplingLogProbs: samplingLogProbs(r) } : {}),
      };
    return {
      ...base,
      own: false,
      generatorOldMean: generatorOldNormalized(r, view.tokens[i]!, perChar ? 'char' : 'token'),
      ...(perChar ? { ratioCharacters: responseCharacters(r.text) } : {}),
      coefficient: adv.coefficients ? adv.coefficients[slots[i]!]! : 1,
    };
  };
}

/**
 * Updates learner `l` on its `view` of the step's `table`; `team` names every agent in team order (`l` among them),
 * `capability` holds every agent's P̂ (Eq. 9) in that order when the recipe shares rollouts, and `versions` the
 * partner versions of an asynchronous step (default none: every record's generator is its agent as it is now).
 * Mini-batch order is drawn from `rng`.
 */
export function learnerStep(
  table: readonly SampleRecord[],
  view: LearnerView,
  l: Learner,
  team: readonly string[],
  recipe: UpdateRecipe,
  capability: readonly number[],
  kernels: Kernels,
  rng: Rng,
  versions?: PartnerVersions,
): LearnerResult {
  const name = l.policy.name;
  const k = team.indexOf(name);
  if (k < 0) throw new Error(`learner ${name} is not in its team (${team.join(', ')})`);
  const shared = recipe.sharing !== 'none';
  const { pool, signal, batches } = learnerBatches(table, view, name, l.order, recipe, rng);
  const own = view.records.filter((i) => table[i]!.generator === name);
  const slots = generatorSlots(table, team, versions);
  const everyCapability = versions ? [...capability, ...versions.capability] : capability;
  const adv = advantages(table, pool, k, recipe, everyCapability, slots, versions !== undefined);
  const ref = recipe.kl ? referenceLogProbs(l, view, own, kernels) : null;
  const correction = recipe.rolloutCorrection;
  const sequence = sequenceMaker(table, view, l, slots, adv, ref, correction !== undefined);
  const { own: ownTerms, foreign } = lossOptions(recipe, l);
  const stepwiseForeign = shared && SURROGATES[recipe.foreign].stepwise;
  const loss: MiniBatchLoss = (batch, logProbs, entropy, update) => {
    const seqs = batch.map((i, j) => ({ ...sequence(i, logProbs[j]!), ...(entropy ? { entropy: entropy[j]! } : {}) }));
    const r = policyLoss(seqs, foreign ? { ...ownTerms, foreign: { ...foreign, update } } : ownTerms);
    const stats = lossMetrics(r.stats, shared, recipe.kl !== null);
    if (stepwiseForeign)
      Object.assign(
        stats,
        inBandByForm(table, view, batch, logProbs, name, l.stepwise, update, l.ratioNormalization ?? 'token'),
      );
    return { ...r, stats };
  };
  const updates = runUpdates(l.policy.model, l.optimizer, kernels, (i) => view.tokens[i]!, batches, loss, {
    clip: recipe.gradClip,
    lr: l.lr,
    ...(recipe.activationCheckpointing ? { checkpointing: true } : {}),
  });
  // The mismatch is fixed for the step (both log-probs precede its updates): measured once over every own response.
  const mismatch = correction
    ? rolloutMismatch(
        own.map((i) => ({ old: table[i]!.generatorLogProbs, sampler: samplingLogProbs(table[i]!) })),
        correction,
      )
    : null;
  const metrics = learnerMetrics({
    shared,
    pHat: capability[k]!,
    advantages: adv,
    partnerSlots: partnerSlots(table, pool, slots, team, k),
    groups: new Set(pool.map((i) => table[i]!.group)).size,
    zeroVarianceGroups: new Set(pool.filter((i) => !signal[i]).map((i) => table[i]!.group)).size,
    foreignSamples: view.records.length - own.length,
    foreignDropped: view.dropped,
    mismatch,
    lr: l.lr,
    updates,
  });
  return { metrics, skippedUpdates: updates.skippedUpdates, updates: batches.length };
}

/**
 * Per partner of learner `k` (team order), the distinct generator slots of its records in `pool`; a partner with none
 * there keeps its team index (a lockstep step reports ω for every partner, as the estimator sees it).
 */
export function partnerSlots(
  table: readonly SampleRecord[],
  pool: readonly number[],
  slots: readonly number[],
  team: readonly string[],
  k: number,
): Map<string, number[]> {
  const out = new Map(team.flatMap((t, j) => (j === k ? [] : [[t, new Set<number>()] as const])));
  for (const i of pool) out.get(table[i]!.generator)?.add(slots[i]!);
  return new Map([...out].map(([t, s]) => [t, s.size === 0 ? [team.indexOf(t)] : [...s].sort((a, b) => a - b)]));
}

/**
 * Per table record, the generator index the advantage and the loss see: its agent's team index, or for a partner
 * version of an asynchronous step the team's size plus the version's index (PartnerVersions).
 */
export function generatorSlots(
  table: readonly SampleRecord[],
  team: readonly string[],
  versions?: PartnerVersions,
): number[] {
  const index = new Map(team.map((t, j) => [t, j]));
  return table.map((r, i) => {
    const v = versions?.slot[i];
    return v === undefined || v === null ? index.get(r.generator)! : team.length + v;
  });
}

/** The frozen reference's log-probs of the learner's own records (its policy's when it keeps no reference). */
function referenceLogProbs(
  l: Learner,
  view: LearnerView,
  own: readonly number[],
  kernels: Kernels,
): Map<number, number[]> {
  const ref = scoreResponses(
    l.reference ?? l.policy.model,
    kernels,
    own.map((i) => view.tokens[i]!),
  );
  return new Map(own.map((i, j) => [i, ref[j]!]));
}
