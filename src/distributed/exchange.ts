/**
 * The rollout exchange: each step, every agent publishes its own records through a transport, waits until every
 * agent's records of that step are there, and puts them in agent order (never arrival order), numbered as one
 * process numbers them — so each agent's learner sees exactly the table a single-process run builds. Prompts come
 * from the shared seed, so nothing else needs coordinating.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { StepExchange } from '../train/rl-trainer.js';
import type { StepMetrics } from '../train/sample-sources.js';
import type { SampleRecord } from '../train/sample-table.js';
import { decodeStep, encodeStep, type AgentStep, type StepLimits } from './records.js';
import { ConflictingPayload, type RolloutTransport } from './transport.js';

/** What to do when an agent's records of a step have not come within the wait. */
export type LatePolicy = 'stop' | 'continue';

/** Settings of an exchange. */
export interface ExchangeOptions {
  /** The run's name on the transport (every agent's must be the same). */
  run: string;
  /** Every agent of the run, in config order. */
  agents: readonly string[];
  /** The agents this process runs. */
  local: readonly string[];
  /** What each agent's records must satisfy (its groups, group size, vocabulary). */
  limits: (agent: string) => StepLimits;
  /** Seconds to wait for a partner's records of a step, or for the transport to answer, before `onLate`. */
  waitSeconds: number;
  onLate: LatePolicy;
  /** Where the exchange reports an agent left out of a step. */
  log: (line: string) => void;
}

/** The longest pause between two looks for missing records, ms. */
const MAX_POLL_MS = 200;

/** Completes each step's table from every agent's published records (a StepExchange for trainRl). */
export class RolloutExchange implements StepExchange {
  readonly local: ReadonlySet<string>;

  constructor(
    private readonly transport: RolloutTransport,
    private readonly o: ExchangeOptions,
  ) {
    for (const name of o.local)
      if (!o.agents.includes(name)) throw new Error(`agent ${name} is not in the run (${o.agents.join(', ')})`);
    this.local = new Set(o.local);
  }

  async complete(
    step: number,
    table: SampleRecord[],
    sampled: Map<string, StepMetrics>,
  ): Promise<{ table: SampleRecord[]; sampled: Map<string, StepMetrics> }> {
    const deadline = Date.now() + this.o.waitSeconds * 1e3;
    const steps = new Map<string, AgentStep>();
    for (const name of this.o.local) {
      const records = table.filter((r) => r.generator === name);
      const metrics = sampled.get(name)!;
      const payload = encodeStep(this.o.run, step, name, records, metrics);
      await this.retry(`publishing agent ${name}'s records of step ${step}`, deadline, () =>
        this.transport.publish(step, name, payload),
      );
      steps.set(name, { records, metrics });
    }
    const missing = this.o.agents.filter((a) => !this.local.has(a));
    for (let pause = 5; missing.length > 0; pause = Math.min(2 * pause, MAX_POLL_MS)) {
      for (const name of [...missing]) {
        const bytes = await this.retry(`reading agent ${name}'s records of step ${step}`, deadline, () =>
          this.transport.fetch(step, name),
        );
        if (bytes === null) continue;
        steps.set(name, decodeStep(this.o.run, step, name, bytes, this.o.limits(name)));
        missing.splice(missing.indexOf(name), 1);
      }
      if (missing.length === 0) break;
      if (Date.now() >= deadline) {
        this.late(step, missing);
        break;
      }
      await sleep(pause);
    }
    return this.merge(steps);
  }

  /** Every present agent's records in agent order, with ids and episodes their position in the whole table. */
  private merge(steps: Map<string, AgentStep>): { table: SampleRecord[]; sampled: Map<string, StepMetrics> } {
    const table: SampleRecord[] = [];
    const sampled = new Map<string, StepMetrics>();
    for (const name of this.o.agents) {
      const s = steps.get(name);
      if (!s) continue;
      for (const r of s.records) table.push({ ...r, id: table.length, episode: table.length });
      sampled.set(name, s.metrics);
    }
    return { table, sampled };
  }

  /** Agents `missing` did not publish step `step` in time: stop naming them, or go on without them (logged). */
  private late(step: number, missing: readonly string[]): void {
    const who = missing.length === 1 ? `agent ${missing[0]}` : `agents ${missing.join(', ')}`;
    const what = `${who} did not publish records of step ${step} within ${this.o.waitSeconds} s (exchange.waitSeconds)`;
    if (this.o.onLate === 'stop')
      throw new Error(
        `${what}; stopping (exchange.onLate: stop). Start it with hacrl agent --agent ${missing[0]}, or raise ` +
          'exchange.waitSeconds; restarting this agent resumes from its last checkpoint',
      );
    this.o.log(`${what}; step ${step} goes on without it (exchange.onLate: continue)`);
  }

  /**
   * Runs `f` until it succeeds; a transport that keeps failing (a broker down) past `deadline` stops the run, and so
   * does a conflict at once (waiting cannot resolve it).
   */
  private async retry<T>(what: string, deadline: number, f: () => Promise<T>): Promise<T> {
    for (let pause = 50; ; pause = Math.min(2 * pause, 1000)) {
      try {
        return await f();
      } catch (e) {
        if (e instanceof ConflictingPayload) throw e;
        if (Date.now() >= deadline)
          throw new Error(`${what}: the transport kept failing for ${this.o.waitSeconds} s: ${(e as Error).message}`);
        await sleep(pause);
      }
    }
  }
}
