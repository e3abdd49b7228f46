/**
 * What a run writes about each step: one metrics.jsonl row (every agent's metrics namespaced `agent/NAME/…` by the
 * protocol of run/metric-names.ts, the process's memory run-level), the sources' samples.jsonl rows, the health
 * warnings read from each agent's history, and the console's validation lines and status line.
 */
import { z } from 'zod';
import { agentMetrics, namespaced } from '../run/metric-names.js';
import type { RunFolder } from '../run/run-folder.js';
import { readJsonl } from '../util/jsonl.js';
import { memoryMetrics } from '../util/memory.js';
import { healthWarnings, type HealthThresholds, type MetricRow } from './health-warnings.js';
import type { TeamMember } from './learners.js';
import type { LearnerResult } from './learner-step.js';
import type { ProgressDisplay } from './progress.js';
import type { SampleLogRow, StepMetrics, Validation } from './sample-sources.js';
import { formatValidation } from './validation.js';

/** One step as the log records it. */
export interface StepRecord {
  /** The step's number (1-based). */
  step: number;
  /** What was sampled, per policy (under an exchange, the other processes' policies too). */
  sampled: ReadonlyMap<string, StepMetrics>;
  /** The update of each learner this process trains (team order), with the seconds it took. */
  learned: readonly (LearnerResult & { seconds: number })[];
  /** Seconds spent filling the table. */
  sampleSeconds: number;
  /** Tokens (prompts and responses) this process trained on per second of its updates. */
  trainTokensPerS: number;
  /** This step's validations ([] when none was due). */
  validations: readonly Validation[];
  /** The source's samples.jsonl rows. */
  samples: readonly SampleLogRow[];
  /** Seconds since the step began. */
  seconds: number;
  /** Every learner's P̂ when rollouts are shared (the status line shows it); null otherwise. */
  capability: readonly number[] | null;
}

/**
 * The run's step log over the agents of `team` this process trains; the status line shows every agent the step has
 * samples of (under an exchange, the other processes' too).
 */
export class StepLog {
  private readonly local: readonly TeamMember[];

  private constructor(
    private readonly run: RunFolder,
    private readonly team: readonly TeamMember[],
    private readonly display: ProgressDisplay,
    private readonly thresholds: ReadonlyMap<string, HealthThresholds>,
    private readonly history: Map<string, MetricRow[]>,
    private readonly total: number,
  ) {
    this.local = team.filter((l) => l.local);
  }

  /**
   * The log of a run of `steps` steps, each agent warned by its `thresholds`: each agent's metric rows so far are
   * what the health warnings read, so a resume reloads them from metrics.jsonl (already cut back to the checkpoint)
   * and warns exactly as an uninterrupted run would.
   */
  static async open(
    run: RunFolder,
    steps: number,
    thresholds: ReadonlyMap<string, HealthThresholds>,
    team: readonly TeamMember[],
    display: ProgressDisplay,
    resume: boolean,
  ): Promise<StepLog> {
    const rows = resume ? await readJsonl(run.path('metrics'), z.looseObject({})) : [];
    const names = team.flatMap((l) => (l.local ? [l.policy.name] : []));
    const history = new Map(names.map((n) => [n, rows.map((row) => agentMetrics(n, row))]));
    return new StepLog(run, team, display, thresholds, history, steps);
  }

  /** The base models' validation, logged as the row of step 0 so that every curve starts before the first update. */
  async baseValidation(validations: readonly Validation[]): Promise<void> {
    if (validations.length === 0) return;
    const row: Record<string, unknown> = { step: 0 };
    for (const l of this.local) {
      const val = validationOf(validations, l.policy.name);
      Object.assign(row, namespaced(l.policy.name, val));
      this.history.get(l.policy.name)!.push(val);
    }
    this.printValidations(0, validations);
    await this.run.appendMetrics(row as { step: number });
  }

  /** Writes step `s`'s metrics and samples, prints its warnings, validations and status line. */
  async step(s: StepRecord): Promise<void> {
    const row: Record<string, unknown> = { step: s.step };
    for (const [i, l] of this.local.entries()) {
      const name = l.policy.name;
      const own = s.sampled.get(name)!;
      const r = s.learned[i]!;
      const agentRow: Record<string, unknown> = {
        ...own,
        ...r.metrics,
        time_train_s: r.seconds,
        tokens_per_s: own.tokens! / (r.seconds + s.sampleSeconds / this.team.length),
        ...validationOf(s.validations, name),
      };
      const warnings = healthWarnings([...this.history.get(name)!, agentRow], this.thresholds.get(name)!);
      for (const w of warnings) agentRow[w.metric] = 1;
      this.history.get(name)!.push(agentRow);
      for (const w of warnings.filter((w) => w.first))
        this.display.message(`warning at step ${s.step} (${name}): ${w.message}`);
      Object.assign(row, namespaced(name, agentRow));
    }
    await this.run.appendSamples(s.samples);
    this.printValidations(s.step, s.validations);
    // Memory belongs to the process, not to an agent: run-level fields, measured once every learner has updated.
    const memory = memoryMetrics();
    await this.run.appendMetrics({ ...row, ...memory, step: s.step });
    // An agent left out of the step as late (exchange.onLate: continue) has no samples to show.
    const shown = this.team.flatMap((l, i) => (s.sampled.has(l.policy.name) ? [i] : []));
    const own = shown.map((i) => s.sampled.get(this.team[i]!.policy.name)!);
    this.display.step({
      step: s.step,
      total: this.total,
      seconds: s.seconds,
      rssMiB: memory['mem/rss_mib'],
      agents: shown.map((i, j) => ({
        name: this.team[i]!.policy.name,
        reward: own[j]!.reward_mean!,
        accuracy: own[j]!.accuracy!,
        ...(s.capability ? { pHat: s.capability[i]! } : {}),
        ...partnerSteps(own[j]!),
      })),
      generateTokensPerS: generationRate(own, s.sampleSeconds),
      trainTokensPerS: s.trainTokensPerS,
    });
  }

  private printValidations(step: number, validations: readonly Validation[]): void {
    for (const v of validations) this.display.message(`step ${step} ${v.label}  ${formatValidation(v.metrics)}`);
  }
}

/**
 * Response tokens per second of generation over `sampled` (every agent shown): their generation times where the
 * source measures them (time_generate_s), else the seconds spent filling the table.
 */
function generationRate(sampled: readonly StepMetrics[], sampleSeconds: number): number {
  const tokens = sampled.reduce((n, m) => n + m.tokens!, 0);
  const timed = sampled.every((m) => m.time_generate_s !== undefined);
  return tokens / (timed ? sampled.reduce((n, m) => n + m.time_generate_s!, 0) : sampleSeconds);
}

/** An asynchronous agent's partners' newest steps (its `partner_<P>_last_step` metrics) for the status line. */
function partnerSteps(m: StepMetrics): { partners?: Record<string, number> } {
  const steps = Object.entries(m).flatMap(([k, v]) => {
    const name = /^partner_(.+)_last_step$/.exec(k)?.[1];
    return name === undefined ? [] : [[name, v] as const];
  });
  return steps.length === 0 ? {} : { partners: Object.fromEntries(steps) };
}

/** The validation fields (metrics and counts) of policy `name` ({} when none of `validations` covers it). */
function validationOf(validations: readonly Validation[], name: string): Record<string, number> {
  return Object.assign(
    {},
    ...validations.filter((v) => v.policies.includes(name)).flatMap((v) => [v.metrics, v.counts ?? {}]),
  ) as Record<string, number>;
}
