/**
 * Cross-tokenizer re-tokenization (spec hacpo.md §4, §6): when agent k (the learner) trains on a response that agent
 * j (the generator) sampled with another tokenizer, the response goes through text — never through ids — and the
 * generator's old log-prob mean is taken over the matching EOS-less span of its own tokens.
 *
 * Decisions (each tested in test/retokenize.test.ts):
 * - Text is the generator's decode with special tokens skipped, so the learner trains on exactly the text the
 *   reward saw (Rollout.text). Bytes that form no character (e.g. a truncated response cut inside a multi-byte
 *   UTF-8 character by a byte-level BPE) decode to U+FFFD there, and so the learner gets U+FFFD too.
 * - Literal special-token strings in that text (e.g. a GPT-2 generator spelling "<|endoftext|>" from the pieces
 *   "<|", "endoftext", "|>") stay text for the learner: they are encoded character by character, never as the
 *   learner's special ids, so its EOS appears only at the end.
 * - An EOS-only response becomes just [learner EOS] and its generator span is that EOS (both sides measure "stop at
 *   once"); an empty truncated response (no ids at all, or only special ids) gives the learner no tokens.
 * - A learner that cannot spell the text (a character tokenizer without an unk token, in memory or loaded from its
 *   tokenizer.json, meeting a character outside its alphabet) raises UnencodableTextError, which the trainer catches
 *   to drop that sample and count it (foreign_dropped). Dropping, not an unk token: a learner trained on "<unk>" for
 *   another agent's stray bytes would learn to emit a token that means nothing, and the reward it is credited with
 *   was earned by a text it never saw.
 */
import { CharTokenizer } from '../tokenizer/char-tokenizer.js';
import { HfTokenizer } from '../tokenizer/hf-tokenizer.js';
import { literalAlternation, type Tokenizer } from '../tokenizer/tokenizer.js';

/** A response as the learner will train on it. */
export interface LearnerResponse {
  /** The learner's own rendering of the prompt, in learner ids (passed in, not copied). */
  promptIds: number[];
  /**
   * The response in learner ids: ends with the learner's EOS when the generator stopped by EOS. Empty only for a
   * truncated response whose text is empty (such a sample has no learner token to train on).
   */
  responseIds: number[];
  /** How many leading tokens of the generator's responseIds enter the generator's old log-prob mean. */
  generatorSpan: number;
}

/** Thrown when the learner's tokenizer cannot encode a generator's text, so the trainer can skip just that sample. */
export class UnencodableTextError extends Error {
  /** `text`: the generator's text the learner could not encode. */
  constructor(
    message: string,
    readonly text: string,
  ) {
    super(message);
    this.name = 'UnencodableTextError';
  }
}

// Per-tokenizer serialized vocabulary (null: not comparable) and per-pair verdicts, so a large vocabulary (Qwen3's
// tokenizer.json is megabytes) is serialized once per tokenizer and compared once per pair, not once per response.
const fingerprints = new WeakMap<Tokenizer, string | null>();
const verdicts = new WeakMap<Tokenizer, WeakMap<Tokenizer, boolean>>();

/** The serialized tokenizer definition, when the implementation exposes one; null means "cannot tell". */
function fingerprint(t: Tokenizer): string | null {
  let fp = fingerprints.get(t);
  if (fp === undefined) {
    if (t instanceof HfTokenizer) fp = `hf:${JSON.stringify(t.json)}`;
    else if (t instanceof CharTokenizer) fp = `char:${JSON.stringify(t.toTokenizerJson())}`;
    else fp = null;
    fingerprints.set(t, fp);
  }
  return fp;
}

/**
 * True when ids of `a` mean the same tokens to `b`, so responses pass between them unchanged (exact GSPO ratio).
 * Sound, not complete: the same object, or two tokenizers of the same kind (HF tokenizer.json or character
 * tokenizer) with identical serialized definitions and the same EOS. Anything else (e.g. two Gpt2Tokenizer
 * instances, or a GPT-2 loaded from a folder against Gpt2Tokenizer) reads as different and is re-tokenized, which is
 * still correct, only not id-identical.
 */
export function sameTokenization(a: Tokenizer, b: Tokenizer): boolean {
  if (a === b) return true;
  if (a.eosId !== b.eosId || a.vocabSize !== b.vocabSize) return false;
  let byB = verdicts.get(a);
  const known = byB?.get(b);
  if (known !== undefined) return known;
  const fa = fingerprint(a);
  const same = fa !== null && fa === fingerprint(b);
  if (!byB) verdicts.set(a, (byB = new WeakMap()));
  byB.set(b, same);
  return same;
}

/** Throws naming `what` and the first id outside [0, vocabSize), so a cross-tokenizer mix-up is caught early. */
function checkRange(ids: readonly number[], vocabSize: number, what: string): void {
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize)
      throw new Error(
        `${what}: token id ${id} at position ${i} is outside the vocabulary (0..${vocabSize - 1}); ` +
          'ids of one tokenizer were given to another?',
      );
  }
}

