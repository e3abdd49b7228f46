/** Reading a run folder (config.resolved.json, metrics.jsonl, samples.jsonl) for the report. */
import { stat } from 'node:fs/promises';
import { basename, resolve, sep } from 'node:path';
import { z } from 'zod';
import { pathExists, readJsonFile } from '../util/json-file.js';
import { readJsonl } from '../util/jsonl.js';
import { rowsPerAgent } from '../run/metric-names.js';
import { RUN_FILES, RunFolder } from '../run/run-folder.js';

/** The split of a namespaced row, re-exported for the report's readers (the protocol lives in run/metric-names.ts). */
export { rowsPerAgent };

// Only step and agent are fixed: the trainer adds and drops metric fields over time, and the report plots whatever
// numeric fields a row carries, so everything else passes through untouched.
const MetricRowSchema = z.looseObject({
  step: z.number().int().nonnegative(),
  agent: z.string().optional(),
});
/** One line of metrics.jsonl: a step, an optional agent, and any metric fields. */
export type MetricRow = z.output<typeof MetricRowSchema>;

const scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const SampleRowSchema = z.looseObject({
  step: z.number().int().nonnegative(),
  agent: z.string().optional(),
  prompt: z.string(),
  response: z.string(),
  answer: scalar.optional(),
  gold: scalar.optional(),
  correct: z.boolean().optional(),
  reward: z.number().nullable().optional(),
});
/** One line of samples.jsonl: a completion with its parsed and gold answers. */
export type SampleRow = z.output<typeof SampleRowSchema>;

/** Everything the report needs from one run folder. */
export interface RunData {
  /** The folder as given. */
  dir: string;
  /** Short name shown in legends and tables (unique among the runs of one report). */
  label: string;
  /** Parsed config.resolved.json, or null when the folder has none (yet). */
  config: unknown;
  metrics: MetricRow[];
  samples: SampleRow[];
}

/** Reads a run folder; a missing folder or metrics.jsonl, or a bad line (file:line), is an error naming it. */
export async function loadRun(dir: string, label: string = basename(resolve(dir))): Promise<RunData> {
  const info = await stat(dir).catch(() => null);
  if (!info?.isDirectory()) throw new Error(`run folder ${dir} does not exist or is not a folder`);
  const run = new RunFolder(dir);
  const metricsPath = run.path('metrics');
  if (!(await pathExists(metricsPath))) throw new Error(`run folder ${dir} has no ${RUN_FILES.metrics}`);
  const configPath = run.path('config');
  const samplesPath = run.path('samples');
  // A run that has only just started may not have written its config or any samples yet; it still gets plotted.
  const [metrics, config, samples] = await Promise.all([
    readJsonl(metricsPath, MetricRowSchema).then((rows) => rows.flatMap(rowsPerAgent)),
    (await pathExists(configPath)) ? readJsonFile(configPath) : null,
    (await pathExists(samplesPath)) ? readJsonl(samplesPath, SampleRowSchema) : [],
  ]);
  return { dir, label, config, metrics, samples };
}

/** Reads several run folders, labelling each with the shortest path suffix that tells it apart from the others. */
export async function loadRuns(dirs: readonly string[]): Promise<RunData[]> {
  if (dirs.length === 0) throw new Error('no run folders given');
  const labels = uniqueLabels(dirs);
  return Promise.all(dirs.map((d, i) => loadRun(d, labels[i])));
}

/** Last path segment of each folder, lengthened (b → a/b → x/a/b) only where another folder ends the same way. */
export function uniqueLabels(dirs: readonly string[]): string[] {
  const parts = dirs.map((d) =>
    resolve(d)
      .split(sep)
      .filter((p) => p !== ''),
  );
  const suffix = (p: readonly string[], n: number): string => p.slice(-n).join('/');
  return parts.map((p, i) => {
    for (let n = 1; n <= p.length; n++) {
      const label = suffix(p, n);
      if (parts.every((q, j) => j === i || suffix(q, n) !== label)) return label;
    }
    // The same folder given twice: number the copies so that legends still tell their series apart.
    return `${p.join('/')} #${i + 1}`;
  });
}
