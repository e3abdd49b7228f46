/**
 * A whole checkpoint folder as Hugging Face lays it out: config.json, weights, generation_config.json and the
 * tokenizer files. What an agent is saved as and loaded from.
 */
import { loadTokenizer } from '../tokenizer/load.js';
import { assertVocabCompatible, type Tokenizer } from '../tokenizer/tokenizer.js';
import { readGenerationConfig, writeGenerationConfig, type GenerationConfig } from './generation-config.js';
import type { Transformer } from './transformer.js';
import { replaceDir } from '../util/replace-dir.js';
import { notWeightFile } from './checkpoint.js';
import { loadModel, writeModelFiles } from './weights.js';

/** A model with the files that make it usable on its own. */
export interface Pretrained {
  model: Transformer;
  tokenizer: Tokenizer;
  /** The folder's generation defaults, or null when it has no generation_config.json. */
  generation: GenerationConfig | null;
}

/** Throws naming the file and field when a special token id is outside the model's vocabulary. */
function checkSpecialIds(ids: [string, number | null | undefined][], vocabSize: number): void {
  for (const [what, id] of ids)
    if (id !== null && id !== undefined && !(Number.isInteger(id) && id >= 0 && id < vocabSize))
      throw new Error(`${what} ${id} is outside the model's vocabulary (ids 0..${vocabSize - 1})`);
}

/**
 * Loads model, tokenizer and generation defaults; refuses a tokenizer whose ids do not fit the model's vocabulary,
 * and special token ids (the tokenizer's, generation_config.json's) outside it.
 */
export async function loadPretrained(dir: string): Promise<Pretrained> {
  const model = await loadModel(dir);
  const tokenizer = await loadTokenizer(dir);
  const generation = await readGenerationConfig(dir);
  try {
    const vocab = model.cfg.vocabSize;
    assertVocabCompatible(tokenizer, vocab);
    checkSpecialIds(
      [
        ["the tokenizer's eos token id", tokenizer.eosId],
        ["the tokenizer's bos token id", tokenizer.bosId],
        ["the tokenizer's pad token id", tokenizer.padId],
        ...(generation?.eosIds ?? []).map((id) => ['generation_config.json eos_token_id', id] as [string, number]),
        ['generation_config.json bos_token_id', generation?.bosId],
        ['generation_config.json pad_token_id', generation?.padId],
      ],
      vocab,
    );
  } catch (e) {
    throw new Error(`${dir}: ${(e as Error).message}`);
  }
  return { model, tokenizer, generation };
}

/**
 * Writes a complete Hugging Face checkpoint folder, whole or not at all (like saveModel): config.json,
 * model.safetensors, tokenizer files and generation_config.json (eos from the tokenizer unless `generation` says
 * otherwise).
 */
export async function savePretrained(
  dir: string,
  p: Pretrained,
  options: { maxShardBytes?: number } = {},
): Promise<void> {
  assertVocabCompatible(p.tokenizer, p.model.cfg.vocabSize);
  const generation = p.generation ?? {
    eosIds: [p.tokenizer.eosId],
    bosId: p.tokenizer.bosId,
    padId: p.tokenizer.padId,
  };
  await replaceDir(
    dir,
    async (tmp) => {
      await writeModelFiles(tmp, p.model, options);
      await p.tokenizer.save(tmp);
      await writeGenerationConfig(tmp, generation);
    },
    notWeightFile,
  );
}
