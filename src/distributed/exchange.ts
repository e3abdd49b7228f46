/**
 * The rollout exchange: each step, every agent publishes its own records through a transport, waits until every
 * agent's records of that step are there, and puts them in agent order (never arrival order), numbered as one
 * process numbers them — so each agent's learner sees exactly the table a single-process run builds. Prompts come
 * from the shared seed, so nothing else needs coordinating. Before the first step every agent publishes its
 * fingerprint (the hashes of the training data and of every starting checkpoint, as its machine holds them) and reads
 * every partner's: machines that would train on different data or weights are refused before any work. Every
 * partner step is checked on arrival (records.ts, record-checks.ts) before any learner reads it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { StepExchange } from '../train/rl-trainer.js';
import type { StepMetrics } from '../train/sample-sources.js';
import type { SampleRecord } from '../train/sample-table.js';
import { BadRecord } from './record-checks.js';
import { decodeHello, decodeStep, encodeHello, encodeStep, type AgentStep, type StepLimits } from './records.js';
import { ConflictingPayload, PublishRefused, TransportClosed, type RolloutTransport } from './transport.js';

/** What to do when an agent's records of a step have not come within the wait. */
export type LatePolicy = 'stop' | 'continue';

/** What to do with a partner's step that fails a check on arrival. */
export type BadRecordPolicy = 'stop' | 'skip';

/**
 * Checks a partner's decoded step against this process's own records of the step (record-checks.ts); throws
 * BadRecord naming what fails.
 */
export type PartnerCheck = (
  agent: string,
  step: number,
  partner: AgentStep,
  own: readonly Pick<SampleRecord, 'group' | 'prompt' | 'gold'>[],
) => Promise<void>;

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
  /** The partner step check, and what a failing step does; default no check beyond the records' shape. */
  check?: PartnerCheck;
  onBadRecord?: BadRecordPolicy;
  /** This machine's fingerprint of the run (run-fingerprint.ts): named hashes every partner's must equal. */
  fingerprint: Record<string, string>;
  /** Where the exchange reports an agent left out of a step. */
  log: (line: string) => void;
  /** Called at every pause of a wait for a step's records (a stop request's safe point throws there); default none. */
  poll?: () => void;
}

/** The longest pause between two looks for missing records, ms. */
const MAX_POLL_MS = 200;

/** Completes each step's table from every agent's published records (a StepExchange for trainRl). */
export class RolloutExchange implements StepExchange {
  readonly local: ReadonlySet<string>;
  /** Partners whose fingerprint equals this process's. */
  private readonly greeted = new Set<string>();

  constructor(
    private readonly transport: RolloutTransport,
    private readonly o: ExchangeOptions,
  ) {
    for (const name of o.local)
      if (!o.agents.includes(name)) throw new Error(`agent ${name} is not in the run (${o.agents.join(', ')})`);
    this.local = new Set(o.local);
  }

  /**
   * Publishes this process's fingerprint and compares every partner's with it (waiting for those not yet there as
   * for a step's records): a difference stops the run naming what differs, before any step is sampled.
   */
  async greet(): Promise<void> {
    const deadline = Date.now() + this.o.waitSeconds * 1e3;
    for (const name of this.o.local) {
      const hello = encodeHello(this.o.run, name, this.o.fingerprint);
      try {
        await this.retry(`publishing agent ${name}'s fingerprint`, deadline, () =>
          this.transport.publish(0, name, hello),
        );
      } catch (e) {
        if (!(e instanceof ConflictingPayload)) throw e;
        throw new Error(
          `agent ${name} started this run with other data or starting checkpoints than it has now: the broker ` +
            `holds another fingerprint for it (${e.message}); restore them, or start a new run (exchange.runId)`,
        );
      }
    }
    await this.gather(0, deadline, (name, bytes) => this.compareFingerprint(name, bytes));
  }

  /** Refuses partner `name` when its fingerprint (`bytes`) differs from this process's, naming what differs. */
  private compareFingerprint(name: string, bytes: Uint8Array): void {
    compareFingerprint(this.o.run, name, bytes, this.o.fingerprint);
    this.greeted.add(name);
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
    await this.gather(step, deadline, async (name, bytes) => {
      // A partner that was late to greet (exchange.onLate: continue) is compared before its first step is read.
      if (!this.greeted.has(name)) {
        const hello = await this.retry(`reading agent ${name}'s fingerprint`, deadline, () =>
          this.transport.fetch(0, name),
        );
        if (hello === null) throw new Error(`agent ${name} published records of step ${step} but no fingerprint`);
        this.compareFingerprint(name, hello);
      }
      try {
        const partner = decodeStep(this.o.run, step, name, bytes, this.o.limits(name));
        await this.checkOrder(step, name);
        await this.o.check?.(name, step, partner, table);
        steps.set(name, partner);
      } catch (e) {
        if (!(e instanceof BadRecord)) throw e;
        if ((this.o.onBadRecord ?? 'stop') === 'stop')
          throw new Error(
            `${e.message}; stopping before any learner reads it (exchange.onBadRecord: stop). A partner whose ` +
              'records fail these checks is misconfigured or forged: see docs/distributed.md, "What arrives is checked"',
          );
        this.o.log(`${e.message}; step ${step} goes on without agent ${name} (exchange.onBadRecord: skip)`);
      }
    });
    return this.merge(steps);
  }

