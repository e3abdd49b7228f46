// GPT-2's byte-level BPE conventions, shared by the GPT-2 tokenizer export and the BPE trainer.
import { addedToken, type AddedTokenSpec } from './tokenizer-files.js';

/**
 * GPT-2's byte -> character map: printable bytes stand for themselves and the rest are shifted to U+0100..,
 * so every byte string is a printable string (a space becomes 'Ġ', a newline 'Ċ').
 */
export const BYTE_TO_CHAR: readonly string[] = (() => {
  const printable = (b: number): boolean =>
    (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const out: string[] = [];
  let shifted = 0;
  for (let b = 0; b < 256; b++) out.push(String.fromCharCode(printable(b) ? b : 256 + shifted++));
  return out;
})();

/** The byte-level string of some bytes (one character per byte). */
export function byteLevelString(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += BYTE_TO_CHAR[b]!;
  return s;
}

/** GPT-2's pre-tokenizer split (contractions, letters, digits, other symbols, whitespace), as a JS regex source. */
export const GPT2_SPLIT = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/**
 * A byte-level BPE tokenizer.json as the tokenizers library writes GPT-2's: ByteLevel pre-tokenizer (GPT-2 split,
 * no prefix space), post-processor and decoder; merges in the classic "left right" string form, which every
 * version of the library reads. `added` tokens are never split; they should also be in `vocab`.
 */
export function byteLevelTokenizerJson(
  vocab: Record<string, number>,
  merges: readonly (readonly [string, string])[],
  added: readonly AddedTokenSpec[],
): Record<string, unknown> {
  const byteLevel = (addPrefixSpace: boolean, trimOffsets: boolean): Record<string, unknown> => ({
    type: 'ByteLevel',
    add_prefix_space: addPrefixSpace,
    trim_offsets: trimOffsets,
    use_regex: true,
  });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added.map(addedToken),
    normalizer: null,
    pre_tokenizer: byteLevel(false, true),
    post_processor: byteLevel(true, false),
    decoder: byteLevel(true, true),
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: merges.map(([a, b]) => `${a} ${b}`),
    },
  };
}
