/**
 * A small reusable pool of symbolic-check workers with a time limit per check. A worker thread is the only portable
 * way to stop a synchronous computation that has run away (the engine can loop for minutes on `\sum_{k=1}^{10^9}`):
 * the worker is terminated and a fresh one replaces it. Idle workers are unref'd so they never keep the process alive.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import type { CheckResult } from './compare.js';
import type { SymbolicJob } from './symbolic.js';
import type { WorkerReply, WorkerRequest } from './symbolic-worker.js';

/** Options of a SymbolicPool. */
export interface PoolOptions {
  /** Worker threads; default min(2, CPUs − 1), at least 1. */
  size?: number;
  /** Time limit per check in milliseconds, from when a ready worker receives it; default 2000. */
  timeoutMs?: number;
}

/** Counters of a pool's life so far. */
export interface PoolStats {
  /** Checks answered by a worker. */
  completed: number;
  /** Checks abandoned at their time limit (each cost a worker). */
  timeouts: number;
  /** Checks lost to a worker that failed or exited. */
  errors: number;
  /** Workers started, replacements included. */
  started: number;
}

interface Pending {
  job: SymbolicJob;
  timeoutMs: number;
  resolve: (r: CheckResult) => void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  current: (Pending & { id: number; timer: NodeJS.Timeout }) | null;
}

/** Default time limit per symbolic check, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 2000;
/** The longest delay a Node timer holds (2^31 − 1 ms, about 24.8 days); longer ones fire after 1 ms. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** `ms` when it is a usable time limit (a whole number of milliseconds, 1 to 2^31 − 1), else a clear error. */
export function checkTimeoutMs(ms: number): number {
  if (!Number.isInteger(ms) || ms < 1 || ms > MAX_TIMEOUT_MS)
    throw new Error(
      `time limit ${ms} ms: must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS} (2^31 − 1)`,
    );
  return ms;
}

const WORKER_URL = new URL('./symbolic-worker.js', import.meta.url);

/** A pool of symbolic-check workers; `check` queues, runs with a time limit and always resolves. */
export class SymbolicPool {
  /** Worker threads at most. */
  readonly size: number;
  /** Default time limit per check, in milliseconds. */
  readonly timeoutMs: number;
  private readonly slots: Slot[] = [];
  private readonly queue: Pending[] = [];
  private nextId = 0;
  private closed = false;
  private readonly counts: PoolStats = { completed: 0, timeouts: 0, errors: 0, started: 0 };

  /** Creates an empty pool; workers start on the first check. */
  constructor(opts: PoolOptions = {}) {
    this.size = Math.max(1, opts.size ?? Math.min(2, availableParallelism() - 1));
    this.timeoutMs = checkTimeoutMs(opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  }

  /** Counters so far (a copy). */
  get stats(): PoolStats {
    return { ...this.counts };
  }

  /**
   * Checks one pair in a worker. Resolves (never rejects) with the verdict, `{equal: null, reason: 'timeout'}` after
   * `timeoutMs` (default: the pool's), or `{equal: null, reason: 'error'}` when the worker fails or the pool closes.
   */
  check(job: SymbolicJob, timeoutMs = this.timeoutMs): Promise<CheckResult> {
    checkTimeoutMs(timeoutMs);
    if (this.closed) return Promise.resolve({ equal: null, reason: 'error', detail: 'pool is closed' });
    return new Promise((resolve) => {
      this.queue.push({ job, timeoutMs, resolve });
      this.pump();
    });
  }

  /** Terminates every worker; queued checks resolve as errors. Safe to call twice. */
  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.queue.splice(0)) p.resolve({ equal: null, reason: 'error', detail: 'pool closed' });
    const slots = this.slots.splice(0);
    for (const s of slots) this.finish(s, { equal: null, reason: 'error', detail: 'pool closed' });
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  /** Hands queued checks to idle ready workers and starts workers while there is work and room. */
  private pump(): void {
    for (const slot of this.slots) {
      if (this.queue.length === 0) break;
      if (slot.ready && !slot.current) this.send(slot, this.queue.shift()!);
    }
    const starting = this.slots.filter((s) => !s.ready).length;
    for (let n = this.queue.length - starting; n > 0 && this.slots.length < this.size; n--) this.spawn();
  }

  private spawn(): void {
    // No inherited node flags: the parent's (`--input-type`, `--test`, loaders) can stop a worker from starting.
    const worker = new Worker(WORKER_URL, { execArgv: [] });
    const slot: Slot = { worker, ready: false, current: null };
    this.slots.push(slot);
    this.counts.started++;
    worker.on('message', (m: WorkerReply) => {
      if (m.type === 'ready') slot.ready = true;
      else if (slot.current?.id === m.id) {
        this.counts.completed++;
        this.finish(slot, m.result);
      }
      this.idle(slot);
      this.pump();
    });
    worker.on('error', (e) => this.lose(slot, `symbolic worker failed: ${e.message}`));
    worker.on('exit', (code) => this.lose(slot, `symbolic worker exited with code ${code}`));
  }

  private send(slot: Slot, p: Pending): void {
    const id = this.nextId++;
    const timer = setTimeout(() => {
      this.counts.timeouts++;
      this.finish(slot, { equal: null, reason: 'timeout', detail: `no verdict within ${p.timeoutMs} ms` });
      this.drop(slot);
      void slot.worker.terminate();
      this.pump();
    }, p.timeoutMs);
    slot.current = { ...p, id, timer };
    slot.worker.ref();
    slot.worker.postMessage({ id, job: p.job } satisfies WorkerRequest);
  }

  /** Resolves the slot's current check (if any) with `result`. */
  private finish(slot: Slot, result: CheckResult): void {
    const cur = slot.current;
    if (!cur) return;
    clearTimeout(cur.timer);
    slot.current = null;
    cur.resolve(result);
  }

  /** Lets an idle ready worker stop holding the process open. */
  private idle(slot: Slot): void {
    if (slot.ready && !slot.current) slot.worker.unref();
  }

  private drop(slot: Slot): void {
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
  }

  /** A worker died: fail its check (or, if it never started, one queued check so a broken worker cannot loop). */
  private lose(slot: Slot, message: string): void {
    if (!this.slots.includes(slot)) return;
    this.drop(slot);
    if (slot.current) {
      this.counts.errors++;
      this.finish(slot, { equal: null, reason: 'error', detail: message });
    } else if (!slot.ready && this.queue.length > 0) {
      this.counts.errors++;
      this.queue.shift()!.resolve({ equal: null, reason: 'error', detail: message });
    }
    this.pump();
  }
}

let shared: SymbolicPool | null = null;

/** The process-wide pool used when no pool is passed (created on first use with default options). */
export function defaultPool(): SymbolicPool {
  shared ??= new SymbolicPool();
  return shared;
}

/** Closes the process-wide pool, if one was created; a later check creates a new one. */
export async function closeDefaultPool(): Promise<void> {
  const p = shared;
  shared = null;
  await p?.close();
}