  /**
   * Refuses partner `name`'s step `step` when it was stored before this process's own step `step − 1` (its greeting
   * for step 1): in lockstep its author could sample step `step` only after reading that, so a step stored earlier was
   * published ahead of its author — by someone else. A run that goes on without late agents (onLate: continue) lets
   * an honest partner do that, so it is not checked there.
   */
  private async checkOrder(step: number, name: string): Promise<void> {
    if (this.o.onLate !== 'stop') return;
    const theirs = await this.transport.storedAt(step, name);
    for (const own of this.o.local) {
      const mine = await this.transport.storedAt(step - 1, own);
      if (theirs !== null && mine !== null && theirs < mine)
        throw new BadRecord(
          `refused agent ${name}'s records of step ${step}: stored before agent ${own}'s ` +
            `${step === 1 ? 'fingerprint' : `records of step ${step - 1}`}, which its author needed first: published ` +
            `ahead of agent ${name}, so not by it (forged?); give each agent its own broker user (docs/distributed.md)`,
        );
    }
  }

  /**
   * Reads every partner's payload of `step` as it arrives, polling with growing pauses, and hands it to `take`; the
   * ones still missing at `deadline` are late (onLate).
   */
  private async gather(
    step: number,
    deadline: number,
    take: (name: string, bytes: Uint8Array) => void | Promise<void>,
  ): Promise<void> {
    const what = step === 0 ? 'fingerprint' : `records of step ${step}`;
    const missing = this.o.agents.filter((a) => !this.local.has(a));
    for (let pause = 5; missing.length > 0; pause = Math.min(2 * pause, MAX_POLL_MS)) {
      for (const name of [...missing]) {
        const bytes = await this.retry(`reading agent ${name}'s ${what}`, deadline, () =>
          this.transport.fetch(step, name),
        );
        if (bytes === null) continue;
        await take(name, bytes);
        missing.splice(missing.indexOf(name), 1);
      }
      if (missing.length === 0) break;
      if (Date.now() >= deadline) {
        this.late(step, missing);
        break;
      }
      // Not while greeting (step 0): no step has begun that a stop could drop.
      if (step > 0) this.o.poll?.();
      await sleep(pause);
    }
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
    const record = step === 0 ? 'its fingerprint before step 1' : `records of step ${step}`;
    const what = `${who} did not publish ${record} within ${this.o.waitSeconds} s (exchange.waitSeconds)`;
    if (this.o.onLate === 'stop')
      throw new Error(
        `${what}; stopping (exchange.onLate: stop). Start it with hacrl agent --agent ${missing[0]}, or raise ` +
          'exchange.waitSeconds; restarting this agent resumes from its last checkpoint',
      );
    this.o.log(`${what}; step ${step} goes on without it (exchange.onLate: continue)`);
  }

  private retry<T>(what: string, deadline: number, f: () => Promise<T>): Promise<T> {
    return retryTransport(what, deadline, this.o.waitSeconds, f);
  }
}

/**
 * Refuses partner `name` of run `run` when its fingerprint (`bytes`) differs from `ours`, naming what differs.
 */
export function compareFingerprint(run: string, name: string, bytes: Uint8Array, ours: Record<string, string>): void {
  const theirs = decodeHello(run, name, bytes);
  const differ = Object.keys({ ...theirs, ...ours }).filter((k) => theirs[k] !== ours[k]);
  if (differ.length > 0) {
    const hashes = differ.map(
      (k) => `${k}: ${theirs[k]?.slice(0, 12) ?? 'none'} there, ${ours[k]?.slice(0, 12) ?? 'none'} here`,
    );
    throw new Error(
      `agent ${name}'s machine holds other ${differ.join(', ')} than this one (sha256 ${hashes.join('; ')}): every ` +
        'agent must train on the same data from the same starting checkpoints; copy the files over and start again',
    );
  }
}

/**
 * Runs `f` until it succeeds; a transport that keeps failing (a broker down) past `deadline` stops the run (the
 * message says it failed for `waitSeconds`), and so do a conflict, a refusal and a closed transport at once (waiting
 * cannot resolve them).
 */
export async function retryTransport<T>(
  what: string,
  deadline: number,
  waitSeconds: number,
  f: () => Promise<T>,
): Promise<T> {
  for (let pause = 50; ; pause = Math.min(2 * pause, 1000)) {
    try {
      return await f();
    } catch (e) {
      if (e instanceof ConflictingPayload || e instanceof PublishRefused || e instanceof TransportClosed) throw e;
      if (Date.now() >= deadline)
        throw new Error(`${what}: the transport kept failing for ${waitSeconds} s: ${(e as Error).message}`);
      await sleep(pause);
    }
  }
}
