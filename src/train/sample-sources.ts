/**
 * Sources of samples: each fills the step's table (sample-table.ts) with records, validates the policies it samples
 * from, and gives the rows of samples.jsonl. `RolloutSource` samples G single-turn responses per prompt from each
 * role's policy, scores them and takes the generator's pre-update log-probs — before any learner updates, so every
 * learner sees the same snapshot. A multi-turn workflow (workflow-source.ts) is the other source, with its own roles
 * and episodes; the trainer sees only this interface.
 */
import { performance } from 'node:perf_hooks';
import type { Kernels } from '../backend/kernels.js';
import type { SamplingOptions } from '../model/generate.js';
import { scoreResponses } from '../model/response-log-probs.js';
import { scoreSamples, type WeightedReward } from '../rewards/reward.js';
import { sampleRollouts, type Agent } from '../rollout/rollout.js';
import type { Problem } from '../tasks/problem.js';
import { renderPrompt, type PromptOptions } from '../tasks/prompt.js';
import { extractAnswer } from '../rewards/extract.js';
import type { DataCursor } from '../run/train-state.js';
import type { OldLogProbSource } from '../algorithms/rollout-correction.js';
import { Rng } from '../util/rng.js';
import { mean, std } from '../util/stats.js';
import { rewardPartMeans } from './reward-metrics.js';
import type { SampleRecord } from './sample-table.js';
import type { PhaseStart } from './step-watch.js';
import {
  validateAgent,
  type ValidationMetrics,
  type ValidationOptions,
  type ValidationSet,
  type ValidationSettings,
} from './validation.js';

/** Metrics by name (the names the run log and the report use). */
export type StepMetrics = Record<string, number>;

/** What a source gets to produce one step's samples. */
export interface StepInputs {
  k: Kernels;
  /** The step's index (from 0): what a source draws its prompts or instances for. */
  step: number;
  /** Names each phase for the live progress line as it starts; default none. */
  phase?: PhaseStart;
}

/** One validation's metric fields, the policies they belong to, and the name the console shows them under. */
export interface Validation {
  label: string;
  policies: string[];
  metrics: ValidationMetrics;
  /**
   * Event counts of the same validation (not rates, so not under `val/`): written beside `metrics` for the same
   * policies, not printed; e.g. a workflow's sandbox outcomes per role. Default none.
   */
  counts?: Record<string, number>;
}

/** One row of samples.jsonl. */
export type SampleLogRow = { step: number } & Record<string, unknown>;

/** A producer of records for the step's table. */
export interface SampleSource {
  /**
   * Appends this step's records to `table` (ids continuing its numbering, episode ids unique in the step) and returns
   * metrics of what it produced per generating policy (rewards, accuracy, lengths, timings).
   */
  collect(step: StepInputs, table: SampleRecord[]): Promise<Map<string, StepMetrics>>;
  /**
   * Validates the policies as they are now on held-out data, `set` saying how much and how; [] when it has none.
   * `phase` names each agent's validation for the live progress line; default none.
   */
  validate(set: ValidationOptions, phase?: PhaseStart): Promise<Validation[]>;
  /** The samples.jsonl rows of the last collected step, stamped `step` (1-based, as in metrics.jsonl). */
  logRows(step: number): SampleLogRow[];
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
  /** How the policy is prompted and sampled when validated. */
  validation: ValidationSettings;
}

/** The permutation of the training set used in `epoch`: a function of the seed alone, so a resume needs no state. */
function epochOrder(n: number, seed: number, epoch: number): number[] {
  return new Rng(seed * 1_000_003 + epoch).shuffle(Array.from({ length: n }, (_, i) => i));
}

/** The training problems in a seeded order per epoch, read from a cursor that a checkpoint saves. */
export class ProblemStream {
  /** `cursor` is advanced in place (it is the train state's). */
  constructor(
    private readonly problems: readonly Problem[],
    private readonly seed: number,
    private readonly cursor: DataCursor,
  ) {}

  /** The next `count` problems (crossing into the next epoch when needed). */
  next(count: number): Problem[] {
    const out: Problem[] = [];
    const c = this.cursor;
    let order = epochOrder(this.problems.length, this.seed, c.epoch);
    while (out.length < count) {
      // A cursor may start past its epoch (problemsOfStep, a run joined under way): carry the rest into the next ones.
      while (c.position >= order.length && order.length > 0) {
        c.epoch++;
        c.position -= order.length;
        order = epochOrder(this.problems.length, this.seed, c.epoch);
      }
      out.push(this.problems[order[c.position++]!]!);
    }
    return out;
  }
}

