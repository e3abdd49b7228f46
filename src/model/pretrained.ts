/**
 * A whole checkpoint folder as Hugging Face lays it out: config.json, weights, generation_config.json and the
 * tokenizer files. What an agent is saved as and loaded from.
 */
import { mkdir } from 'node:fs/promises';
import { loadTokenizer } from '../tokenizer/load.js';
import { assertVocabCompatible, type Tokenizer } from '../tokenizer/tokenizer.js';
import { readGenerationConfig, writeGenerationConfig, type GenerationConfig } from './generation-config.js';
import type { Transformer } from './transformer.js';
import { loadModel, saveModel } from './weights.js';

/** A model with the files that make it usable on its own. */
export interface Pretrained {
  model: Transformer;
  tokenizer: Tokenizer;
  /** The folder's generation defaults, or null when it has no generation_config.json. */
  generation: GenerationConfig | null;
}

/** Loads model, tokenizer and generation defaults; refuses a tokenizer whose ids do not fit the model's vocabulary. */
export async function loadPretrained(dir: string): Promise<Pretrained> {
  const model = await loadModel(dir);
  const tokenizer = await loadTokenizer(dir);
  try {
    assertVocabCompatible(tokenizer, model.cfg.vocabSize);
  } catch (e) {
    throw new Error(`${dir}: ${(e as Error).message}`);
  }
  return { model, tokenizer, generation: await readGenerationConfig(dir) };
}

/**
 * Writes a complete Hugging Face checkpoint folder (every file atomically): config.json, model.safetensors,
 * tokenizer files and generation_config.json (eos from the tokenizer unless `generation` says otherwise).
 */
export async function savePretrained(
  dir: string,
  p: Pretrained,
  options: { maxShardBytes?: number } = {},
): Promise<void> {
  assertVocabCompatible(p.tokenizer, p.model.cfg.vocabSize);
  await mkdir(dir, { recursive: true });
  await saveModel(dir, p.model, options);
  await p.tokenizer.save(dir);
  const generation = p.generation ?? {
    eosIds: [p.tokenizer.eosId],
    bosId: p.tokenizer.bosId,
    padId: p.tokenizer.padId,
  };
  await writeGenerationConfig(dir, generation);
}
