/**
 * The exchange of agents that do not wait for each other (exchange.mode async). At step t an agent publishes its own
 * records of step t with its capability history (records.ts, version 3), then trains on them plus every partner step
 * published since its last step — oldest first, at most maxStepsPerPartner per partner, none older than t −
 * maxStaleness (those are counted as expired). It waits only when it is more than maxAhead steps ahead of the slowest
 * live partner's last published step (admission control: a slow partner's rollouts are never starved), and for that
 * no longer than exchange.waitSeconds. A partner that has not greeted yet, or that left, is not waited for; an agent
 * may join a run under way (`join`: it starts after the partners' newest step) and leave (its steps stay usable).
 *
 * What a step consumed is written to the manifest (manifest.ts) before it trains: timing decides a step's table,
 * then nothing does — a restart or a replay takes what the manifest lists, checked by hash.
 */
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { CapabilityTracker } from '../algorithms/hacpo/index.js';
import type { PartnerVersions } from '../train/learner-step.js';
import type { StepExchange } from '../train/rl-trainer.js';
import type { StepMetrics } from '../train/sample-sources.js';
import type { SampleRecord } from '../train/sample-table.js';
import { mean } from '../util/stats.js';
import {
  compareFingerprint,
  retryTransport,
  type BadRecordPolicy,
  type LatePolicy,
  type PartnerCheck,
} from './exchange.js';
import { Manifest, type Consumed, type ManifestEntry } from './manifest.js';
import { BadRecord } from './record-checks.js';
import { decodeStep, encodeHello, encodeStep, type AgentStep, type StepLimits } from './records.js';
import { ConflictingPayload, type RolloutTransport } from './transport.js';

/** Settings of an asynchronous exchange (one agent per process). */
export interface AsyncExchangeOptions {
  /** The run's name on the transport. */
  run: string;
  /** Every agent that may take part, in config order. */
  agents: readonly string[];
  /** The agent this process runs. */
  self: string;
  limits: (agent: string) => StepLimits;
  /** Seconds to wait for the broker, or at the maxAhead bound for a partner, before `onLate`. */
  waitSeconds: number;
  /** A partner that keeps this agent at its maxAhead bound past waitSeconds: stop, or go on as if it left. */
  onLate: LatePolicy;
  /** exchange.maxStaleness, maxAhead and maxStepsPerPartner (steps). */
  maxStaleness: number;
  maxAhead: number;
  maxStepsPerPartner: number;
  /** Prompts per step B: partner step s's prompt g is group s·B + g of the table. */
  promptsPerStep: number;
  /** This agent's K (hacpo.capabilityWindow): how many P_t its payloads carry. */
  capabilityWindow: number;
  /** This agent's token ids of a prompt (its template and chat template): for prompts it did not answer this step. */
  renderPrompt: (prompt: string) => number[];
  /** The prompts and gold answers of a step as this process draws them from the shared seed, by group. */
  drawn: (step: number) => readonly Pick<SampleRecord, 'group' | 'prompt' | 'gold'>[];
  /** This agent's manifest (its run folder's, or a finished run's to replay). */
  manifest: Manifest;
  /** Start after the partners' newest published step rather than at step 1 (a fresh agent joining a run under way). */
  join: boolean;
  check?: PartnerCheck;
  onBadRecord?: BadRecordPolicy;
  fingerprint: Record<string, string>;
  log: (line: string) => void;
  /** Replaying a finished run: every step must be in the manifest, which is not written; default false. */
  replay?: boolean;
  /** Called at every pause at the maxAhead bound (a stop request's safe point throws there); default none. */
  poll?: () => void;
}

/** The longest pause between two looks at the broker, ms. */
const MAX_POLL_MS = 100;

/** What this process knows of a partner. */
interface PartnerState {
  greeted: boolean;
  /** Its newest step seen on the broker (steps come in order: s is published after s − 1). */
  last: number;
  /** It published a leave note at `last`. */
  left: boolean;
  /** The step it joined after (its first step is the next; 0: it started with the run). */
  joinedAfter: number;
}

