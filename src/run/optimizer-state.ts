/**
 * AdamW state in a safetensors file: the moments as float32 tensors `m.<param>` and `v.<param>` (exact bytes) and the
 * step count in the metadata, so a resumed optimizer continues bit for bit.
 */
import type { AdamWState } from '../optim/adamw.js';
import { readSafetensors, writeSafetensors, type TensorToWrite } from '../model/safetensors.js';

const FORMAT = 'hacrl-adamw';

/** Writes the optimizer state to `path` atomically. */
export async function saveAdamWState(path: string, state: AdamWState): Promise<void> {
  const tensors: [string, TensorToWrite][] = [];
  for (const [name, m] of state.m) {
    const v = state.v.get(name);
    if (v === undefined || v.length !== m.length)
      throw new Error(`optimizer state of "${name}": first and second moments differ in size or one is missing`);
    tensors.push([`m.${name}`, { shape: [m.length], data: m }], [`v.${name}`, { shape: [v.length], data: v }]);
  }
  if (state.v.size !== state.m.size)
    throw new Error('optimizer state: second moments name parameters the first do not');
  await writeSafetensors(path, tensors, { metadata: { format: FORMAT, step: String(state.step) } });
}

/** Reads an optimizer state written by saveAdamWState; errors name the file. */
export async function loadAdamWState(path: string): Promise<AdamWState> {
  const { tensors, metadata } = await readSafetensors(path);
  const step = Number(metadata.step);
  if (metadata.format !== FORMAT || !Number.isInteger(step) || step < 0)
    throw new Error(`${path}: not an optimizer state (metadata format "${FORMAT}" and an integer step expected)`);
  const state: AdamWState = { step, m: new Map(), v: new Map() };
  for (const [key, t] of tensors) {
    const dot = key.indexOf('.');
    const which = key.slice(0, dot);
    if ((which !== 'm' && which !== 'v') || t.dtype !== 'F32' || !(t.data instanceof Float32Array))
      throw new Error(`${path}: unexpected tensor "${key}" (${t.dtype}); only F32 m.<param> and v.<param> belong here`);
    state[which].set(key.slice(dot + 1), t.data);
  }
  for (const name of state.m.keys())
    if (!state.v.has(name)) throw new Error(`${path}: "${name}" has a first moment but no second`);
  return state;
}
