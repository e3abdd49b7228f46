/**
 * Batched sampling with a KV cache: prompts are left-padded to a common length, prefilled in one forward pass (each
 * distinct prompt once), then decoded one token per step for every sequence still running.
 */
import type { Kernels } from '../backend/kernels.js';
import { trimPool } from '../tensor/grad-pool.js';
import { Arena } from '../tensor/tape.js';
import { Rng } from '../util/rng.js';
import { workPoint } from '../util/work-points.js';
import { KVCache } from './kv-cache.js';
import { samplingParts, sumBytes } from './memory-plan.js';
import type { Transformer } from './transformer.js';

/** Most tokens generated per sequence unless SamplingOptions.maxNewTokens says otherwise. */
const DEFAULT_MAX_NEW_TOKENS = 256;

/** Sampling settings. */
export interface SamplingOptions {
  /** Most tokens generated per sequence; default 256. */
  maxNewTokens?: number;
  /** Softmax temperature; 0 = greedy (argmax). Default 1. */
  temperature?: number;
  /** Nucleus sampling: keep the smallest set of tokens whose probability reaches topP; default 1 (off). */
  topP?: number;
  /** Keep only the topK most likely tokens; default 0 (off). */
  topK?: number;
  /** Token ids that end a sequence (kept as its last token); default none. */
  stopTokens?: readonly number[];
  /** Strings that end a sequence; the text is cut before the match (needs `decode`); default none. */
  stopStrings?: readonly string[];
  /** Turns ids into text: needed for `text` and for stop strings. */
  decode?: (ids: number[]) => string;
  /** Seed of the sampling RNG (used when `rng` is not given); default 0. */
  seed?: number;
  /** A generator to draw from (its state advances: exact resume of a training run). */
  rng?: Rng;
  /** Names the model in errors (an agent's name or folder); default 'the model'. */
  name?: string;
  /**
   * Identical prompts share one prefill, its keys and values copied to each of their sequences (the same bits as
   * prefilling each); false prefills every sequence on its own. Default true.
   */
  sharePrefill?: boolean;
}

/** Why a sequence ended. */
export type FinishReason = 'stop_token' | 'stop_string' | 'length';

/** One generated continuation. */
export interface Generation {
  /** Generated token ids (including a stop token if one ended the sequence). */
  ids: number[];
  /**
   * log π(token) of each generated token under the model's own distribution at temperature 1 with no top-k/top-p
   * truncation (the policy log-probs RL needs), in nats.
   */
  logProbs: number[];
  /** The decoded text (cut before a stop string), when `decode` was given; '' otherwise. */
  text: string;
  finishReason: FinishReason;
}

/** The k-th largest of xs (1-based, k ≤ xs.length) by quickselect on a scratch copy: O(n) on average. */
function kthLargest(xs: Float32Array, k: number): number {
  const a = Float32Array.from(xs);
  let lo = 0;
  let hi = a.length - 1;
  const want = k - 1;
  while (lo < hi) {
    const pivot = a[(lo + hi) >> 1]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i]! > pivot) i++;
      while (a[j]! < pivot) j--;
      if (i <= j) {
        const t = a[i]!;
        a[i++] = a[j]!;
        a[j--] = t;
      }
    }
    if (want <= j) hi = j;
    else if (want >= i) lo = i;
    else break;
  }
  return a[want]!;
}

/**
 * At least the `count` largest logits of a row (every tie of the last one included), in sampling order: logit
 * descending, index ascending on ties. Only those are sorted, not the whole vocabulary.
 */
function topIndices(row: Float32Array, count: number): number[] {
  const byLogit = (a: number, b: number): number => row[b]! - row[a]! || a - b;
  if (count >= row.length) return Array.from({ length: row.length }, (_, i) => i).sort(byLogit);
  const threshold = kthLargest(row, count);
  const picked: number[] = [];
  for (let i = 0; i < row.length; i++) if (row[i]! >= threshold) picked.push(i);
  return picked.sort(byLogit);
}

/** Candidates top-p starts from before it grows its search (most rows keep far fewer tokens). */
const TOP_P_FIRST_CANDIDATES = 64;

/**
 * Draws a token from one row of logits under temperature, top-k and top-p. Truncation selects its candidates without
 * sorting the whole vocabulary: top-k takes the k largest; top-p takes the largest 64, 512, … until their mass reaches
 * topP, normalising by the mass of the whole row (summed in index order).
 */
