/**
 * Continuous batching: every running sequence advances one token per decode step, all in one batch over one KV
 * cache; a new request is prefilled on its own and joins between steps, and a finished or cancelled one leaves
 * between steps. Each sequence draws from its own seeded generator and is prefilled alone (or shares the prefill of
 * an identical prompt admitted with it, the same computation), so its tokens are those `generate` gives for its
 * prompt alone with the same seed, whatever else is in the batch.
 */
import type { Kernels } from '../backend/kernels.js';
import { sampleRows } from '../model/generate.js';
import { KVCache } from '../model/kv-cache.js';
import type { Transformer } from '../model/transformer.js';
import { Arena } from '../tensor/tape.js';
import { Rng } from '../util/rng.js';

/** A token and its log-prob (nats, temperature 1, no truncation). */
export interface TokenLogProb {
  id: number;
  logProb: number;
}

/** One sampled token, as a sequence's `onToken` receives it. */
export interface SampledToken extends TokenLogProb {
  /** The most likely tokens at this step, most likely first (as many as the request's topLogprobs). */
  top: TokenLogProb[];
}

/** Why a sequence ended. */
export type SequenceEnd = 'stop_token' | 'stop_string' | 'length' | 'cancelled';

/** One request to continue a prompt. */
export interface SequenceRequest {
  /** Prompt token ids (at least one). */
  prompt: readonly number[];
  /** Most tokens to generate (≥ 1); prompt + maxTokens must fit the model's positions. */
  maxTokens: number;
  /** Softmax temperature; 0 = greedy. */
  temperature: number;
  /** Nucleus sampling mass in (0, 1]; 1 = off. */
  topP: number;
  /** Seed of this sequence's own generator. */
  seed: number;
  /** Token ids that end the sequence (kept as its last token). */
  stopTokens: ReadonlySet<number>;
  /** How many most-likely alternatives to report with each token; 0 = none. */
  topLogprobs: number;
  /** Receives each new token; returns true to end the sequence there (a stop string matched). */
  onToken: (token: SampledToken) => boolean;
}

interface Sequence {
  req: SequenceRequest;
  rng: Rng;
  generated: number;
  /** The last sampled token, fed at the next decode step. */
  pending: number;
  /** The cache holding this sequence's keys and values, and its row there. */
  cache: KVCache;
  slot: number;
  cancelled: boolean;
  done: (end: SequenceEnd) => void;
  fail: (e: Error) => void;
}

/** Decodes the sequences of one model together, admitting and retiring them between steps. */
export class Batcher {
  private readonly waiting: Sequence[] = [];
  private running: Sequence[] = [];
  /** Every sequence not yet ended, wherever it is (one being prefilled is neither waiting nor running). */
  private readonly live = new Set<Sequence>();
  /** The shared cache of the running sequences; rebuilt when one joins or leaves. */
  private batchCache: KVCache | null = null;
  private loop: Promise<void> | null = null;
  /** Most sequences decoded in one step so far. */
  peakBatch = 0;
  private readonly release: () => void;

  constructor(
    private readonly model: Transformer,
    private readonly k: Kernels,
    /** Most sequences decoded in one step; more wait for a place. */
    private readonly maxBatch: number,
  ) {
    // Decode-sized products run on [in, out] weight copies, made once for the server's life.
    this.release = model.holdInferenceWeights();
  }

  /** Sequences running or waiting. */
  get load(): number {
    return this.running.length + this.waiting.length;
  }

