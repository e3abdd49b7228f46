// GPT-2's byte-level BPE through js-tiktoken and its bundled `gpt2` ranks (offline), with an exporter to the
// equivalent Hugging Face tokenizer.json so a GPT-2 folder we write is a complete HF checkpoint.
import { Tiktoken } from 'js-tiktoken/lite';
import gpt2Ranks from 'js-tiktoken/ranks/gpt2';
import { byteLevelString, byteLevelTokenizerJson } from './byte-level.js';
import { ChatTemplate } from './chat-template.js';
import { tokenizerConfigJson, writeTokenizerFiles } from './tokenizer-files.js';
import {
  checkIds,
  type ChatMessage,
  type ChatTemplateOptions,
  type DecodeOptions,
  type EncodeOptions,
  type Tokenizer,
} from './tokenizer.js';

/** GPT-2's end-of-text token, its only special token (also its bos). */
export const GPT2_EOS = '<|endoftext|>';
/** The id of <|endoftext|>. */
export const GPT2_EOS_ID = 50256;

let encoder: Tiktoken | undefined;
let hfJson: Record<string, unknown> | undefined;

/** GPT-2's tokenizer (50,257 ids) via js-tiktoken. */
export class Gpt2Tokenizer implements Tokenizer {
  readonly vocabSize = GPT2_EOS_ID + 1;
  readonly eosId = GPT2_EOS_ID;
  readonly bosId = GPT2_EOS_ID;
  readonly padId = undefined;
  readonly specialTokens: ReadonlyMap<string, number> = new Map([[GPT2_EOS, GPT2_EOS_ID]]);
  private readonly chat: ChatTemplate;
  private readonly enc: Tiktoken;

  /** `chatTemplate`: an optional Jinja chat template (GPT-2 ships none); default none. */
  constructor(opts: { chatTemplate?: string | null } = {}) {
    encoder ??= new Tiktoken(gpt2Ranks);
    this.enc = encoder;
    this.chat = new ChatTemplate(opts.chatTemplate ?? null, { bos_token: GPT2_EOS, eos_token: GPT2_EOS }, 'GPT-2');
  }

  get chatTemplate(): string | null {
    return this.chat.source;
  }

  /** GPT-2 adds no special tokens of its own, so addSpecialTokens changes nothing. */
  encode(text: string, _opts: EncodeOptions = {}): number[] {
    // '<|endoftext|>' in the text is the special token, as in the Hugging Face tokenizer (an added token).
    return this.enc.encode(text, 'all');
  }

  decode(ids: readonly number[], opts: DecodeOptions = {}): string {
    checkIds(ids, this.vocabSize);
    return this.enc.decode(opts.skipSpecialTokens ? ids.filter((id) => id !== GPT2_EOS_ID) : [...ids]);
  }

  applyChatTemplate(messages: readonly ChatMessage[], opts: ChatTemplateOptions): string {
    return this.chat.render(messages, opts);
  }

  async save(dir: string): Promise<void> {
    const config = {
      ...tokenizerConfigJson('GPT2Tokenizer', { bos: GPT2_EOS, eos: GPT2_EOS, unk: GPT2_EOS }, this.chatTemplate),
      model_max_length: 1024,
    };
    await writeTokenizerFiles(dir, gpt2TokenizerJson(), config);
  }
}

// The ranks file lists base64 tokens in rank order, in lines "<tag> <first rank> <token> <token> ...".
function parseRanks(): string[] {
  const tokens: string[] = [];
  for (const line of gpt2Ranks.bpe_ranks.split('\n')) {
    if (!line) continue;
    const [, first, ...toks] = line.split(' ');
    toks.forEach((t, i) => (tokens[Number(first) + i] = byteLevelString(Buffer.from(t, 'base64'))));
  }
  return tokens;
}

/**
 * GPT-2's Hugging Face tokenizer.json, derived from the tiktoken ranks (memoized; ~1 s the first time). The vocab
 * is token -> rank. Merge r - 256 makes the token of rank r: it joins the two parts that byte-pair encoding with
 * only the ranks below r leaves, which is how tiktoken itself recovers GPT-2's merges from its ranks.
 */
export function gpt2TokenizerJson(): Record<string, unknown> {
  if (hfJson) return hfJson;
  const tokens = parseRanks();
  const rank = new Map(tokens.map((t, r) => [t, r]));
  const merges: [string, string][] = [];
  for (let r = 256; r < tokens.length; r++) {
    const parts = bytePairSplit(tokens[r]!, rank, r);
    if (parts.length !== 2)
      throw new Error(`GPT-2 rank ${r} (${tokens[r]}) does not split into two lower-ranked tokens`);
    merges.push([parts[0]!, parts[1]!]);
  }
  const vocab = Object.fromEntries(tokens.map((t, r) => [t, r]));
  vocab[GPT2_EOS] = GPT2_EOS_ID;
  hfJson = byteLevelTokenizerJson(vocab, merges, [{ id: GPT2_EOS_ID, content: GPT2_EOS, special: true }]);
  return hfJson;
}

// Byte-pair encoding of a (byte-level) string with the ranks below maxRank: repeatedly join the adjacent pair whose
// union has the lowest rank.
function bytePairSplit(token: string, rank: ReadonlyMap<string, number>, maxRank: number): string[] {
  const parts = [...token];
  for (;;) {
    let best = -1;
    let bestRank = maxRank;
    for (let i = 0; i + 1 < parts.length; i++) {
      const r = rank.get(parts[i]! + parts[i + 1]!);
      if (r !== undefined && r < bestRank) {
        bestRank = r;
        best = i;
      }
    }
    if (best < 0) return parts;
    parts.splice(best, 2, parts[best]! + parts[best + 1]!);
  }
}
