// Trains a byte-level BPE tokenizer (GPT-2 style) and emits its tokenizer.json. Written here because the maintained
// JavaScript tokenizer libraries (@huggingface/tokenizers, js-tiktoken) only encode; none can train.
import { BYTE_TO_CHAR, byteLevelTokenizerJson, GPT2_SPLIT } from './byte-level.js';
import { HfTokenizer } from './hf-tokenizer.js';
import { tokenizerConfigJson, type SpecialTokenNames } from './tokenizer-files.js';

/** Options for trainBpe. */
export interface BpeTrainOptions {
  /** Target number of ids: special tokens + the 256 byte tokens + merged tokens. */
  vocabSize: number;
  /** Special tokens, given ids 0..n-1 in this order and never split; default ['<|endoftext|>']. */
  specialTokens?: string[];
  /** Stop merging when the most frequent pair occurs fewer times than this (the vocabulary is then smaller); default 2. */
  minFrequency?: number;
}

// Pair (a, b) of symbol ids as one number; ids stay below 2^21, so keys stay exact integers.
const SHIFT = 2 ** 21;

/**
 * Learns byte-level BPE merges from `corpus` and returns the tokenizer.json (ByteLevel pre-tokenizer with GPT-2's
 * split, so any text round-trips exactly). Pair counts are updated incrementally: a merge only revisits the words
 * that contain the pair, and a lazy max-heap finds the next most frequent pair.
 */
export function trainBpe(corpus: readonly string[], opts: BpeTrainOptions): Record<string, unknown> {
  const specials = opts.specialTokens ?? ['<|endoftext|>'];
  const minFrequency = opts.minFrequency ?? 2;
  if (new Set(specials).size !== specials.length) throw new Error('special tokens must be distinct');
  if (opts.vocabSize < specials.length + 256) {
    throw new Error(
      `vocabSize ${opts.vocabSize} is too small: ${specials.length} special tokens + 256 bytes are needed`,
    );
  }
  if (opts.vocabSize >= SHIFT) throw new Error(`vocabSize must be below ${SHIFT}`);
  const tokens = [...specials, ...BYTE_TO_CHAR];
  const ids = new Map(tokens.map((t, i) => [t, i]));
  const { words, freqs } = countWords(corpus, specials);
  const counts = new PairCounts(words, freqs);
  const merges: [string, string][] = [];
  while (tokens.length < opts.vocabSize) {
    const best = counts.popBest();
    if (best === undefined || best.count < minFrequency) break;
    const a = Math.floor(best.key / SHIFT);
    const b = best.key % SHIFT;
    const text = tokens[a]! + tokens[b]!;
    // Two different merges can spell the same string; like the tokenizers library's trainer, both map to one id.
    let id = ids.get(text);
    if (id === undefined) {
      id = tokens.length;
      tokens.push(text);
      ids.set(text, id);
    }
    merges.push([tokens[a]!, tokens[b]!]);
    counts.merge(best.key, a, b, id, words, freqs);
  }
  return byteLevelTokenizerJson(
    Object.fromEntries(ids),
    merges,
    specials.map((content, id) => ({ id, content, special: true })),
  );
}

/** Trains (see trainBpe) and builds the tokenizer, with `names` (eos defaults to the first special) and a chat template. */
export function trainBpeTokenizer(
  corpus: readonly string[],
  opts: BpeTrainOptions & { names?: Partial<SpecialTokenNames>; chatTemplate?: string | null },
): HfTokenizer {
  const specials = opts.specialTokens ?? ['<|endoftext|>'];
  const eos = opts.names?.eos ?? specials[0];
  if (eos === undefined) throw new Error('a BPE tokenizer needs an eos token: give specialTokens or names.eos');
  const config = tokenizerConfigJson('PreTrainedTokenizerFast', { ...opts.names, eos }, opts.chatTemplate ?? null);
  return new HfTokenizer(trainBpe(corpus, opts), config, 'trained BPE tokenizer');
}

// Unique pre-tokenized words (as byte symbol ids) with their frequencies; special tokens are cut out of the text
// first so their pieces do not become merges.
function countWords(corpus: readonly string[], specials: readonly string[]): { words: number[][]; freqs: number[] } {
  const split = new RegExp(GPT2_SPLIT, 'gu');
  const cut = specials.length
    ? new RegExp(specials.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'gu')
    : null;
  const freq = new Map<string, number>();
  for (const doc of corpus) {
    for (const part of cut ? doc.split(cut) : [doc]) {
      for (const m of part.matchAll(split)) freq.set(m[0], (freq.get(m[0]) ?? 0) + 1);
    }
  }
  const enc = new TextEncoder();
  const base = specials.length;
  const words: number[][] = [];
  const freqs: number[] = [];
  for (const [w, f] of freq) {
    words.push(Array.from(enc.encode(w), (b) => base + b));
    freqs.push(f);
  }
  return { words, freqs };
}