export function sampleToken(
  row: Float32Array,
  o: Required<Pick<SamplingOptions, 'temperature' | 'topK' | 'topP'>>,
  rng: Rng,
): number {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) max = Math.max(max, row[i]!);
  // NaN or infinite logits have no distribution to draw from (and top-p's search for their mass would never end).
  if (!Number.isFinite(max)) throw new Error(`sampling: the logits are not finite (largest ${max})`);
  if (o.temperature === 0) return argmax(row);
  const weightOf = (i: number): number => Math.exp((row[i]! - max) / o.temperature);
  // Candidates in sampling order and the mass top-p is measured against.
  let order: number[] | Int32Array;
  let total = 0;
  if (o.topK > 0) {
    order = topIndices(row, o.topK).slice(0, o.topK);
    for (const i of order) total += weightOf(i);
  } else {
    order = o.topP < 1 ? topIndices(row, TOP_P_FIRST_CANDIDATES) : Int32Array.from({ length: row.length }, (_, i) => i);
    for (let i = 0; i < row.length; i++) total += weightOf(i);
  }
  let keep = order.length;
  if (o.topP < 1) {
    for (let count = order.length; ;) {
      let acc = 0;
      keep = 0;
      for (let j = 0; j < order.length; j++) {
        acc += weightOf(order[j]!) / total;
        if (acc >= o.topP) {
          keep = j + 1;
          break;
        }
      }
      if (keep > 0) break;
      if (order.length >= row.length) {
        keep = order.length;
        break;
      }
      count = Math.max(count, TOP_P_FIRST_CANDIDATES) * 8;
      order = topIndices(row, count);
    }
  }
  const weights = new Float64Array(keep);
  total = 0;
  for (let j = 0; j < keep; j++) total += weights[j] = weightOf(order[j]!);
  let u = rng.next() * total;
  for (let j = 0; j < keep; j++) {
    u -= weights[j]!;
    if (u < 0) return order[j]!;
  }
  return order[keep - 1]!;
}

type Knobs = Required<Pick<SamplingOptions, 'temperature' | 'topK' | 'topP'>>;

/** argmax of a row (the first maximum). */
function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

/**
 * One token for every active row of logits [rows, vocab]; inactive rows get -1. Greedy picks are one argmaxRows
 * kernel call; without truncation the softmax of all rows runs in one kernel call and each row costs one linear scan;
 * top-k/top-p fall back to sampleToken.
 * Draws exactly one random number per active row, whatever the path, so runs stay reproducible across settings.
 */
export function sampleRows(
  k: Kernels,
  logits: Float32Array,
  vocab: number,
  active: readonly boolean[],
  o: Knobs,
  rng: Rng,
  /** Room for rows·vocab probabilities of the untruncated path (the logits stay intact); default: allocated. */
  scratch?: Float32Array,
): Int32Array {
  const rows = active.length;
  const tokens = new Int32Array(rows).fill(-1);
  if (o.temperature === 0) {
    k.argmaxRows(logits, tokens, rows, vocab);
    for (let b = 0; b < rows; b++) if (!active[b]) tokens[b] = -1;
    return tokens;
  }
  const rowOf = (b: number): Float32Array => logits.subarray(b * vocab, (b + 1) * vocab);
  if (o.topK > 0 || o.topP < 1) {
    for (let b = 0; b < rows; b++) if (active[b]) tokens[b] = sampleToken(rowOf(b), o, rng);
    return tokens;
  }
  const probs = scratch ?? new Float32Array(rows * vocab);
  probs.set(logits.subarray(0, rows * vocab));
  k.scale(probs, 1 / o.temperature, rows * vocab);
  k.softmax(probs, probs, rows, vocab);
  for (let b = 0; b < rows; b++) {
    if (!active[b]) continue;
    const p = probs.subarray(b * vocab, (b + 1) * vocab);
    let total = 0;
    for (let i = 0; i < vocab; i++) total += p[i]!;
    let u = rng.next() * total;
    let pick = -1;
    for (let i = 0; i < vocab; i++) {
      if (p[i]! > 0) pick = i;
      u -= p[i]!;
      if (u < 0) break;
    }
    // A row without a finite positive probability (a diverged model's NaN logits) still yields a valid token, so the
    // trainer sees the non-finite loss and skips the update instead of crashing in the embedding lookup.
    tokens[b] = pick >= 0 ? pick : argmax(logits.subarray(b * vocab, (b + 1) * vocab));
  }
  return tokens;
}

/**
 * Throws, naming the model, the sequence and the new token's position, when a running sequence's logits hold NaN or
 * +Infinity (or are all -Infinity): a diverged model has no distribution to sample from, and every sampling path
 * would otherwise return arbitrary tokens or, under top-p, never return.
 */
function checkFiniteLogits(
  logits: Float32Array,
  vocab: number,
  running: readonly boolean[],
  step: number,
  name: string,
) {
  for (let b = 0; b < running.length; b++) {
    if (!running[b]) continue;
    let max = -Infinity;
    for (let i = b * vocab; i < (b + 1) * vocab; i++) {
      const x = logits[i]!;
      if (x !== x || x === Infinity) {
        max = x;
        break;
      }
      if (x > max) max = x;
    }
    if (!Number.isFinite(max))
      throw new Error(
        `sampling: ${name} produced ${Number.isNaN(max) ? 'NaN' : 'infinite'} logits for sequence ${b} at new token ` +
          `${step + 1}: the model has diverged (non-finite weights or activations); retrain it with a lower learning rate`,
      );
  }
}

