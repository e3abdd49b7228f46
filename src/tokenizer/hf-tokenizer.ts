// A Hugging Face fast-tokenizer folder (tokenizer.json + tokenizer_config.json) through @huggingface/tokenizers,
// the maintained pure-JS port of the Rust `tokenizers` library (BPE, WordPiece, Unigram models; the usual
// normalizers, pre-tokenizers, post-processors and decoders).
import { Tokenizer as HfLibTokenizer } from '@huggingface/tokenizers';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseWith, pathExists, readJsonFile } from '../util/json-file.js';
import { ChatTemplate } from './chat-template.js';
import {
  configChatTemplate,
  tokenText,
  TokenizerConfigSchema,
  TokenizerJsonSchema,
  writeTokenizerFiles,
  type TokenizerConfig,
  type TokenizerJson,
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

// When tokenizer_config.json names no eos token, the first of these the vocabulary has is taken.
const EOS_GUESSES = ['<|endoftext|>', '<|end_of_text|>', '</s>', '<eos>', '<|im_end|>'];

/** A tokenizer defined by a tokenizer.json (and optional tokenizer_config.json). */
export class HfTokenizer implements Tokenizer {
  /** The parsed tokenizer.json (kept to save it unchanged). */
  readonly json: TokenizerJson;
  /** The parsed tokenizer_config.json ({} when absent). */
  readonly config: TokenizerConfig;
  readonly vocabSize: number;
  readonly eosId: number;
  readonly bosId: number | undefined;
  readonly padId: number | undefined;
  readonly specialTokens: ReadonlyMap<string, number>;
  private readonly lib: HfLibTokenizer;
  private readonly chat: ChatTemplate;
  private readonly cleanUpSpaces: boolean;
  // Set when the model can drop characters silently (see dropsUnknown); matches the added tokens, longest first.
  private readonly addedRe: RegExp | null | undefined;
  private readonly source: string;

  /**
   * Builds a tokenizer from tokenizer.json and tokenizer_config.json contents; `source` (a folder, usually) names
   * it in errors; `chatTemplate` overrides the config's (e.g. one read from chat_template.jinja).
   */
  constructor(
    tokenizerJson: unknown,
    tokenizerConfig: unknown = {},
    source: string = '<memory>',
    chatTemplate?: string | null,
  ) {
    this.json = parseWith(TokenizerJsonSchema, tokenizerJson, `tokenizer.json of ${source}`);
    this.config = parseWith(TokenizerConfigSchema, tokenizerConfig, `tokenizer_config.json of ${source}`);
    try {
      this.lib = new HfLibTokenizer(this.json, this.config);
    } catch (e) {
      throw new Error(`the tokenizer of ${source} cannot be built: ${(e as Error).message}`);
    }
    let maxId = -1;
    for (const id of this.lib.get_vocab(true).values()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;
    const idOf = (text: string | undefined, what: string): number | undefined => {
      if (text === undefined) return undefined;
      const id = this.lib.token_to_id(text);
      if (id === undefined)
        throw new Error(`the ${what} ${JSON.stringify(text)} of ${source} is not in its vocabulary`);
      return id;
    };
    const eosText = tokenText(this.config.eos_token) ?? EOS_GUESSES.find((t) => this.lib.token_to_id(t) !== undefined);
    const eos = idOf(eosText, 'eos_token');
    if (eos === undefined)
      throw new Error(`the tokenizer of ${source} has no eos token: set eos_token in its tokenizer_config.json`);
    this.eosId = eos;
    this.bosId = idOf(tokenText(this.config.bos_token), 'bos_token');
    this.padId = idOf(tokenText(this.config.pad_token), 'pad_token');
    this.specialTokens = new Map(this.json.added_tokens.filter((t) => t.special).map((t) => [t.content, t.id]));
    // transformers' default here changed over versions; unless the config asks for clean-up, decode stays exact.
    this.cleanUpSpaces = this.config.clean_up_tokenization_spaces === true;
    this.source = source;
    if (dropsUnknown(this.json)) this.addedRe = literalAlternation(this.json.added_tokens.map((t) => t.content));
    const tokens = {
      bos_token: tokenText(this.config.bos_token),
      eos_token: eosText,
      pad_token: tokenText(this.config.pad_token),
      unk_token: tokenText(this.config.unk_token),
    };
    this.chat = new ChatTemplate(
      chatTemplate === undefined ? configChatTemplate(this.config) : chatTemplate,
      tokens,
      source,
    );
  }

  /**
   * Loads `dir`: tokenizer.json (required, unless its parsed content is given as `tokenizerJson`),
   * tokenizer_config.json (optional), and the chat template from the config or, as newer transformers save it,
   * from chat_template.jinja or chat_template.json (which take precedence, as in transformers).
   */
  static async fromDir(dir: string, tokenizerJson?: unknown): Promise<HfTokenizer> {
    const json = tokenizerJson ?? (await readJsonFile(join(dir, 'tokenizer.json')));
    return new HfTokenizer(json, await readTokenizerConfig(dir), dir, await readSideTemplate(dir));
  }

  get chatTemplate(): string | null {
    return this.chat.source;
  }

  /** Token ids of `text`; throws naming the character when the model would silently drop one (see dropsUnknown). */
  encode(text: string, opts: EncodeOptions = {}): number[] {
    const enc = this.lib.encode(text, { add_special_tokens: opts.addSpecialTokens ?? false });
    // Such a model's tokens spell the text verbatim, so a mismatch means characters went missing (or the
    // post-processor added tokens, which the scan below tells apart).
    if (this.addedRe !== undefined && enc.tokens.join('') !== text) this.refuseUnknown(text);
    return enc.ids;
  }

  // Throws for the first character outside the added tokens that has no token of its own.
  private refuseUnknown(text: string): void {
    scanText(
      text,
      this.addedRe ?? null,
      () => {},
      (ch, at) => {
        if (this.lib.token_to_id(ch) === undefined)
          throw unknownCharacterError(text, at, `the vocabulary of the tokenizer of ${this.source}`);
      },
    );
  }

  decode(ids: readonly number[], opts: DecodeOptions = {}): string {
    if (ids.length === 0) return '';
    checkIds(ids, this.vocabSize);
    return this.lib.decode([...ids], {
      skip_special_tokens: opts.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: this.cleanUpSpaces,
    });
  }

  applyChatTemplate(messages: readonly ChatMessage[], opts: ChatTemplateOptions): string {
    return this.chat.render(messages, opts);
  }

  /** The token text of `id` (byte-level tokens in their encoded form, e.g. 'Ġworld'), or undefined. */
  idToToken(id: number): string | undefined {
    return this.lib.id_to_token(id);
  }

  /** The id of a token text, or undefined when it is not in the vocabulary. */
  tokenToId(token: string): number | undefined {
    return this.lib.token_to_id(token);
  }

  async save(dir: string): Promise<void> {
    const template = this.chat.source;
    await writeTokenizerFiles(dir, this.json, {
      ...this.config,
      ...(template === null ? {} : { chat_template: template }),
    });
  }
}

/**
 * True for a BPE model without an unk token or byte fallback whose tokens are pieces of the raw text (no normalizer,
 * pre-tokenizer or subword affixes): a character-level vocabulary as CharTokenizer saves it, or any BPE like it. The
 * tokenizers library (as the Rust original) skips a character such a model has no token for, so encode checks.
 * Other models either cannot meet an unknown character (byte-level BPE) or map it to their unk token.
 */
function dropsUnknown(json: TokenizerJson): boolean {
  const m = json.model as Record<string, unknown>;
  const none = (v: unknown): boolean => v === undefined || v === null || v === '';
  return (
    m['type'] === 'BPE' &&
    none(m['unk_token']) &&
    m['byte_fallback'] !== true &&
    none(m['continuing_subword_prefix']) &&
    none(m['end_of_word_suffix']) &&
    json.normalizer === null &&
    json.pre_tokenizer === null
  );
}

/** A folder's tokenizer_config.json as JSON ({} when it has none). */
export async function readTokenizerConfig(dir: string): Promise<unknown> {
  const path = join(dir, 'tokenizer_config.json');
  return (await pathExists(path)) ? readJsonFile(path) : {};
}

// The chat template file a folder may have beside tokenizer_config.json; undefined when there is none.
async function readSideTemplate(dir: string): Promise<string | undefined> {
  const jinja = join(dir, 'chat_template.jinja');
  if (await pathExists(jinja)) return readFile(jinja, 'utf8');
  const json = join(dir, 'chat_template.json');
  if (!(await pathExists(json))) return undefined;
  const parsed = parseWith(TokenizerConfigSchema, await readJsonFile(json), json);
  return configChatTemplate(parsed) ?? undefined;
}
