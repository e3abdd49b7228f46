/**
 * HACPO's agent-capability-aware advantage (HACRL Eqs. 6–9, spec §2). For learner k and one prompt, the group is
 * all n·G responses of all agents; each learner gets its own baseline μ̂^(k), so the same response has a different
 * advantage for each learner.
 */
import { groupIsConstant, groupMean, groupMembers, groupStd } from '../grouping.js';
import {
  type BaselineContext,
  type BaselineSettings,
  DEFAULT_BASELINE,
  blendParts,
  blendWeight,
  groupBaseline,
  paperBaseline,
  validateBaseline,
} from './baseline.js';

/** Options of the capability-aware advantage. */
export interface CapabilityAdvantageOptions {
  /** Default true; false: μ̂ is the plain mean of the raw rewards of all n·G responses (naive sharing, ablation). */
  capabilityAware?: boolean;
  /** Added to the joint std before dividing; default 1e-6 (the authors' value). */
  epsilon?: number;
  /** Which μ̂ (baseline.ts); default DEFAULT_BASELINE, the paper's Eq. 7. */
  baseline?: BaselineSettings;
  /** Every agent's P̂ (Eq. 9; NaN before any step); needed by the 'per-question' baseline, default all NaN. */
  capability?: readonly number[];
  /**
   * Default false: a group without the learner's responses is an error. True (agents that do not wait for each
   * other, whose partners answer other steps' prompts): such a group takes the partner-only baseline (Eq. 7′,
   * partnerOnlyBaseline).
   */
  partnerOnly?: boolean;
}

/** The advantages of one prompt's group for one learner, with what was used to compute them. */
export interface CapabilityAdvantageResult {
  /** A_i^(k) for every response of the group, own and foreign, in input order. */
  advantages: Float64Array;
  /** The baseline μ̂ actually used; in a constant group, the shared reward (any baseline gives A = 0 there). */
  baseline: number;
  /** True when μ̂ of Eq. 7 exceeded the group's largest raw reward and the learner's own mean was used instead. */
  fallback: boolean;
  /** True when all raw rewards of the group are equal, so every A is exactly 0. */
  constant: boolean;
}

/** Advantages of a whole batch for one learner, and how many prompt groups took each edge case. */
export interface CapabilityBatchAdvantages {
  /** A_i^(k) per response, in input order. */
  advantages: Float64Array;
  /** Groups whose μ̂ fell back to the learner's own mean. */
  fallbackGroups: number;
  /** Groups whose raw rewards are all equal (all A = 0). */
  constantGroups: number;
}

/** The options with defaults filled in. */
interface Resolved {
  capabilityAware: boolean;
  epsilon: number;
  baseline: BaselineSettings;
  capability: readonly number[] | undefined;
  partnerOnly: boolean;
}

/** Fills in defaults and validates. */
function resolve(options: CapabilityAdvantageOptions): Resolved {
  const epsilon = options.epsilon ?? 1e-6;
  if (!(epsilon >= 0)) throw new Error(`advantage epsilon must be ≥ 0, got ${epsilon}`);
  const baseline = options.baseline ?? DEFAULT_BASELINE;
  validateBaseline(baseline);
  return {
    capabilityAware: options.capabilityAware ?? true,
    epsilon,
    baseline,
    capability: options.capability,
    partnerOnly: options.partnerOnly ?? false,
  };
}

/**
 * Throws unless rewards and generators have one entry per response, every generator indexes `omega`, every ω is
 * finite and > 0, and ω^(k,k) = 1 (a learner compared with itself).
 */