/** `decode` whose errors name the model (its name says the agent, phase and step where the caller knows them). */
function namedDecode(decode: (ids: number[]) => string, name: string): (ids: number[]) => string {
  return (ids) => {
    try {
      return decode(ids);
    } catch (e) {
      throw new Error(`sampling: decoding a response of ${name} failed: ${(e as Error).message}`);
    }
  };
}

function validate(o: SamplingOptions): void {
  const bad = (msg: string): never => {
    throw new Error(`sampling: ${msg}`);
  };
  if (o.temperature !== undefined && !(o.temperature >= 0)) bad(`temperature must be ≥ 0, got ${o.temperature}`);
  if (o.topP !== undefined && !(o.topP > 0 && o.topP <= 1)) bad(`topP must be in (0, 1], got ${o.topP}`);
  if (o.topK !== undefined && !(Number.isInteger(o.topK) && o.topK >= 0))
    bad(`topK must be an integer ≥ 0, got ${o.topK}`);
  if (o.maxNewTokens !== undefined && !(Number.isInteger(o.maxNewTokens) && o.maxNewTokens >= 1))
    bad(`maxNewTokens must be an integer ≥ 1, got ${o.maxNewTokens}`);
  if (o.stopStrings?.length && !o.decode) bad('stopStrings need a decode function (a tokenizer)');
}

/**
 * Continues every prompt (token ids) with sampled tokens; same seed, same prompts, same results. The buffer pool is
 * trimmed first: a training pass's buffers are kept only as far as they fit beside the inference copies, the KV cache
 * and the prefill under the pass's own footprint.
 */
export function generate(
  model: Transformer,
  k: Kernels,
  prompts: readonly (readonly number[])[],
  options: SamplingOptions = {},
): Generation[] {
  // A reduce, not Math.max(...): an evaluation may pass more prompts than a call takes arguments.
  const promptTokens = prompts.reduce((n, p) => Math.max(n, p.length), 0);
  const own = samplingParts(
    model.cfg,
    model.precision,
    model.adapters !== null,
    prompts.length,
    promptTokens,
    options.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS,
  );
  trimPool(sumBytes(own) / Float32Array.BYTES_PER_ELEMENT);
  return model.withInferenceWeights(() => generateWith(model, k, prompts, options));
}

/**
 * Per sequence, the index of its prompt among the distinct prompts (numbered in order of first appearance), and
 * those prompts; with `share` false every sequence is its own.
 */
function distinctPrompts(
  prompts: readonly (readonly number[])[],
  share: boolean,
): { source: Int32Array; distinct: (readonly number[])[] } {
  if (!share) return { source: Int32Array.from(prompts, (_, b) => b), distinct: [...prompts] };
  const index = new Map<string, number>();
  const distinct: (readonly number[])[] = [];
  const source = Int32Array.from(prompts, (p) => {
    const key = p.join(',');
    let u = index.get(key);
    if (u === undefined) {
      index.set(key, (u = distinct.length));
      distinct.push(p);
    }
    return u;
  });
  return { source, distinct };
}

/**
 * bf16 products of at most this many rows run on another kernel than longer ones (native/bf16_skinny.h), which sums in
 * another order: a shared prefill keeps more rows than this whenever the unshared one has more, so that its products
 * run on the same kernel.
 */
const SHORT_PRODUCT_ROWS = 16;

/**
 * Prefills `prompts`, left-padded to `promptLen`, into `cache` and returns each sequence's last hidden row
 * [batch·hidden]. With `share`, each distinct prompt is computed once, in a batch of the distinct prompts only (plus
 * copies of the first one where SHORT_PRODUCT_ROWS asks), and its keys and values (padding included) copied into the
 * rows of every sequence that has it: a product's rows do not depend on each other on one kernel, so each sequence
 * gets the bits its own prefill would give.
 */
