// One token per character of a fixed alphabet (plus special tokens): for small agents on narrow tasks
// (arithmetic, puzzles) where a learned vocabulary only gets in the way.
import { ChatTemplate } from './chat-template.js';
import {
  addedToken,
  specialAdded,
  tokenizerConfigJson,
  writeTokenizerFiles,
  type SpecialTokenNames,
} from './tokenizer-files.js';
import {
  checkIds,
  literalAlternation,
  scanText,
  unknownCharacterError,
  type ChatMessage,
  type ChatTemplateOptions,
  type DecodeOptions,
  type EncodeOptions,
  type Tokenizer,
} from './tokenizer.js';

/** Options for CharTokenizer. */
export interface CharTokenizerOptions {
  /** The characters (Unicode code points), as a string or a list; duplicates are ignored. */
  alphabet: string | readonly string[];
  /** Special tokens, ids 0..n-1 in this order; they must include names.eos (and bos/pad/unk if named). */
  specialTokens: readonly string[];
  /** Which special tokens play which role; unk (optional) stands for characters outside the alphabet. */
  names: SpecialTokenNames;
  /** A Jinja chat template; default none. */
  chatTemplate?: string | null;
}

/** A character-level tokenizer: special tokens first, then the alphabet in order. */
export class CharTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly eosId: number;
  readonly bosId: number | undefined;
  readonly padId: number | undefined;
  readonly specialTokens: ReadonlyMap<string, number>;
  private readonly unkId: number | undefined;
  private readonly vocab: string[];
  private readonly ids: Map<string, number>;
  private readonly specialRe: RegExp | null;
  private readonly chat: ChatTemplate;

  constructor(private readonly opts: CharTokenizerOptions) {
    const chars = [...new Set(typeof opts.alphabet === 'string' ? Array.from(opts.alphabet) : opts.alphabet)];
    const bad = chars.find((c) => Array.from(c).length !== 1);
    if (bad !== undefined) throw new Error(`alphabet entry ${JSON.stringify(bad)} is not a single character`);
    if (new Set(opts.specialTokens).size !== opts.specialTokens.length)
      throw new Error('special tokens must be distinct');
    this.vocab = [...opts.specialTokens, ...chars.filter((c) => !opts.specialTokens.includes(c))];
    this.ids = new Map(this.vocab.map((t, i) => [t, i]));
    this.specialTokens = new Map(opts.specialTokens.map((t, i) => [t, i]));
    this.vocabSize = this.vocab.length;
    const special = (name: string | undefined, role: string): number | undefined => {
      if (name === undefined) return undefined;
      const id = this.specialTokens.get(name);
      if (id === undefined)
        throw new Error(`the ${role} token ${JSON.stringify(name)} is not one of the special tokens`);
      return id;
    };
    this.eosId = special(opts.names.eos, 'eos')!;
    this.bosId = special(opts.names.bos, 'bos');
    this.padId = special(opts.names.pad, 'pad');
    this.unkId = special(opts.names.unk, 'unk');
    this.specialRe = literalAlternation(opts.specialTokens);
    const n = opts.names;
    this.chat = new ChatTemplate(
      opts.chatTemplate ?? null,
      { bos_token: n.bos, eos_token: n.eos, pad_token: n.pad, unk_token: n.unk },
      'character tokenizer',
    );
  }

  get chatTemplate(): string | null {
    return this.chat.source;
  }

  /** Special tokens in the text become their ids; other characters must be in the alphabet (or map to unk). */
  encode(text: string, _opts: EncodeOptions = {}): number[] {
    const out: number[] = [];
    scanText(
      text,
      this.specialRe,
      (special) => out.push(this.specialTokens.get(special)!),
      (ch, at) => {
        const id = this.ids.get(ch) ?? this.unkId;
        if (id === undefined) throw unknownCharacterError(text, at, 'the alphabet of this character tokenizer');
        out.push(id);
      },
    );
    return out;
  }

  decode(ids: readonly number[], opts: DecodeOptions = {}): string {
    checkIds(ids, this.vocabSize);
    const skip = opts.skipSpecialTokens ?? false;
    return ids.map((id) => (skip && id < this.opts.specialTokens.length ? '' : this.vocab[id]!)).join('');
  }

  applyChatTemplate(messages: readonly ChatMessage[], opts: ChatTemplateOptions): string {
    return this.chat.render(messages, opts);
  }

  /**
   * The equivalent tokenizer.json: a BPE model without merges (so each character is its own token) and no
   * pre-tokenizer, special tokens as added tokens, and the Fuse decoder, which concatenates tokens as they are.
   */
  toTokenizerJson(): Record<string, unknown> {
    return {
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: specialAdded(this.specialTokens).map(addedToken),
      normalizer: null,
      pre_tokenizer: null,
      post_processor: null,
      decoder: { type: 'Fuse' },
      model: {
        type: 'BPE',
        dropout: null,
        unk_token: this.opts.names.unk ?? null,
        continuing_subword_prefix: null,
        end_of_word_suffix: null,
        fuse_unk: false,
        byte_fallback: false,
        ignore_merges: false,
        vocab: Object.fromEntries(this.ids),
        merges: [],
      },
    };
  }

  async save(dir: string): Promise<void> {
    await writeTokenizerFiles(
      dir,
      this.toTokenizerJson(),
      tokenizerConfigJson('PreTrainedTokenizerFast', this.opts.names, this.chatTemplate),
    );
  }
}
