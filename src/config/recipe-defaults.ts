/**
 * A recipe as config values: what `algorithm: X` (or `preset: VARIANT`) fills in where the file is silent. Values the
 * user gives, in the file or on the command line, always win.
 */
import {
  ALGORITHM_RECIPES,
  VARIANT_RECIPES,
  VARIANTS,
  type Algorithm,
  type Recipe,
  type Variant,
} from '../algorithms/recipes.js';
import { isPlainObject } from './schema-keys.js';

/** The config values a recipe sets (a partial raw config). */
export function recipeValues(r: Recipe): Record<string, unknown> {
  return {
    algorithm: r.algorithm,
    ...(r.groupSize === undefined ? {} : { rollout: { groupSize: r.groupSize } }),
    optim: {
      surrogate: r.surrogate,
      clipLow: r.clip.low,
      clipHigh: r.clip.high,
      lossAggregation: r.aggregation,
      advantage: r.advantage,
      miniBatches: r.miniBatches,
    },
    ...(r.hacpo === undefined ? {} : { hacpo: { ...r.hacpo } }),
  };
}

/** The recipe a raw config asks for: its preset's, else its algorithm's, else grpo's (the default algorithm). */
function recipeOf(raw: Record<string, unknown>): Recipe {
  const { preset, algorithm } = raw;
  if (typeof preset === 'string' && Object.hasOwn(VARIANT_RECIPES, preset)) return VARIANT_RECIPES[preset as Variant];
  if (typeof algorithm === 'string' && Object.hasOwn(ALGORITHM_RECIPES, algorithm))
    return ALGORITHM_RECIPES[algorithm as Algorithm];
  return ALGORITHM_RECIPES.grpo;
}

/** `raw` with its recipe's values filled in where `raw` has none (unknown names are left for the schema to refuse). */
export function applyRecipe(raw: Record<string, unknown>): Record<string, unknown> {
  return fillDefaults(raw, recipeValues(recipeOf(raw)));
}

/** A deep copy of `user` with the keys of `defaults` it lacks added; nested objects merge, anything else is kept. */
export function fillDefaults(
  user: Record<string, unknown>,
  defaults: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = structuredClone(user);
  for (const [key, d] of Object.entries(defaults)) {
    const u = out[key];
    if (u === undefined) out[key] = structuredClone(d);
    else if (isPlainObject(u) && isPlainObject(d)) out[key] = fillDefaults(u, d);
  }
  return out;
}

/** "grpo 0.2, gspo 0.0003, …": a recipe-owned setting's default under each algorithm, for the schema docs. */
export function defaultsByAlgorithm(pick: (r: Recipe) => unknown): string {
  return Object.values(ALGORITHM_RECIPES)
    .flatMap((r) => (pick(r) === undefined ? [] : [`${r.algorithm} ${JSON.stringify(pick(r))}`]))
    .join(', ');
}

/** One line per variant naming what it is, e.g. "gspo-x2: GSPO×2: one agent, …". */
export function describeVariants(): string {
  return VARIANTS.map((name) => `${name}: ${VARIANT_RECIPES[name].summary}`).join('; ');
}