// Pair frequencies over the words, which words hold each pair (a superset: stale entries are skipped), and a max-heap
// of (count, pair) entries that may be outdated: an entry is trusted only if its count is still the pair's count.
class PairCounts {
  private readonly count = new Map<number, number>();
  private readonly where = new Map<number, Set<number>>();
  private readonly heapCount: number[] = [];
  private readonly heapKey: number[] = [];

  constructor(words: readonly (readonly number[])[], freqs: readonly number[]) {
    const none = new Map<number, number>();
    words.forEach((w, i) => this.addWord(w, freqs[i]!, i, none));
    for (const [k, c] of this.count) this.push(c, k);
  }

  private addWord(word: readonly number[], freq: number, index: number, delta: Map<number, number>): void {
    for (const k of pairKeys(word)) {
      this.count.set(k, (this.count.get(k) ?? 0) + freq);
      let set = this.where.get(k);
      if (!set) this.where.set(k, (set = new Set()));
      set.add(index);
      delta.set(k, (delta.get(k) ?? 0) + freq);
    }
  }

  private removeWord(word: readonly number[], freq: number, delta: Map<number, number>): void {
    for (const k of pairKeys(word)) {
      const c = this.count.get(k)! - freq;
      if (c > 0) this.count.set(k, c);
      else this.count.delete(k);
      delta.set(k, (delta.get(k) ?? 0) - freq);
    }
  }

  /** Replaces every (a, b) in the words holding it by `id`, updating the counts of the pairs around it. */
  merge(key: number, a: number, b: number, id: number, words: number[][], freqs: readonly number[]): void {
    const delta = new Map<number, number>();
    for (const w of this.where.get(key) ?? []) {
      const word = words[w]!;
      if (!pairKeys(word).includes(key)) continue;
      const merged: number[] = [];
      for (let i = 0; i < word.length; i++) {
        if (i + 1 < word.length && word[i] === a && word[i + 1] === b) {
          merged.push(id);
          i++;
        } else merged.push(word[i]!);
      }
      this.removeWord(word, freqs[w]!, delta);
      this.addWord(merged, freqs[w]!, w, delta);
      words[w] = merged;
    }
    this.where.delete(key);
    // Only pairs that gained need a new heap entry; the entries of pairs that lost are corrected when popped.
    for (const [k, d] of delta) if (d > 0) this.push(this.count.get(k)!, k);
  }

  /** The most frequent pair (ties: the smaller pair of ids), or undefined when no pair is left. */
  popBest(): { key: number; count: number } | undefined {
    while (this.heapKey.length > 0) {
      const key = this.heapKey[0]!;
      const count = this.heapCount[0]!;
      this.pop();
      const now = this.count.get(key) ?? 0;
      if (now === count) return { key, count };
      if (now > 0) this.push(now, key);
    }
    return undefined;
  }

  private above(i: number, j: number): boolean {
    const ci = this.heapCount[i]!;
    const cj = this.heapCount[j]!;
    return ci > cj || (ci === cj && this.heapKey[i]! < this.heapKey[j]!);
  }

  private swap(i: number, j: number): void {
    [this.heapCount[i], this.heapCount[j]] = [this.heapCount[j]!, this.heapCount[i]!];
    [this.heapKey[i], this.heapKey[j]] = [this.heapKey[j]!, this.heapKey[i]!];
  }

  private push(count: number, key: number): void {
    this.heapCount.push(count);
    this.heapKey.push(key);
    for (let i = this.heapKey.length - 1; i > 0;) {
      const p = (i - 1) >> 1;
      if (!this.above(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }

  private pop(): void {
    const last = this.heapKey.length - 1;
    this.swap(0, last);
    this.heapCount.pop();
    this.heapKey.pop();
    for (let i = 0; ;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let top = i;
      if (l < last && this.above(l, top)) top = l;
      if (r < last && this.above(r, top)) top = r;
      if (top === i) break;
      this.swap(i, top);
      i = top;
    }
  }
}

function pairKeys(word: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i + 1 < word.length; i++) out.push(word[i]! * SHIFT + word[i + 1]!);
  return out;
}