/**
 * The problems of training step `step` (from 1) of a run of `promptsPerStep` prompts per step over `problems` with
 * `seed`: what its ProblemStream hands out that step, drawn without its history.
 */
export function problemsOfStep(
  problems: readonly Problem[],
  seed: number,
  promptsPerStep: number,
  step: number,
): Problem[] {
  return new ProblemStream(problems, seed, { epoch: 0, position: (step - 1) * promptsPerStep }).next(promptsPerStep);
}

/** What a single-turn run samples from and validates on. */
export interface RolloutData {
  /** The training problems (a ProblemStream, or any other supply of them). */
  train: Pick<ProblemStream, 'next'>;
  /** Prompts per step B. */
  promptsPerStep: number;
  /** The validation sets (none: no validation). */
  validation: readonly ValidationSet[];
  /** Responses per policy and step written to samples.jsonl. */
  samplesLogged: number;
  /** Where the records' old log-probs come from (optim.oldLogProbs); default 'learner'. */
  oldLogProbs?: OldLogProbSource;
}

/** The metrics of one policy's records: rewards, accuracy, lengths. */
export function recordMetrics(records: readonly SampleRecord[]): StepMetrics {
  const rewards = records.map((r) => r.reward);
  const lengths = records.map((r) => r.tokens.response.length);
  // Accuracy is the math reward's verdict when there is one (a format bonus must not count as correct).
  const correct = records.map((r) => r.rewardParts.math ?? r.reward);
  return {
    reward_mean: mean(rewards),
    reward_std: std(rewards),
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
  /** The last step's records per role. */
  private last: SampleRecord[][] = [];

  /** `roles` in the order their records enter the table. */
  constructor(
    private readonly roles: readonly RolloutRole[],
    private readonly data: RolloutData,
  ) {}

  /** Samples, scores and takes old log-probs for every role, in order. */
  async collect(step: StepInputs, table: SampleRecord[]): Promise<Map<string, StepMetrics>> {
    const out = new Map<string, StepMetrics>();
    const problems = this.data.train.next(this.data.promptsPerStep);
    this.last = [];
    for (const role of this.roles) {
      const { policy, rollout: o } = role;
      step.phase?.('sampling', policy.name, problems.length * o.groupSize);
      const t0 = performance.now();
      const rollouts = sampleRollouts(
        policy,
        step.k,
        problems,
        o.groupSize,
        { ...o.sampling, name: `agent ${policy.name} at training step ${step.step + 1}` },
        role.rng,
        o.prompt,
        o.generationBatch,
      );
      const t1 = performance.now();
      step.phase?.('scoring', policy.name);
      const scored = await scoreSamples(
        rollouts.map((r) => ({ prompt: r.problem.prompt, response: r.text, gold: r.problem.answer })),
        o.rewards,
      );
      const t2 = performance.now();
      // From the training forward pass the first own ratio is exactly 1; the sampler's save that pass.
      const old =
        this.data.oldLogProbs === 'sampler'
          ? rollouts.map((r) => r.samplingLogProbs)
          : scoreResponses(
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
          tokens: { prompt: r.promptIds, response: r.responseIds },
          generatorLogProbs: old[i]!,
          samplingLogProbs: r.samplingLogProbs,
          reward: scored.scores[i]!.total,
          rewardParts: scored.scores[i]!.values,
          truncated: r.truncated,
          stoppedByEos: !r.truncated && r.responseIds.at(-1) === policy.tokenizer.eosId,
        };
      });
      table.push(...records);
      this.last.push(records);
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

  /** Each role's policy on every validation set (`val/<set>/…`), one after the other. */
  async validate(set: ValidationOptions, phase?: PhaseStart): Promise<Validation[]> {
    if (this.data.validation.length === 0) return [];
    const out: Validation[] = [];
    for (const r of this.roles)
      out.push({
        label: r.policy.name,
        policies: [r.policy.name],
        metrics: await validateAgent(r.policy, r.validation, this.data.validation, set, phase),
      });
    return out;
  }

  /**
   * The first responses of each role in the last step, with their parsed and gold answers and the prompt text the
   * policy was given (its template, system message and chat template applied).
   */
  logRows(step: number): SampleLogRow[] {
    return this.last.flatMap((records, r) =>
      records.slice(0, this.data.samplesLogged).map((s) => ({
        step,
        agent: s.generator,
        prompt: s.prompt,
        rendered_prompt: renderPrompt(this.roles[r]!.policy.tokenizer, s.prompt, this.roles[r]!.rollout.prompt),
        response: s.text,
        answer: extractAnswer(s.text),
        gold: s.gold,
        reward: s.reward,
        correct: s.reward > 0,
      })),
    );
  }
}
