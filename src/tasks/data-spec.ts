import { existsSync } from 'node:fs';
import { loadTaskFile } from './files.js';
import type { Dataset } from './problem.js';
import {
  makeTaskDataset,
  presetSpec,
  PRESETS,
  SPLIT_NAMES,
  TASK_NAMES,
  type SplitName,
  type TaskName,
} from './splits.js';

/**
 * A data set named on the command line: a JSONL file (GSM8K, MATH-style or {prompt, answer}), or generated problems
 * as `NAME[:SPLIT[:N[:SEED]]]` where NAME is a preset (easy, easy-mix) or a task (arith, expr, linear, fraction, word,
 * mix) with default knobs; SPLIT defaults to test, N to 200, SEED to 0.
 */
export async function loadDataSpec(spec: string): Promise<Dataset> {
  if (existsSync(spec) || spec.endsWith('.jsonl')) return loadTaskFile(spec);
  const [name = '', split = 'test', nText = '200', seedText = '0'] = spec.split(':');
  const n = Number(nText);
  const seed = Number(seedText);
  const known = [...Object.keys(PRESETS), ...TASK_NAMES];
  if (!known.includes(name))
    throw new Error(`data "${spec}": not a file, and "${name}" is not a preset or task (known: ${known.join(', ')})`);
  if (!SPLIT_NAMES.includes(split as SplitName))
    throw new Error(`data "${spec}": split must be one of ${SPLIT_NAMES.join(', ')}`);
  if (!Number.isInteger(n) || n < 1) throw new Error(`data "${spec}": N must be a positive integer, got "${nText}"`);
  if (!Number.isInteger(seed)) throw new Error(`data "${spec}": SEED must be an integer, got "${seedText}"`);
  const s = split as SplitName;
  const dataset =
    name in PRESETS
      ? makeTaskDataset(presetSpec(name as keyof typeof PRESETS, s, n, seed))
      : makeTaskDataset({ task: name as TaskName, split: s, n, seed } as Parameters<typeof makeTaskDataset>[0]);
  return { ...dataset, name: `${name}:${split}` };
}