function validate(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  learner: number,
  omega: ArrayLike<number>,
): void {
  if (generators.length !== rewards.length) {
    throw new Error(`${generators.length} generators for ${rewards.length} rewards: pass the agent of each response`);
  }
  if (!Number.isInteger(learner) || learner < 0 || learner >= omega.length) {
    throw new Error(`learner ${learner} is not one of the ${omega.length} agents that omega has a ratio for`);
  }
  for (let j = 0; j < omega.length; j++) {
    if (!(Number.isFinite(omega[j]) && omega[j]! > 0)) {
      throw new Error(`omega[${j}] is ${omega[j]}; a capability ratio must be finite and > 0`);
    }
  }
  if (omega[learner] !== 1) {
    throw new Error(`omega[${learner}] (the learner's own ratio ω^(k,k)) must be 1, got ${omega[learner]}`);
  }
  for (let i = 0; i < generators.length; i++) {
    const g = generators[i]!;
    if (!Number.isInteger(g) || g < 0 || g >= omega.length) {
      throw new Error(`response ${i} has generator ${g}, not one of the ${omega.length} agents of omega`);
    }
  }
}

/** The response indices of the learner among `members`; throws when there are none unless `partnerOnly`. */
function ownMembers(
  generators: ArrayLike<number>,
  members: readonly number[],
  learner: number,
  where: string,
  partnerOnly = false,
): number[] {
  const own = members.filter((i) => generators[i] === learner);
  if (own.length === 0 && !partnerOnly) {
    throw new Error(
      `${where} has no response of learner ${learner}: the capability-aware advantage needs the learner's own ` +
        `responses in every prompt group (its fallback baseline is their mean)`,
    );
  }
  return own;
}

/**
 * μ̂^(k) = (1/nG) Σ_j Σ_i ω^(k,j)·R(y_i^(j)) over one prompt's group (HACRL Eq. 7), without the fallback of
 * capabilityAwareAdvantages. omega[j] = ω^(k,j) and omega[learner] = 1. Unbiased for agent k's expected reward when
 * ω is the true capability ratio (Theorem 4.1).
 */
export function capabilityBaseline(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  learner: number,
  omega: ArrayLike<number>,
): number {
  validate(rewards, generators, learner, omega);
  const members = Array.from({ length: rewards.length }, (_, i) => i);
  ownMembers(generators, members, learner, 'the group');
  return paperBaseline(rewards, generators, omega, members);
}

/**
 * Eq. 7′, the partner-only baseline of a prompt the learner holds no answer to: μ̂^(k) = (1/|F|) Σ_{i∈F} ω^(k,g(i))·R_i
 * over the foreign responses F of the group, each generator g(i) with the P̂ it had when it sampled them — Eq. 7 with
 * the learner's own terms left out, so still an estimate of the learner's expected reward on the prompt (Theorem 4.1
 * holds term by term). When it exceeds every reward of the group the plain mean of F stands in for Eq. 7's fallback
 * to the learner's own mean, which does not exist here.
 */
export function partnerOnlyBaseline(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  omega: ArrayLike<number>,
  members: readonly number[],
): { baseline: number; fallback: boolean } {
  const scaled = paperBaseline(rewards, generators, omega, members);
  let max = -Infinity;
  for (const i of members) max = Math.max(max, rewards[i]!);
  return scaled > max
    ? { baseline: groupMean(rewards, members), fallback: true }
    : { baseline: scaled, fallback: false };
}

