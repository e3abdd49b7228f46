// Hugging Face `generation_config.json`: default sampling settings and the ids that end generation.
import { join } from 'node:path';
import { z } from 'zod';
import { writeJsonAtomic } from '../util/atomic-write.js';
import { parseWith, pathExists, readJsonFile } from '../util/json-file.js';

/** The generation defaults of a checkpoint; absent fields are left to the caller's defaults. */
export interface GenerationConfig {
  /** Beginning-of-sequence id. */
  bosId?: number;
  /** Ids that end generation (the file may give one number or a list). */
  eosIds: number[];
  /** Padding id. */
  padId?: number;
  /** Whether to sample (true) or decode greedily (false). */
  doSample?: boolean;
  /** Softmax temperature (> 0). */
  temperature?: number;
  /** Nucleus sampling mass in (0, 1]. */
  topP?: number;
  /** Sample among the k most likely tokens (0 = no limit). */
  topK?: number;
  /** Most new tokens to generate. */
  maxNewTokens?: number;
}

const id = z.number().int().nonnegative();
const GenerationSchema = z.looseObject({
  bos_token_id: id.nullable().optional(),
  eos_token_id: z
    .union([id, z.array(id)])
    .nullable()
    .optional(),
  pad_token_id: id.nullable().optional(),
  do_sample: z.boolean().optional(),
  temperature: z.number().positive().nullable().optional(),
  top_p: z.number().gt(0).lte(1).nullable().optional(),
  top_k: z.number().int().nonnegative().nullable().optional(),
  max_new_tokens: z.number().int().positive().nullable().optional(),
});

// The scalar fields, ours and the file's name for each; eos is separate because it may be a number or a list.
const SCALARS = [
  ['bosId', 'bos_token_id'],
  ['padId', 'pad_token_id'],
  ['doSample', 'do_sample'],
  ['temperature', 'temperature'],
  ['topP', 'top_p'],
  ['topK', 'top_k'],
  ['maxNewTokens', 'max_new_tokens'],
] as const satisfies readonly (readonly [keyof GenerationConfig, keyof z.output<typeof GenerationSchema>])[];

/** Parses a generation_config.json object (`source` names it in errors). */
export function parseGenerationConfig(json: unknown, source: string = 'generation_config.json'): GenerationConfig {
  const g = parseWith(GenerationSchema, json, source);
  const eos = g.eos_token_id;
  const out: GenerationConfig = { eosIds: eos === null || eos === undefined ? [] : Array.isArray(eos) ? eos : [eos] };
  const set = out as unknown as Record<string, unknown>;
  for (const [ours, theirs] of SCALARS) if (g[theirs] != null) set[ours] = g[theirs];
  return out;
}

/** The generation_config.json object for `gc` (only the fields that are set). */
export function toHfGenerationConfig(gc: GenerationConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [ours, theirs] of SCALARS) if (gc[ours] !== undefined) out[theirs] = gc[ours];
  if (gc.eosIds.length > 0) out['eos_token_id'] = gc.eosIds.length === 1 ? gc.eosIds[0] : [...gc.eosIds];
  return out;
}

/** Reads `dir/generation_config.json`, or returns null when the folder has none (it is optional). */
export async function readGenerationConfig(dir: string): Promise<GenerationConfig | null> {
  const path = join(dir, 'generation_config.json');
  if (!(await pathExists(path))) return null;
  return parseGenerationConfig(await readJsonFile(path), path);
}

/** Writes `dir/generation_config.json` atomically. */
export async function writeGenerationConfig(dir: string, gc: GenerationConfig): Promise<void> {
  await writeJsonAtomic(join(dir, 'generation_config.json'), toHfGenerationConfig(gc));
}
