// Picks the tokenizer implementation a checkpoint folder calls for.
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { parseWith, readJsonWith } from '../util/json-file.js';
import { byteLevelTokenizerJson } from './byte-level.js';
import { HfTokenizer, readTokenizerConfig } from './hf-tokenizer.js';
import { tokenText, TokenizerConfigSchema, type AddedTokenSpec } from './tokenizer-files.js';
import type { Tokenizer } from './tokenizer.js';

/**
 * Loads the tokenizer of folder `dir`: `tokenizer.json` (a Hugging Face fast tokenizer: every model we support,
 * and everything hacrl saves), else `vocab.json` + `merges.txt` (a byte-level BPE "slow" tokenizer such as the
 * original GPT-2 files). Errors name the folder, what is missing, and what it holds.
 */
export async function loadTokenizer(dir: string): Promise<Tokenizer> {
  const isDir = await stat(dir).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDir) throw new Error(`tokenizer folder ${dir} does not exist or is not a folder`);
  const files = new Set(await readdir(dir));
  if (files.has('tokenizer.json')) return HfTokenizer.fromDir(dir);
  if (files.has('vocab.json') && files.has('merges.txt')) return HfTokenizer.fromDir(dir, await slowByteLevelJson(dir));
  const found = files.size ? [...files].sort().join(', ') : 'nothing';
  const hint = files.has('tokenizer.model')
    ? ' (tokenizer.model is a SentencePiece model, which is not supported: save the tokenizer with transformers, ' +
      'AutoTokenizer.from_pretrained(dir).save_pretrained(dir), to get tokenizer.json)'
    : '';
  throw new Error(
    `no tokenizer in ${dir}: expected tokenizer.json, or vocab.json and merges.txt; found ${found}${hint}`,
  );
}

const AddedDecoderSchema = z.looseObject({
  added_tokens_decoder: z
    .record(z.string(), z.looseObject({ content: z.string(), special: z.boolean().optional() }))
    .optional(),
  add_prefix_space: z.boolean().optional(),
});

// The tokenizer.json equivalent of a GPT-2-style slow tokenizer: its vocab and merges, the config's added tokens,
// and the special tokens it names (which transformers' slow tokenizers never split either).
async function slowByteLevelJson(dir: string): Promise<Record<string, unknown>> {
  const vocabPath = join(dir, 'vocab.json');
  const vocab = await readJsonWith(vocabPath, z.record(z.string(), z.number().int().nonnegative()));
  const merges = (await readFile(join(dir, 'merges.txt'), 'utf8'))
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#version'))
    .map((l, i) => {
      const parts = l.split(' ');
      if (parts.length !== 2)
        throw new Error(`${join(dir, 'merges.txt')} line ${i + 1} is not "left right": ${JSON.stringify(l)}`);
      return parts as [string, string];
    });
  const rawConfig = await readTokenizerConfig(dir);
  const configPath = join(dir, 'tokenizer_config.json');
  const config = parseWith(TokenizerConfigSchema, rawConfig, configPath);
  const extra = parseWith(AddedDecoderSchema, rawConfig, configPath);
  const added = new Map<string, AddedTokenSpec>();
  for (const [id, t] of Object.entries(extra.added_tokens_decoder ?? {})) {
    added.set(t.content, { id: Number(id), content: t.content, special: t.special ?? true });
    vocab[t.content] = Number(id);
  }
  for (const ref of [config.bos_token, config.eos_token, config.unk_token, config.pad_token]) {
    const text = tokenText(ref);
    if (text !== undefined && vocab[text] !== undefined)
      added.set(text, { id: vocab[text], content: text, special: true });
  }
  const json = byteLevelTokenizerJson(vocab, merges, [...added.values()]);
  if (extra.add_prefix_space)
    json['pre_tokenizer'] = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true };
  return json;
}