  /** Queues a sequence; resolves with how it ended. Aborting `signal` ends it between two steps. */
  submit(req: SequenceRequest, signal?: AbortSignal): Promise<SequenceEnd> {
    const cfg = this.model.cfg;
    if (req.prompt.length === 0) throw new Error('the prompt needs at least one token');
    if (req.prompt.length + req.maxTokens > cfg.maxPositions)
      throw new Error(
        `prompt ${req.prompt.length} + ${req.maxTokens} new tokens exceed the model's ${cfg.maxPositions} positions`,
      );
    return new Promise<SequenceEnd>((done, fail) => {
      const seq: Sequence = {
        req,
        rng: new Rng(req.seed),
        generated: 0,
        pending: -1,
        cache: null as unknown as KVCache,
        slot: 0,
        cancelled: false,
        done: (end) => {
          this.live.delete(seq);
          done(end);
        },
        fail: (e) => {
          this.live.delete(seq);
          fail(e);
        },
      };
      this.live.add(seq);
      signal?.addEventListener('abort', () => (seq.cancelled = true), { once: true });
      if (signal?.aborted) seq.cancelled = true;
      this.waiting.push(seq);
      this.loop ??= this.run().finally(() => (this.loop = null));
    });
  }

  /** Waits for every queued sequence to end, then drops the inference weight copies. */
  async close(): Promise<void> {
    await this.loop;
    this.release();
  }

  private async run(): Promise<void> {
    while (this.waiting.length > 0 || this.running.length > 0) {
      try {
        this.admit();
        this.step();
      } catch (e) {
        // A failed forward pass holds every running sequence's state, so it ends them all; the next request starts
        // afresh. (What one sequence does wrong, its sampling or its onToken, ends that sequence only: see emit.)
        for (const s of [...this.live]) s.fail(e as Error);
        this.waiting.length = 0;
        this.running = [];
        this.batchCache = null;
      }
      // Between steps the event loop runs: requests arrive, streams flush, clients cancel.
      await new Promise((r) => setImmediate(r));
    }
    this.batchCache = null;
  }

  /**
   * Prefills waiting sequences (each alone) while there is room, and samples their first token. Sequences admitted
   * together with identical prompts share one prefill (its cache and logits are only read afterwards).
   */
  private admit(): void {
    let joined = false;
    const prefilled = new Map<string, { cache: KVCache; logits: Float32Array }>();
    while (this.waiting.length > 0 && this.running.length < this.maxBatch) {
      const seq = this.waiting.shift()!;
      if (seq.cancelled) {
        seq.done('cancelled');
        continue;
      }
      const key = seq.req.prompt.join(',');
      let prefill = prefilled.get(key);
      if (!prefill) prefilled.set(key, (prefill = this.prefill(seq.req.prompt)));
      seq.cache = prefill.cache;
      seq.slot = 0;
      const end = this.emit([seq], prefill.logits)[0];
      if (end) this.finish(seq, end);
      else {
        this.running.push(seq);
        joined = true;
      }
    }
    if (joined) this.rebuild();
  }

  /** The cache of `prompt` alone and the logits of its next token. */
  private prefill(prompt: readonly number[]): { cache: KVCache; logits: Float32Array } {
    const { model, k } = this;
    const p = prompt.length;
    const cfg = model.cfg;
    const cache = new KVCache(cfg.layers, 1, cfg.kvHeads, cfg.headDim, p);
    const arena = new Arena();
    const hidden = model.forward(
      { k, tape: null, arena },
      { ids: Int32Array.from(prompt), batch: 1, seqLen: p },
      cache,
    );
    const logits = model.logits(k, hidden.data.slice((p - 1) * cfg.hidden, p * cfg.hidden), 1);
    arena.release();
    return { cache, logits };
  }

  /** One decode step of every running sequence; retires those that ended. */
  private step(): void {
    if (this.running.length === 0) return;
    const cancelled = this.running.filter((s) => s.cancelled);
    if (cancelled.length > 0) {
      for (const s of cancelled) s.done('cancelled');
      this.running = this.running.filter((s) => !s.cancelled);
      if (this.running.length === 0) return;
      this.rebuild();
    }
    const { model, k } = this;
    const cache = this.batchCache!;
    const batch = this.running.length;
    this.peakBatch = Math.max(this.peakBatch, batch);
    const hidden = model.decodeStep(
      k,
      Int32Array.from(this.running, (s) => s.pending),
      cache,
    );
    const logits = model.logits(k, hidden, batch, cache.buffer('logits', batch * model.cfg.vocabSize));
    const ends = this.emit(this.running, logits);
    if (ends.every((e) => e === null)) return;
    this.running.forEach((s, i) => ends[i] && this.finish(s, ends[i]));
    this.running = this.running.filter((_, i) => ends[i] === null);
    if (this.running.length > 0) this.rebuild();
  }