/** Throws when the async settings contradict each other, saying what to change. */
export function checkAsyncSettings(x: { maxStaleness: number; maxAhead: number }): void {
  if (x.maxAhead > x.maxStaleness)
    throw new Error(
      `exchange.maxAhead (${x.maxAhead}) is above exchange.maxStaleness (${x.maxStaleness}): a slow partner's steps ` +
        'would expire while this agent runs ahead of them; raise maxStaleness or lower maxAhead',
    );
}

/** The step agent `agent` joined after, from its join note. */
function joinNote(agent: string, bytes: Uint8Array): number {
  const note = JSON.parse(new TextDecoder().decode(bytes)) as { format?: unknown; joinedAfter?: unknown };
  if (note.format !== 'hacrl-join' || !Number.isInteger(note.joinedAfter) || (note.joinedAfter as number) < 0)
    throw new Error(`agent ${agent}'s join note is malformed`);
  return note.joinedAfter as number;
}

/** sha256 of `bytes`, hex. */
const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

/** The asynchronous StepExchange of one agent. */
export class AsyncExchange implements StepExchange {
  readonly local: ReadonlySet<string>;
  private readonly partners = new Map<string, PartnerState>();
  /** The last step this process published. */
  lastStep = 0;
  /** The step this agent started after (set by greet). */
  startStep = 0;

  constructor(
    private readonly transport: RolloutTransport,
    private readonly o: AsyncExchangeOptions,
  ) {
    if (!o.agents.includes(o.self)) throw new Error(`agent ${o.self} is not in the run (${o.agents.join(', ')})`);
    checkAsyncSettings(o);
    this.local = new Set([o.self]);
    for (const a of o.agents)
      if (a !== o.self) this.partners.set(a, { greeted: false, last: 0, left: false, joinedAfter: 0 });
  }

  /**
   * Publishes this agent's fingerprint and compares those of the partners already there (later ones are compared
   * when first seen); a joining agent starts after the newest step any partner has published, recorded in its
   * manifest so a restart starts there too.
   */
  async greet(): Promise<void> {
    const deadline = Date.now() + this.o.waitSeconds * 1e3;
    await this.refresh(deadline);
    if (this.o.manifest.header === null) {
      if (this.o.replay) throw new Error("the manifest to replay has no first line: it is not a finished run's");
      const newest = this.o.join ? Math.max(0, ...[...this.partners.values()].map((p) => p.last)) : 0;
      await this.o.manifest.start({ step: 0, run: this.o.run, joinedAfter: newest });
    }
    this.startStep = this.o.manifest.header!.joinedAfter;
    // The join note goes first: a partner that sees this agent's fingerprint knows where its steps start.
    if (this.startStep > 0) {
      const note = new TextEncoder().encode(JSON.stringify({ format: 'hacrl-join', joinedAfter: this.startStep }));
      await this.retry(`publishing where agent ${this.o.self} joins`, deadline, () =>
        this.transport.publish(0, this.o.self, note, 'manifest'),
      );
    }
    const hello = encodeHello(this.o.run, this.o.self, this.o.fingerprint);
    await this.retry(`publishing agent ${this.o.self}'s fingerprint`, deadline, () =>
      this.transport.publish(0, this.o.self, hello),
    ).catch((e: unknown) => {
      if (!(e instanceof ConflictingPayload)) throw e;
      throw new Error(
        `agent ${this.o.self} started this run with other data or starting checkpoints than it has now (${e.message}); ` +
          'restore them, or start a new run (exchange.runId)',
      );
    });
  }

  /** Publishes that this agent left after its last step: partners stop waiting for it and still use its steps. */
  async leave(): Promise<void> {
    const deadline = Date.now() + this.o.waitSeconds * 1e3;
    const note = new TextEncoder().encode(JSON.stringify({ format: 'hacrl-leave', agent: this.o.self }));
    await this.retry(`publishing that agent ${this.o.self} leaves`, deadline, () =>
      this.transport.publish(this.lastStep, this.o.self, note, 'leave'),
    );
  }

