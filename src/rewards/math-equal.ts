/**
 * Math answer equivalence: the public checker. A check normalises both sides (normalize.ts), parses their shapes
 * (parse-answer.ts) and compares them in-process with exact rationals; only what needs algebra goes to the symbolic
 * workers (worker-pool.ts), under a time limit. Time-outs and unparseable golds come back as null verdicts with a
 * reason and are counted by `verifyMany`, never silently scored as wrong.
 *
 * Decisions (see also CompareOptions):
 * - numbers: exact rationals first; otherwise equal when |a − b| ≤ relTol · max(|a|, |b|), relTol = 1e-6 by default,
 *   except that two integers must be equal exactly (1,450,001 ≠ 1,450,000); constant expressions evaluated by the
 *   engine also get an absolute floor of 1e-12 (so `\sin\pi` = 0); `2\frac{1}{2}` is the mixed number 2.5 and
 *   `1e3` is 1000 (scientific notation, not 1·e·3);
 * - percent: lenient by default, `50%` = 50 = 0.5 (papers' graders accept both readings); strict: `50%` = 0.5 only;
 * - commas: one number in 3-digit groups (`7,425,000`) is a number, other top-level commas separate an unordered
 *   list (`1,2` = `2,1`); `14{,}916` is always a number;
 * - brackets: `(a,b)` and `[a,b)` are ordered and their bracket characters must match, so `[0,1)` ≠ `(0,1)`;
 *   `\{a,b\}` is a set (unordered); parts of `\cup` are unordered;
 * - word answers (a run of 3+ letters outside a macro) compare as lower-cased text without punctuation;
 * - expressions with variables: equal when the engine proves the identity or, failing that, when both sides agree at
 *   random points (|v| in [0.5, 2.5), either sign), so identities that hold except at isolated points count as equal.
 */
import { compareAnswers, UNDECIDED, type CheckResult, type CompareOptions } from './compare.js';
import { extractGold } from './extract.js';
import { Deadline, refuseText } from './limits.js';
import { normalizeAnswer } from './normalize.js';
import { zeroDenominator } from './number.js';
import { parseAnswer } from './parse-answer.js';
import type { SymbolicJob } from './symbolic.js';
import { checkTimeoutMs, DEFAULT_TIMEOUT_MS, defaultPool, type SymbolicPool } from './worker-pool.js';

export type { CheckResult, Reason } from './compare.js';

/** Options of a check. */
export interface VerifyOptions {
  /** Relative tolerance for numbers; default 1e-6. */
  relTol?: number;
  /** `50%` equals 50 as well as 0.5; default true. */
  percentLenient?: boolean;
  /**
   * Time limit of a whole check in milliseconds (fast path and symbolic engine together); default: the pool's (2000
   * for the shared pool, and for `verifyFast`). At most 2^31 − 1.
   */
  timeoutMs?: number;
  /** Use the symbolic engine when the fast path cannot decide; default true. When false such pairs stay 'undecided'. */
  symbolic?: boolean;
  /** Pool for symbolic checks; default the shared pool (see worker-pool.ts `closeDefaultPool`). */
  pool?: SymbolicPool;
}

/** Counts over a batch of checks. */
export interface VerifyStats {
  /** Pairs given. */
  checked: number;
  /** Verdict true. */
  equal: number;
  /** Verdict false. */
  notEqual: number;
  /** Symbolic checks abandoned at the time limit (verdict null). */
  timeouts: number;
  /** Golds with no answer or that cannot be parsed (verdict null; skip these pairs). */
  unparseableGold: number;
  /** Pairs with a side longer than the verifier reads (verdict null; see limits.ts). */
  tooLong: number;
  /** Pairs with a side nested deeper than the verifier reads (verdict null; see limits.ts). */
  tooDeep: number;
  /** Worker failures and, with `symbolic: false`, undecided pairs (verdict null). */
  other: number;
  /** Pairs that needed the symbolic engine. */
  symbolic: number;
}

/** A gold and an answer to compare. */
export interface VerifyPair {
  /** The gold: a bare answer, `#### 18` or a solution with `\boxed{}` (extracted with `extractGold`). */
  gold: string;
  /** The answer already extracted from the response (a whole `\boxed{…}` or `$…$` around it is removed). */
  answer: string;
}

const DEFAULTS: CompareOptions = { relTol: 1e-6, percentLenient: true };

function compareOptions(o: VerifyOptions): CompareOptions {
  return { relTol: o.relTol ?? DEFAULTS.relTol, percentLenient: o.percentLenient ?? DEFAULTS.percentLenient };
}