  /** Ends `seq` as `end` says: with how it ended, or with the error that ended it. */
  private finish(seq: Sequence, end: SequenceEnd | Error): void {
    if (end instanceof Error) seq.fail(end);
    else seq.done(end);
  }

  /**
   * Samples one token per sequence from its row of `logits`, hands it over, and says which sequences ended: how, or
   * with the error their sampling or onToken threw. One request's failure (a row top-p cannot sample, a client's
   * callback) is its own: the other rows of the batch go on.
   */
  private emit(seqs: readonly Sequence[], logits: Float32Array): (SequenceEnd | Error | null)[] {
    const { k } = this;
    const vocab = this.model.cfg.vocabSize;
    const tokens = new Int32Array(seqs.length);
    const failed: (Error | undefined)[] = [];
    seqs.forEach((s, i) => {
      const row = logits.subarray(i * vocab, (i + 1) * vocab);
      const knobs = { temperature: s.req.temperature, topP: s.req.topP, topK: 0 };
      try {
        tokens[i] = sampleRows(k, row, vocab, [true], knobs, s.rng)[0]!;
      } catch (e) {
        failed[i] = e as Error;
      }
    });
    const logProb = new Float32Array(seqs.length);
    const lse = new Float32Array(seqs.length);
    k.gatherLogProbs(logits, tokens, logProb, lse, seqs.length, vocab);
    return seqs.map((s, i) => {
      if (failed[i]) return failed[i];
      const id = tokens[i]!;
      s.generated++;
      s.pending = id;
      const row = logits.subarray(i * vocab, (i + 1) * vocab);
      // Undecodable ids have zero probability (Transformer.logits): never alternatives.
      const decodable = row.subarray(0, this.model.decodableIds);
      const top = s.req.topLogprobs > 0 ? topLogProbs(decodable, lse[i]!, s.req.topLogprobs) : [];
      let stopString: boolean;
      try {
        stopString = s.req.onToken({ id, logProb: logProb[i]!, top });
      } catch (e) {
        return e as Error;
      }
      if (s.req.stopTokens.has(id)) return 'stop_token';
      if (stopString) return 'stop_string';
      if (s.generated >= s.req.maxTokens) return 'length';
      return null;
    });
  }

  /**
   * A new shared cache for the running sequences: each one's filled positions copied right-aligned to a common
   * length (its left padding masked by keyStart, so its positions and attention are unchanged), with room for the
   * most tokens any of them may still feed.
   */
  private rebuild(): void {
    const cfg = this.model.cfg;
    const filled = this.running.map((s) => s.cache.length - (s.cache.keyStart?.[s.slot] ?? 0));
    const length = Math.max(...filled);
    const room = Math.max(...this.running.map((s) => s.req.maxTokens - s.generated));
    const keyStart = Int32Array.from(filled, (n) => length - n);
    const next = new KVCache(cfg.layers, this.running.length, cfg.kvHeads, cfg.headDim, length + room, keyStart);
    this.running.forEach((s, b) => {
      const from = s.cache;
      next.copySequence(from, s.slot, from.keyStart?.[s.slot] ?? 0, b, keyStart[b]!, filled[b]!);
      s.cache = next;
      s.slot = b;
    });
    next.setLength(length);
    this.batchCache = next;
  }
}

/** The `count` most likely tokens of a row of logits whose log-sum-exp is `lse`, most likely first. */
function topLogProbs(row: Float32Array, lse: number, count: number): TokenLogProb[] {
  const best: number[] = [];
  for (let i = 0; i < row.length; i++) {
    if (best.length === count && row[i]! <= row[best[count - 1]!]!) continue;
    let j = Math.min(best.length, count - 1);
    while (j > 0 && row[best[j - 1]!]! < row[i]!) j--;
    best.splice(j, 0, i);
    if (best.length > count) best.pop();
  }
  return best.map((id) => ({ id, logProb: row[id]! - lse }));
}