  async complete(
    step: number,
    table: SampleRecord[],
    sampled: Map<string, StepMetrics>,
  ): Promise<{ table: SampleRecord[]; sampled: Map<string, StepMetrics>; versions: PartnerVersions }> {
    const t0 = performance.now();
    const deadline = Date.now() + this.o.waitSeconds * 1e3;
    const self = this.o.self;
    const previous = this.o.manifest.get(step - 1);
    const capability = [...(previous?.capability ?? []), mean(table.map((r) => r.reward))].slice(
      -this.o.capabilityWindow,
    );
    const payload = encodeStep(this.o.run, step, self, table, sampled.get(self)!, capability);
    await this.retry(`publishing agent ${self}'s records of step ${step}`, deadline, () =>
      this.transport.publish(step, self, payload),
    );
    this.lastStep = step;
    let entry = this.o.manifest.get(step);
    let waited = 0;
    let taken: (AgentStep & Consumed)[];
    if (entry === undefined) {
      if (this.o.replay) throw new Error(`the manifest to replay has no line for step ${step}`);
      waited = await this.admit(step);
      const chosen = await this.choose(step, previous, capability);
      // Checked before it is written: the manifest lists only what the step trains on (not a step skipped as bad).
      taken = await this.read(chosen, Date.now() + this.o.waitSeconds * 1e3);
      entry = {
        ...chosen,
        consumed: taken.map((t) => ({ agent: t.agent, step: t.step, seq: t.seq, sha256: t.sha256 })),
      };
      const bytes = await this.o.manifest.append(entry);
      await this.retry(
        `publishing agent ${self}'s manifest of step ${step}`,
        Date.now() + this.o.waitSeconds * 1e3,
        () => this.transport.publish(step, self, bytes, 'manifest'),
      );
    } else taken = await this.read(entry, deadline);
    const metrics: StepMetrics = { ...sampled.get(self)!, time_exchange_wait_s: waited };
    for (const [name, p] of this.partners) {
      const mine = entry.consumed.filter((c) => c.agent === name);
      const ages = mine.map((c) => step - c.step);
      metrics[`partner_${name}_steps`] = mine.length;
      metrics[`partner_${name}_age_mean`] = ages.length > 0 ? mean(ages) : NaN;
      metrics[`partner_${name}_age_max`] = ages.length > 0 ? Math.max(...ages) : NaN;
      metrics[`partner_${name}_expired`] = entry.expired[name] ?? 0;
      metrics[`partner_${name}_last_step`] = p.last;
    }
    const merged = this.merge(step, table, taken);
    // Oldest first: each partner's entry ends as the P̂ of its newest version taken.
    taken.forEach((t, v) => (metrics[`partner_${t.agent}_p_hat`] = merged.versions.capability[v]!));
    metrics.time_exchange_s = (performance.now() - t0) / 1e3;
    return { ...merged, sampled: new Map([[self, metrics]]) };
  }

  /**
   * Waits while this agent at `step` is more than maxAhead steps ahead of a live partner's last published step;
   * returns the seconds waited. A partner that holds it there past waitSeconds stops the run (onLate: stop) or is
   * treated as gone (continue).
   */
  private async admit(step: number): Promise<number> {
    const t0 = performance.now();
    const deadline = Date.now() + this.o.waitSeconds * 1e3;
    for (let pause = 5; ; pause = Math.min(2 * pause, MAX_POLL_MS)) {
      await this.refresh(deadline);
      const behind = [...this.partners].filter(([, p]) => p.greeted && !p.left && step - p.last > this.o.maxAhead);
      if (behind.length === 0) return (performance.now() - t0) / 1e3;
      if (Date.now() >= deadline) {
        const names = behind.map(([n]) => n).join(', ');
        const what = `agent ${names} published no step after ${Math.min(...behind.map(([, p]) => p.last))} within ${this.o.waitSeconds} s (exchange.waitSeconds) while agent ${this.o.self} is at step ${step} (exchange.maxAhead ${this.o.maxAhead})`;
        if (this.o.onLate === 'stop')
          throw new Error(`${what}; stopping (exchange.onLate: stop). Start it again, or raise exchange.waitSeconds`);
        this.o.log(`${what}; going on as if it left (exchange.onLate: continue)`);
        for (const [, p] of behind) p.left = true;
        return (performance.now() - t0) / 1e3;
      }
      this.o.poll?.();
      await sleep(pause);
    }
  }