/** The fast verdict plus, when it is undecided, the job for the symbolic engine; every step under `deadline`. */
function fastCheck(
  pair: VerifyPair,
  o: CompareOptions,
  deadline: Deadline,
): { result: CheckResult; job: SymbolicJob | null } {
  const none = (result: CheckResult): { result: CheckResult; job: null } => ({ result, job: null });
  const extracted = extractGold(pair.gold);
  if (extracted === null) return none({ equal: null, reason: 'unparseable-gold', detail: 'no answer in gold' });
  const refused = refuseText(extracted, 'gold') ?? refuseText(pair.answer, 'answer');
  if (refused) return none(refused);
  const gold = normalizeAnswer(extracted);
  if (gold === '') return none({ equal: null, reason: 'unparseable-gold', detail: 'no answer in gold' });
  const answer = normalizeAnswer(pair.answer);
  if (answer === '') return none({ equal: false, reason: 'unparseable-answer' });
  // Undefined values are never equal, not even to the same text (`1/0` = `1/0` would reward a broken gold).
  if (zeroDenominator(gold))
    return none({ equal: null, reason: 'unparseable-gold', detail: 'the gold divides by zero' });
  if (zeroDenominator(answer)) return none({ equal: false, reason: 'unparseable-answer', detail: 'divides by zero' });
  const late = deadline.expired();
  if (late) return none(late);
  const result = compareAnswers(parseAnswer(gold), parseAnswer(answer), UNDECIDED, o);
  return { result: deadline.expired() ?? result, job: result.reason === 'undecided' ? { gold, answer, ...o } : null };
}

/** The whole check's time limit: the option, else the pool's, else the default; refused when a timer cannot hold it. */
function limitOf(opts: VerifyOptions): number {
  return checkTimeoutMs(opts.timeoutMs ?? opts.pool?.timeoutMs ?? DEFAULT_TIMEOUT_MS);
}

/** A fast verdict (or symbolic job) and the milliseconds its fast path took out of the check's limit. */
interface FastOutcome {
  result: CheckResult;
  job: SymbolicJob | null;
  limitMs: number;
  spentMs: number;
}

/** The fast path of one pair under a fresh deadline of `limitMs`. */
function timedFastCheck(pair: VerifyPair, o: CompareOptions, limitMs: number): FastOutcome {
  const deadline = new Deadline(limitMs);
  const { result, job } = fastCheck(pair, o, deadline);
  return { result, job, limitMs, spentMs: limitMs - deadline.left() };
}

/**
 * The symbolic stage of a check, with what its own fast path left of the limit (time spent waiting for a free worker
 * is not counted); a time-out when nothing is left.
 */
function finish(fast: FastOutcome, pool: SymbolicPool | null): Promise<CheckResult> {
  if (!fast.job || !pool) return Promise.resolve(fast.result);
  const left = Math.floor(fast.limitMs - fast.spentMs);
  const timeout: CheckResult = { equal: null, reason: 'timeout', detail: `no verdict within ${fast.limitMs} ms` };
  if (left < 1) return Promise.resolve(timeout);
  return pool.check(fast.job, left).then((r) => (r.reason === 'timeout' ? timeout : r));
}

/**
 * Synchronous fast path only (normalisation, exact rationals, tolerance, shapes, text), for hot loops; microseconds
 * per check. Returns `{equal: null, reason: 'undecided'}` where only the symbolic engine could decide.
 */
export function verifyFast(gold: string, answer: string, opts: VerifyOptions = {}): CheckResult {
  return fastCheck({ gold, answer }, compareOptions(opts), new Deadline(limitOf(opts))).result;
}

/** Checks one pair: the fast path in-process, then the symbolic engine in a worker, all under one time limit. */
export async function verify(gold: string, answer: string, opts: VerifyOptions = {}): Promise<CheckResult> {
  const fast = timedFastCheck({ gold, answer }, compareOptions(opts), limitOf(opts));
  const pool = fast.job && opts.symbolic !== false ? (opts.pool ?? defaultPool()) : null;
  return finish(fast, pool);
}

/** Tallies a batch's verdicts. */
export function tally(results: readonly CheckResult[], symbolic = 0): VerifyStats {
  const s: VerifyStats = {
    checked: results.length,
    equal: 0,
    notEqual: 0,
    timeouts: 0,
    unparseableGold: 0,
    tooLong: 0,
    tooDeep: 0,
    other: 0,
    symbolic,
  };
  for (const r of results) {
    if (r.equal === true) s.equal++;
    else if (r.equal === false) s.notEqual++;
    else if (r.reason === 'timeout') s.timeouts++;
    else if (r.reason === 'unparseable-gold') s.unparseableGold++;
    else if (r.reason === 'too-long') s.tooLong++;
    else if (r.reason === 'too-deep') s.tooDeep++;
    else s.other++;
  }
  return s;
}

/** Checks many pairs (symbolic ones spread over the pool) and counts the outcomes. Results keep the input order. */
export async function verifyMany(
  pairs: readonly VerifyPair[],
  opts: VerifyOptions = {},
): Promise<{ results: CheckResult[]; stats: VerifyStats }> {
  const o = compareOptions(opts);
  const limit = limitOf(opts);
  const fast = pairs.map((p) => timedFastCheck(p, o, limit));
  const useSymbolic = opts.symbolic !== false;
  const pool = useSymbolic && fast.some((f) => f.job) ? (opts.pool ?? defaultPool()) : null;
  const results = await Promise.all(fast.map((f) => finish(f, pool)));
  return { results, stats: tally(results, pool ? fast.filter((f) => f.job).length : 0) };
}