function prefill(
  model: Transformer,
  k: Kernels,
  prompts: readonly (readonly number[])[],
  promptLen: number,
  cache: KVCache,
  share: boolean,
): Float32Array {
  const least = prompts.length * promptLen > SHORT_PRODUCT_ROWS ? Math.floor(SHORT_PRODUCT_ROWS / promptLen) + 1 : 1;
  const shared = distinctPrompts(prompts, share);
  const { source, distinct } =
    Math.max(shared.distinct.length, least) < prompts.length ? shared : distinctPrompts(prompts, false);
  while (distinct.length < least) distinct.push(distinct[0]!);
  const rows = distinct.length;
  const keyStart = Int32Array.from(distinct, (p) => promptLen - p.length);
  const ids = new Int32Array(rows * promptLen);
  distinct.forEach((p, u) => ids.set(p, u * promptLen + keyStart[u]!));
  const { layers, kvHeads, headDim, hidden: dim } = model.cfg;
  const target = rows === prompts.length ? cache : new KVCache(layers, rows, kvHeads, headDim, promptLen, keyStart);
  const arena = new Arena(); // the prefill's activations: only the last rows and the cache outlive it
  const hidden = model.forward({ k, tape: null, arena }, { ids, batch: rows, seqLen: promptLen, keyStart }, target);
  const lastRows = new Float32Array(prompts.length * dim);
  source.forEach((u, b) => {
    lastRows.set(hidden.data.subarray(((u + 1) * promptLen - 1) * dim, (u + 1) * promptLen * dim), b * dim);
    if (target !== cache) cache.copySequence(target, u, 0, b, 0, promptLen);
  });
  arena.release();
  cache.setLength(promptLen);
  return lastRows;
}

function generateWith(
  model: Transformer,
  k: Kernels,
  prompts: readonly (readonly number[])[],
  options: SamplingOptions,
): Generation[] {
  validate(options);
  const o = { temperature: options.temperature ?? 1, topK: options.topK ?? 0, topP: options.topP ?? 1 };
  const maxNew = options.maxNewTokens ?? DEFAULT_MAX_NEW_TOKENS;
  const rng = options.rng ?? new Rng(options.seed ?? 0);
  const stops = new Set(options.stopTokens ?? []);
  const name = options.name ?? 'the model';
  const decode = options.decode && namedDecode(options.decode, name);
  const batch = prompts.length;
  if (batch === 0) return [];
  if (prompts.some((p) => p.length === 0)) throw new Error('sampling: every prompt needs at least one token');
  const promptLen = Math.max(...prompts.map((p) => p.length));
  const capacity = promptLen + maxNew;
  if (capacity > model.cfg.maxPositions)
    throw new Error(
      `sampling: prompt ${promptLen} + ${maxNew} new tokens exceed the model's ${model.cfg.maxPositions} positions`,
    );
  const keyStart = Int32Array.from(prompts, (p) => promptLen - p.length);
  const cache = new KVCache(model.cfg.layers, batch, model.cfg.kvHeads, model.cfg.headDim, capacity, keyStart);
  const lastRows = prefill(model, k, prompts, promptLen, cache, options.sharePrefill ?? true);
  const vocab = model.cfg.vocabSize;
  // One logits array (and one for untruncated sampling's probabilities) reused by every step.
  const logits = model.logits(k, lastRows, batch, cache.buffer('logits', batch * vocab));
  const probs = o.temperature > 0 && o.topK === 0 && o.topP === 1 ? cache.buffer('probs', batch * vocab) : undefined;

  const out: Generation[] = prompts.map(() => ({ ids: [], logProbs: [], text: '', finishReason: 'length' }));
  const running = new Array<boolean>(batch).fill(true);
  const next = new Int32Array(batch);
  const logProb = new Float32Array(batch);
  const lse = new Float32Array(batch);
  for (let step = 0; step < maxNew; step++) {
    checkFiniteLogits(logits, vocab, running, step, name);
    const tokens = sampleRows(k, logits, vocab, running, o, rng, probs);
    k.gatherLogProbs(logits, tokens, logProb, lse, batch, vocab);
    // A safe point: a watcher counts the step's tokens, or abandons the sampling here.
    workPoint.generated(running.reduce((n, r) => n + (r ? 1 : 0), 0));
    for (let b = 0; b < batch; b++) {
      if (!running[b]) continue;
      const token = tokens[b]!;
      const g = out[b]!;
      g.ids.push(token);
      g.logProbs.push(logProb[b]!);
      next[b] = token;
      if (stops.has(token)) {
        g.finishReason = 'stop_token';
        running[b] = false;
      } else if (options.stopStrings?.length && decode) {
        const text = decode(g.ids);
        if (options.stopStrings.some((s) => text.includes(s))) {
          g.finishReason = 'stop_string';
          running[b] = false;
        }
      }
    }
    if (!running.includes(true) || step === maxNew - 1) break;
    // Finished sequences keep feeding their last token so the batch stays aligned; their outputs are ignored.
    model.logits(k, model.decodeStep(k, next, cache), batch, logits);
  }
  if (decode)
    for (const g of out) {
      g.text = decode(g.ids);
      if (g.finishReason === 'stop_string') {
        const cut = Math.min(...options.stopStrings!.map((s) => g.text.indexOf(s)).filter((i) => i >= 0));
        g.text = g.text.slice(0, cut);
      }
    }
  workPoint.finished(batch);
  return out;
}