  /** Looks on the broker for partners' fingerprints, new steps and leave notes. */
  private async refresh(deadline: number): Promise<void> {
    for (const [name, p] of this.partners) {
      if (!p.greeted) {
        const hello = await this.retry(`reading agent ${name}'s fingerprint`, deadline, () =>
          this.transport.fetch(0, name),
        );
        if (hello === null) continue;
        compareFingerprint(this.o.run, name, hello, this.o.fingerprint);
        const joined = await this.retry(`reading whether agent ${name} joined late`, deadline, () =>
          this.transport.fetch(0, name, 'manifest'),
        );
        if (joined !== null) p.joinedAfter = p.last = joinNote(name, joined);
        p.greeted = true;
      }
      const before = p.last;
      while (
        (await this.retry(`reading agent ${name}'s steps`, deadline, () => this.transport.fetch(p.last + 1, name))) !==
        null
      )
        p.last++;
      if (p.last !== before || !p.left)
        p.left =
          (await this.retry(`reading whether agent ${name} left`, deadline, () =>
            this.transport.fetch(p.last, name, 'leave'),
          )) !== null;
    }
  }

  /**
   * What step `step` consumes: per partner (config order) its steps after the previous step's `upTo`, oldest first —
   * those older than maxStaleness counted as expired, then at most maxStepsPerPartner taken.
   */
  private async choose(
    step: number,
    previous: ManifestEntry | undefined,
    capability: number[],
  ): Promise<ManifestEntry> {
    const consumed: Consumed[] = [];
    const upTo: Record<string, number> = {};
    const expired: Record<string, number> = {};
    const deadline = Date.now() + this.o.waitSeconds * 1e3;
    for (const [name, p] of this.partners) {
      let from = Math.max(previous?.upTo[name] ?? this.startStep, p.joinedAfter);
      let n = 0;
      let old = 0;
      while (from < p.last && n < this.o.maxStepsPerPartner) {
        const s = ++from;
        if (step - s > this.o.maxStaleness) {
          old++;
          continue;
        }
        const bytes = (await this.retry(`reading agent ${name}'s step ${s}`, deadline, () =>
          this.transport.fetch(s, name),
        ))!;
        const seq = (await this.transport.storedAt(s, name)) ?? -1;
        consumed.push({ agent: name, step: s, seq, sha256: sha256(bytes) });
        n++;
      }
      upTo[name] = from;
      expired[name] = old;
    }
    return { step, consumed, upTo, expired, capability };
  }

