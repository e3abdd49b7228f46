// The files of a Hugging Face tokenizer folder: tokenizer.json (the fast tokenizer itself) and tokenizer_config.json
// (special-token names, chat template, decode settings), plus the chat_template.jinja newer transformers write.
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { writeJsonAtomic } from '../util/atomic-write.js';

const AddedTokenSchema = z.looseObject({
  id: z.number().int().nonnegative(),
  content: z.string(),
  special: z.boolean().optional(),
});

const nullWhenAbsent = z
  .unknown()
  .optional()
  .transform((v) => v ?? null);

/** tokenizer.json, checked only as far as we rely on it; the tokenizers library interprets the rest. */
export const TokenizerJsonSchema = z.looseObject({
  model: z.looseObject({ type: z.string().optional(), vocab: z.unknown() }),
  added_tokens: z.array(AddedTokenSchema).default([]),
  // The tokenizers library requires these keys to be present, null when unused.
  normalizer: nullWhenAbsent,
  pre_tokenizer: nullWhenAbsent,
  post_processor: nullWhenAbsent,
  decoder: nullWhenAbsent,
});

/** A parsed tokenizer.json. */
export type TokenizerJson = z.output<typeof TokenizerJsonSchema>;

// Special tokens appear as plain strings or, in older files, as serialized AddedToken objects.
const TokenRef = z
  .union([z.string(), z.looseObject({ content: z.string() })])
  .nullable()
  .optional();

/** tokenizer_config.json, as far as we use it. */
export const TokenizerConfigSchema = z.looseObject({
  bos_token: TokenRef,
  eos_token: TokenRef,
  pad_token: TokenRef,
  unk_token: TokenRef,
  chat_template: z
    .union([z.string(), z.array(z.looseObject({ name: z.string(), template: z.string() }))])
    .nullable()
    .optional(),
  clean_up_tokenization_spaces: z.boolean().optional(),
});

/** A parsed tokenizer_config.json. */
export type TokenizerConfig = z.output<typeof TokenizerConfigSchema>;

/** The text of a special-token entry (string or {content}), or undefined when unset. */
export function tokenText(ref: TokenizerConfig['eos_token']): string | undefined {
  return ref === null || ref === undefined ? undefined : typeof ref === 'string' ? ref : ref.content;
}

/** The chat template of a config: the string, or the "default" entry of a list of named templates. */
export function configChatTemplate(cfg: TokenizerConfig): string | null {
  const t = cfg.chat_template;
  if (t === null || t === undefined) return null;
  if (typeof t === 'string') return t;
  return (t.find((x) => x.name === 'default') ?? t[0])?.template ?? null;
}

/** An added token: never split by the model; `special` ones are also dropped by decode with skipSpecialTokens. */
export interface AddedTokenSpec {
  /** Its id. */
  id: number;
  /** Its text. */
  content: string;
  /** Whether it is a special token. */
  special: boolean;
}

/** The added_tokens entry of tokenizer.json for a token. */
export function addedToken(t: AddedTokenSpec): Record<string, unknown> {
  return {
    id: t.id,
    content: t.content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: t.special,
  };
}

/** Special tokens (text -> id) as added-token specs. */
export function specialAdded(tokens: ReadonlyMap<string, number>): AddedTokenSpec[] {
  return [...tokens].map(([content, id]) => ({ id, content, special: true }));
}

/** Special-token names for a tokenizer_config.json. */
export interface SpecialTokenNames {
  /** Beginning-of-sequence token text. */
  bos?: string;
  /** End-of-sequence token text. */
  eos: string;
  /** Padding token text. */
  pad?: string;
  /** Unknown-token text. */
  unk?: string;
}

/**
 * A tokenizer_config.json for tokenizers we build: transformers' class to instantiate, the special-token names,
 * the chat template, and no space clean-up on decode (so decode(encode(text)) gives back `text`).
 */
export function tokenizerConfigJson(
  tokenizerClass: string,
  names: SpecialTokenNames,
  chatTemplate: string | null,
): Record<string, unknown> {
  return {
    tokenizer_class: tokenizerClass,
    bos_token: names.bos ?? null,
    eos_token: names.eos,
    pad_token: names.pad ?? null,
    unk_token: names.unk ?? null,
    clean_up_tokenization_spaces: false,
    ...(chatTemplate === null ? {} : { chat_template: chatTemplate }),
  };
}

/** Writes tokenizer.json (compact: it can be megabytes) and tokenizer_config.json into `dir`, creating it. */
export async function writeTokenizerFiles(dir: string, tokenizerJson: object, tokenizerConfig: object): Promise<void> {
  await mkdir(dir, { recursive: true });
  await writeJsonAtomic(join(dir, 'tokenizer.json'), tokenizerJson, 0);
  await writeJsonAtomic(join(dir, 'tokenizer_config.json'), tokenizerConfig);
}