/** Throws unless `stoppedByEos` agrees with the last id, since a wrong flag would silently drop or keep a token. */
function checkStopFlag(ids: readonly number[], stoppedByEos: boolean, generator: Tokenizer): void {
  const last = ids.at(-1);
  if (stoppedByEos) {
    const isStop =
      last === generator.eosId || (last !== undefined && [...generator.specialTokens.values()].includes(last));
    if (!isStop)
      throw new Error(
        `stoppedByEos is true but the generator's last id is ${last === undefined ? 'missing (empty response)' : last}, ` +
          `not its EOS (${generator.eosId}) or another special stop token; a response cut by a stop string or by the ` +
          'length limit has no EOS: pass stoppedByEos = false for it',
      );
  } else if (last !== undefined && last === generator.eosId) {
    throw new Error(
      `stoppedByEos is false but the generator's last id is its EOS (${generator.eosId}); pass stoppedByEos = true`,
    );
  }
}

// Special-token strings of the learner, longest first (so one that contains another is matched whole), as a regex.
const specialRegexes = new WeakMap<Tokenizer, RegExp | null>();

/** A regex matching any of the learner's special-token strings, memoized per tokenizer (null: it has none). */
function specialRegex(t: Tokenizer): RegExp | null {
  let re = specialRegexes.get(t);
  if (re === undefined) {
    re = literalAlternation(t.specialTokens.keys());
    specialRegexes.set(t, re);
  }
  return re;
}

/**
 * Encodes `text` as plain text: the learner's special-token strings inside it are spelled character by character,
 * because plain encode would turn them into special ids (a mid-response EOS, or a pad the loss may mask).
 */
function encodePlain(learner: Tokenizer, text: string): number[] {
  if (text === '') return [];
  const re = specialRegex(learner);
  const parts = re ? text.split(re) : [text];
  const out: number[] = [];
  parts.forEach((part, i) => {
    // split() with a capturing group puts the matched special strings at the odd positions.
    if (i % 2 === 0) out.push(...learner.encode(part, { addSpecialTokens: false }));
    else for (const ch of part) out.push(...learner.encode(ch, { addSpecialTokens: false }));
  });
  return out;
}

/**
 * The generator's response as the learner trains on it (spec §6): same tokenization → ids unchanged and the span is
 * the whole response, EOS included (exact GSPO ratio); otherwise through text without the terminal EOS, the
 * learner's EOS appended iff the generator stopped by EOS, and the span is the generator's EOS-less token count
 * (the EOS itself when that is all it emitted). `stoppedByEos` must be true exactly when the last generator id is
 * the EOS (or another special stop token) that ended generation.
 */
export function retokenizeResponse(
  generatorIds: readonly number[],
  stoppedByEos: boolean,
  generator: Tokenizer,
  learner: Tokenizer,
  learnerPromptIds: number[],
): LearnerResponse {
  checkRange(generatorIds, generator.vocabSize, "generator response ids (generator's tokenizer)");
  checkRange(learnerPromptIds, learner.vocabSize, "learner prompt ids (learner's tokenizer)");
  checkStopFlag(generatorIds, stoppedByEos, generator);
  if (sameTokenization(generator, learner))
    return { promptIds: learnerPromptIds, responseIds: [...generatorIds], generatorSpan: generatorIds.length };

  const body = stoppedByEos ? generatorIds.slice(0, -1) : generatorIds;
  const text = generator.decode(body, { skipSpecialTokens: true });
  let ids: number[];
  try {
    ids = encodePlain(learner, text);
  } catch (e) {
    throw new UnencodableTextError(
      `the learner's tokenizer cannot encode the generator's response text: ${(e as Error).message}`,
      text,
    );
  }
  checkRange(ids, learner.vocabSize, "re-tokenized response ids (learner's tokenizer)");
  if (ids.includes(learner.eosId))
    throw new UnencodableTextError(
      `the learner's tokenizer encodes part of the generator's text as its EOS (${learner.eosId})`,
      text,
    );
  if (stoppedByEos) ids.push(learner.eosId);
  // An EOS-only response: the generator's mean is over its EOS, the learner's over its EOS (both "stop at once").
  const generatorSpan = body.length === 0 ? generatorIds.length : body.length;
  return { promptIds: learnerPromptIds, responseIds: ids, generatorSpan };
}

/**
 * Mean of the first `span` log-probs: the generator's side of the cross-agent GSPO ratio (spec §4), computed over
 * the span retokenizeResponse chose. A span of 0 (an empty truncated response) gives 0 (log 1: no evidence).
 */
export function spanMean(logProbs: ArrayLike<number>, span: number): number {
  if (!Number.isInteger(span) || span < 0) throw new Error(`span must be a non-negative integer, got ${span}`);
  if (span > logProbs.length)
    throw new Error(`span ${span} is longer than the ${logProbs.length} log-probs of the generator's response`);
  if (span === 0) return 0;
  let sum = 0;
  for (let i = 0; i < span; i++) sum += logProbs[i]!;
  return sum / span;
}
