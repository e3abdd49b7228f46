/** Worker-thread entry of the symbolic pool: owns one compute engine and answers `{id, job}` with `{id, result}`. */
import { parentPort } from 'node:worker_threads';
import { ComputeEngine } from '@cortex-js/compute-engine';
import type { CheckResult } from './compare.js';
import { symbolicCheck, type SymbolicJob } from './symbolic.js';

/** A request from the pool. */
export interface WorkerRequest {
  id: number;
  job: SymbolicJob;
}

/** A reply to the pool: 'ready' once the engine is loaded, then one 'result' per request. */
export type WorkerReply = { type: 'ready' } | { type: 'result'; id: number; result: CheckResult };

const port = parentPort;
if (!port) throw new Error('symbolic-worker.js must be started as a worker thread');

const ce = new ComputeEngine();
// Warm the engine before reporting ready, so its first-call set-up does not count against a check's time limit.
symbolicCheck(ce, { gold: '\\frac{x}{7}+\\frac{2}{7}', answer: '\\frac{x+2}{7}', relTol: 1e-6, percentLenient: true });

port.on('message', ({ id, job }: WorkerRequest) => {
  let result: CheckResult;
  try {
    result = symbolicCheck(ce, job);
  } catch (e) {
    result = { equal: null, reason: 'error', detail: (e as Error).message };
  }
  port.postMessage({ type: 'result', id, result } satisfies WorkerReply);
});
port.postMessage({ type: 'ready' } satisfies WorkerReply);
