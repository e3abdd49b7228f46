/**
 * Named presets for the paper's baselines (shared/spec/hacpo.md, "Baselines"). A preset only fills values the user
 * left out: anything given in the file or on the command line wins.
 */
import type { Algorithm } from './algorithms.js';
import { isPlainObject } from './schema-keys.js';

/** The preset names. */
export const PRESET_NAMES = ['grpo-dapo', 'gspo', 'gspo-x2', 'hacpo', 'naive'] as const;
/** A preset name. */
export type PresetName = (typeof PRESET_NAMES)[number];

/** What a preset sets: a partial raw config. */
export interface PresetValues {
  algorithm: Algorithm;
  rollout?: Record<string, unknown>;
  optim: Record<string, unknown>;
}

// GSPO as the authors ran it: sequence-level ratio with their tiny clip range, 2 optimizer steps per step.
const GSPO_OPTIM = { clipLow: 3e-4, clipHigh: 4e-4, lossAggregation: 'seq-mean-token-mean', miniBatches: 2 };

/** The values each preset fills in. */
export const PRESETS: Record<PresetName, PresetValues> = {
  // DAPO's clip-higher with a token-mean loss and group z-score advantages.
  'grpo-dapo': {
    algorithm: 'grpo',
    optim: { clipLow: 0.2, clipHigh: 0.28, lossAggregation: 'token-mean', advantage: 'group-std' },
  },
  gspo: { algorithm: 'gspo', optim: GSPO_OPTIM },
  // Resource-equivalent to a 2-agent run: one agent, twice the default group size (8) and twice GSPO's optimizer
  // steps, so it generates as many rollouts per step as HACPO's two agents together.
  'gspo-x2': { algorithm: 'gspo', rollout: { groupSize: 16 }, optim: { ...GSPO_OPTIM, miniBatches: 4 } },
  // HACPO as the authors ran it: GSPO's clip for own responses, each learner's n·B·G samples in 4 mini-batches (the
  // hacpo section's defaults are theirs: K 5, α 1, δ 0.2, δ_step 0.025). No KL, like the GSPO baselines.
  hacpo: { algorithm: 'hacpo', optim: { ...GSPO_OPTIM, miniBatches: 4 } },
  // The naive-sharing baseline: the same updates as hacpo with every HACPO mechanism off.
  naive: { algorithm: 'naive', optim: { ...GSPO_OPTIM, miniBatches: 4 } },
};

/** One line per preset listing what it sets, e.g. "gspo: algorithm=gspo, optim.clipLow=0.0003, …". */
export function describePresets(): string {
  return PRESET_NAMES.map((name) => `${name}: ${flatten(PRESETS[name]).join(', ')}`).join('; ');
}

/** `raw` with its preset's values filled in where `raw` has none (user values win); unchanged without a preset. */
export function applyPreset(raw: Record<string, unknown>): Record<string, unknown> {
  const name = raw.preset;
  if (typeof name !== 'string' || !Object.hasOwn(PRESETS, name)) return raw;
  return fillDefaults(raw, PRESETS[name as PresetName] as unknown as Record<string, unknown>);
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

function flatten(value: object, prefix = ''): string[] {
  return Object.entries(value).flatMap(([k, v]) =>
    isPlainObject(v) ? flatten(v, `${prefix}${k}.`) : [`${prefix}${k}=${String(v)}`],
  );
}