/** Writes the advantages of the responses at `members` (one prompt's group) into `out`; returns the edge cases. */
function groupAdvantagesInto(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  learner: number,
  omega: ArrayLike<number>,
  members: readonly number[],
  o: Resolved,
  beta: number,
  out: Float64Array,
  where: string,
): Omit<CapabilityAdvantageResult, 'advantages'> {
  const own = ownMembers(generators, members, learner, where, o.partnerOnly);
  // Checked first: a constant group carries no signal whatever the baseline, and the exact check avoids ±1e-11 noise
  // from rounding in μ̂ (see advantages.ts).
  if (groupIsConstant(rewards, members)) {
    for (const i of members) out[i] = 0;
    return { baseline: rewards[members[0]!]!, fallback: false, constant: true };
  }
  const context: BaselineContext = {
    settings: o.baseline,
    learner,
    omega,
    capability: o.capability ?? Array.from(omega, () => NaN),
    beta,
  };
  const scale = groupStd(rewards, members) + o.epsilon;
  if (own.length === 0) {
    const p = o.capabilityAware
      ? partnerOnlyBaseline(rewards, generators, omega, members)
      : { baseline: groupMean(rewards, members), fallback: false };
    for (const i of members) out[i] = (rewards[i]! - p.baseline) / scale;
    return { ...p, constant: false };
  }
  let baseline = o.capabilityAware ? groupBaseline(rewards, generators, members, context) : groupMean(rewards, members);
  let max = -Infinity;
  for (const i of members) max = Math.max(max, rewards[i]!);
  // ω > 1 can push μ̂ above every reward in the group, which would make every advantage negative; the authors then
  // use the learner's own mean (spec §2).
  const fallback = baseline > max;
  if (fallback) baseline = groupMean(rewards, own);
  for (const i of members) out[i] = (rewards[i]! - baseline) / scale;
  return { baseline, fallback, constant: false };
}

/** The blend baseline's β fitted over this step's groups (blendWeight); 0 for every other baseline. */
function stepBlendWeight(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  learner: number,
  omega: ArrayLike<number>,
  groups: readonly (readonly number[])[],
  o: Resolved,
): number {
  if (!o.capabilityAware || o.baseline.kind !== 'blend') return 0;
  return blendWeight(groups.map((members) => blendParts(rewards, generators, learner, omega, members)));
}

/**
 * A_i^(k) = (R_i − μ̂^(k)) / (σ_joint + ε) for every response of one prompt's group, own and foreign alike, with the
 * raw reward R_i (HACRL Eq. 6); μ̂ from Eq. 7 with omega[j] = ω^(k,j) (Eq. 8; omega[learner] = 1), σ_joint the
 * unbiased std of the raw rewards of all n·G responses. All rewards equal → every A = 0; μ̂ above the largest raw
 * reward → μ̂ = mean of the learner's own rewards. `generators[i]` is the agent that wrote response i. Throws when
 * the arrays differ in length or the learner has no response in the group.
 */
export function capabilityAwareAdvantages(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  learner: number,
  omega: ArrayLike<number>,
  options: CapabilityAdvantageOptions = {},
): CapabilityAdvantageResult {
  const o = resolve(options);
  validate(rewards, generators, learner, omega);
  const advantages = new Float64Array(rewards.length);
  const members = Array.from({ length: rewards.length }, (_, i) => i);
  const beta = stepBlendWeight(rewards, generators, learner, omega, [members], o);
  const r = groupAdvantagesInto(rewards, generators, learner, omega, members, o, beta, advantages, 'the group');
  return { advantages, ...r };
}

/**
 * capabilityAwareAdvantages for a whole batch: `groups[i]` is the prompt of response i (any ids, any order); each
 * prompt's responses of all agents form one group (HACRL Eqs. 6–9 per prompt). Throws on a prompt with one response
 * or with none of the learner's.
 */
export function capabilityAwareBatchAdvantages(
  rewards: ArrayLike<number>,
  generators: ArrayLike<number>,
  groups: ArrayLike<number>,
  learner: number,
  omega: ArrayLike<number>,
  options: CapabilityAdvantageOptions = {},
): CapabilityBatchAdvantages {
  const o = resolve(options);
  validate(rewards, generators, learner, omega);
  const advantages = new Float64Array(rewards.length);
  let fallbackGroups = 0;
  let constantGroups = 0;
  const all = groupMembers(rewards.length, { groupIds: groups });
  const beta = stepBlendWeight(rewards, generators, learner, omega, all, o);
  for (const [g, members] of all.entries()) {
    const where = `prompt group ${g} (id ${groups[members[0]!]})`;
    const r = groupAdvantagesInto(rewards, generators, learner, omega, members, o, beta, advantages, where);
    if (r.fallback) fallbackGroups++;
    if (r.constant) constantGroups++;
  }
  return { advantages, fallbackGroups, constantGroups };
}
