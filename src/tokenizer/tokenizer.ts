// The one tokenizer interface the rest of hacrl uses, whatever implementation is behind it.

/** A chat message as chat templates see it; templates may also read extra fields (tool_calls, reasoning_content). */
export interface ChatMessage {
  /** 'system', 'user', 'assistant' or 'tool'. */
  role: string;
  /** The message text. */
  content: string;
  /** Extra fields a template may use. */
  [extra: string]: unknown;
}

/** Options for encode. */
export interface EncodeOptions {
  /**
   * Add the tokenizer's own special tokens around the text (its post-processor, e.g. Llama 3's BOS). Default false,
   * unlike transformers: chat templates already spell out their special tokens, and adding them again doubles them.
   */
  addSpecialTokens?: boolean;
}

/** Options for decode. */
export interface DecodeOptions {
  /** Leave special tokens (eos, chat markers) out of the text; default false. */
  skipSpecialTokens?: boolean;
}

/** Options for applyChatTemplate. */
export interface ChatTemplateOptions {
  /** End with the header that opens the assistant's turn, so generation continues as the assistant. */
  addGenerationPrompt: boolean;
  /** More template variables (e.g. `enable_thinking: false` for Qwen3, `tools`); default none. */
  variables?: Record<string, unknown>;
}

/** Text <-> token ids, plus the special ids and the chat format a model was trained with. */
export interface Tokenizer {
  /** One more than the largest id this tokenizer can produce (added tokens included). */
  readonly vocabSize: number;
  /** The end-of-sequence id (the tokenizer_config's eos_token). */
  readonly eosId: number;
  /** The beginning-of-sequence id, if the tokenizer has one. */
  readonly bosId: number | undefined;
  /** The padding id, if the tokenizer has one. */
  readonly padId: number | undefined;
  /** Special tokens (text -> id): never split, dropped by decode with skipSpecialTokens. */
  readonly specialTokens: ReadonlyMap<string, number>;
  /** The Jinja chat template, or null when the tokenizer has none. */
  readonly chatTemplate: string | null;
  /** Token ids of `text`. */
  encode(text: string, opts?: EncodeOptions): number[];
  /** The text of `ids`; throws on ids outside the vocabulary. */
  decode(ids: readonly number[], opts?: DecodeOptions): string;
  /** Renders `messages` with the chat template; throws when the tokenizer has none. */
  applyChatTemplate(messages: readonly ChatMessage[], opts: ChatTemplateOptions): string;
  /** Writes tokenizer.json and tokenizer_config.json (with the chat template) into `dir` atomically, creating it. */
  save(dir: string): Promise<void>;
}

/**
 * Throws unless every id of `tokenizer` indexes a row of a model embedding with `modelVocabSize` rows. A model
 * vocabulary larger than the tokenizer's is fine (checkpoints pad it, e.g. Qwen3: 151,669 ids, 151,936 rows).
 */
export function assertVocabCompatible(tokenizer: Pick<Tokenizer, 'vocabSize'>, modelVocabSize: number): void {
  if (tokenizer.vocabSize > modelVocabSize) {
    throw new Error(
      `tokenizer/model mismatch: the tokenizer produces ids up to ${tokenizer.vocabSize - 1} but the model's ` +
        `embedding has only ${modelVocabSize} rows (ids 0..${modelVocabSize - 1}); use the tokenizer saved with this ` +
        `model, or resize the model's vocabulary to at least ${tokenizer.vocabSize}`,
    );
  }
}

/** Throws unless every id is an integer in [0, vocabSize), naming the first bad one. */
export function checkIds(ids: readonly number[], vocabSize: number): void {
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new Error(`token id ${id} is outside the vocabulary (0..${vocabSize - 1})`);
    }
  }
}

/**
 * The error for a character a tokenizer has no id for (and no unk token to map it to). Refusing, rather than
 * dropping the character as the Hugging Face BPE model does, is deliberate: a prompt that silently loses characters
 * is a different prompt (e.g. a question template written for another agent), and nothing would say so. The message
 * quotes the text around the character so the user can tell which input (template, data row, system text) holds it.
 */
export function unknownCharacterError(text: string, index: number, vocabulary: string): Error {
  const ch = String.fromCodePoint(text.codePointAt(index)!);
  const code = ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
  const from = Math.max(0, index - 30);
  const near = `${from > 0 ? '…' : ''}${text.slice(from, index + 30)}${index + 30 < text.length ? '…' : ''}`;
  return new Error(
    `character ${JSON.stringify(ch)} (U+${code}) at offset ${index} is not in ${vocabulary}, which has no unk token ` +
      `(text near it: ${JSON.stringify(near)}); remove that character from the input, or use an agent whose ` +
      'tokenizer covers it',
  );
}

/**
 * A regex matching any of `strings` literally, longest first (so one that contains another is matched whole), in a
 * capturing group: `text.split(re)` puts the matches at the odd positions. Null when there are none.
 */
export function literalAlternation(strings: Iterable<string>): RegExp | null {
  const sorted = [...strings].filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
  return sorted.length
    ? new RegExp(`(${sorted.map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|')})`, 'u')
    : null;
}

/**
 * Walks `text` split by `re` (from literalAlternation): each match goes to `onMatch`, every other character (a
 * whole code point) to `onChar` with its UTF-16 offset in `text`.
 */
export function scanText(
  text: string,
  re: RegExp | null,
  onMatch: (match: string) => void,
  onChar: (ch: string, offset: number) => void,
): void {
  let offset = 0;
  (re ? text.split(re) : [text]).forEach((part, i) => {
    if (i % 2 === 1) onMatch(part);
    else
      for (let j = 0; j < part.length;) {
        const ch = String.fromCodePoint(part.codePointAt(j)!);
        onChar(ch, offset + j);
        j += ch.length;
      }
    offset += part.length;
  });
}