  /**
   * The partner steps `entry` lists, fetched, hash-checked, decoded and checked against this process's draw of their
   * prompts; a step that fails is stopped on or skipped (exchange.onBadRecord).
   */
  private async read(entry: ManifestEntry, deadline: number): Promise<(AgentStep & Consumed)[]> {
    const out: (AgentStep & Consumed)[] = [];
    for (const c of entry.consumed) {
      const bytes = await this.retry(`reading agent ${c.agent}'s step ${c.step}`, deadline, () =>
        this.transport.fetch(c.step, c.agent),
      );
      if (bytes === null || sha256(bytes) !== c.sha256)
        throw new Error(
          `the manifest of step ${entry.step} lists agent ${c.agent}'s step ${c.step} with sha256 ${c.sha256.slice(0, 12)}, ` +
            `the broker holds ${bytes === null ? 'none' : sha256(bytes).slice(0, 12)}: replay against the broker of the run that wrote it`,
        );
      try {
        await this.checkOrder(c.agent, c.step);
        const partner = decodeStep(this.o.run, c.step, c.agent, bytes, this.o.limits(c.agent));
        if (partner.capability === undefined)
          throw new BadRecord(
            `refused agent ${c.agent}'s records of step ${c.step}: no capability (not an async payload)`,
          );
        await this.o.check?.(c.agent, c.step, partner, this.o.drawn(c.step));
        out.push({ ...partner, ...c });
      } catch (e) {
        if (!(e instanceof BadRecord)) throw e;
        if ((this.o.onBadRecord ?? 'stop') === 'stop')
          throw new Error(`${e.message}; stopping before any learner reads it (exchange.onBadRecord: stop)`);
        this.o.log(`${e.message}; step ${entry.step} goes on without it (exchange.onBadRecord: skip)`);
      }
    }
    return out;
  }

  /**
   * Refuses partner `name`'s step `s` when it was stored before this agent's step s − 1 − maxAhead although this agent
   * was live for the partner by then (its fingerprint stored before the partner's step s − 1): the partner's admission
   * at step s − 1 waited for that step before it could sample step s, so a step stored earlier was published ahead of
   * its author — by someone else. A run that goes on without late agents (onLate: continue) lets an honest partner do
   * that, so it is not checked there.
   */
  private async checkOrder(name: string, s: number): Promise<void> {
    const mine = s - 1 - this.o.maxAhead;
    if (this.o.onLate !== 'stop' || mine <= this.startStep) return;
    const [theirs, previous, hello, ahead] = await Promise.all([
      this.transport.storedAt(s, name),
      this.transport.storedAt(s - 1, name),
      this.transport.storedAt(0, this.o.self),
      this.transport.storedAt(mine, this.o.self),
    ]);
    if (theirs === null || previous === null || hello === null || ahead === null) return;
    if (hello < previous && theirs < ahead)
      throw new BadRecord(
        `refused agent ${name}'s records of step ${s}: stored before agent ${this.o.self}'s records of step ${mine}, ` +
          `which its author's admission (exchange.maxAhead ${this.o.maxAhead}) waited for: published ahead of agent ` +
          `${name}, so not by it (forged?); give each agent its own broker user (docs/distributed.md)`,
      );
  }

  /**
   * Step `step`'s table: this agent's records, then each partner step in the manifest's order, numbered from 0 and
   * each prompt its own group (step s's prompt g is group s·B + g, so partners' answers to this step's prompts share
   * the learner's groups); each partner step a version with the P̂ its history gives.
   */
  private merge(
    step: number,
    own: readonly SampleRecord[],
    taken: readonly (AgentStep & Consumed)[],
  ): { table: SampleRecord[]; versions: PartnerVersions } {
    const B = this.o.promptsPerStep;
    const table: SampleRecord[] = [];
    const slot: (number | null)[] = [];
    const prompts = new Map<number, number[]>();
    for (const r of own) {
      table.push({ ...r, id: table.length, episode: table.length, group: step * B + r.group });
      slot.push(null);
    }
    const capability = taken.map((t) => CapabilityTracker.fromHistory(t.capability!.length, t.capability!).estimate());
    taken.forEach((t, v) => {
      for (const r of t.records) {
        const group = t.step * B + r.group;
        if (t.step !== step && !prompts.has(group)) prompts.set(group, this.o.renderPrompt(r.prompt));
        table.push({ ...r, id: table.length, episode: table.length, group });
        slot.push(v);
      }
    });
    return { table, versions: { slot, capability, prompts } };
  }

  private retry<T>(what: string, deadline: number, f: () => Promise<T>): Promise<T> {
    return retryTransport(what, deadline, this.o.waitSeconds, f);
  }
}
