/**
 * A run folder: `config.resolved.json` (the config after presets, defaults and overrides), `metrics.jsonl` (one row
 * per step), `samples.jsonl` (sample completions with parsed and gold answers), and `checkpoints/step-000123/`
 * folders committed atomically with a `checkpoints/latest` pointer.
 */
import { join } from 'node:path';
import { writeJsonAtomic } from '../util/atomic-write.js';
import { ensureWritableDir } from '../util/fs-errors.js';
import { readJsonFile } from '../util/json-file.js';
import { commitCheckpoint, latestCheckpoint, type CheckpointRef } from './checkpoints.js';
import { appendRows, truncateAfterStep, type StepRow } from './jsonl-log.js';

/** The file and folder names inside a run folder. */
export const RUN_FILES = {
  config: 'config.resolved.json',
  metrics: 'metrics.jsonl',
  samples: 'samples.jsonl',
  checkpoints: 'checkpoints',
} as const;

/** The newest complete checkpoint of the run in `runDir`, or null; temporary (half-written) folders are ignored. */
export async function findLatestCheckpoint(runDir: string): Promise<CheckpointRef | null> {
  return latestCheckpoint(join(runDir, RUN_FILES.checkpoints));
}

/** The files of one run, by path; no file is touched until a method is called. */
export class RunFolder {
  /** The run folder. */
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  /** Path of a file or folder of the run. */
  path(name: keyof typeof RUN_FILES): string {
    return join(this.dir, RUN_FILES[name]);
  }

  /** Creates the folder (if needed; errors name `runDir`) and writes the resolved config atomically. */
  async init(resolvedConfig: unknown): Promise<void> {
    await this.prepare();
    await writeJsonAtomic(this.path('config'), resolvedConfig);
  }

  /** Creates the folder and its checkpoints folder if needed, checking they are writable; errors name `runDir`. */
  async prepare(): Promise<void> {
    await ensureWritableDir(this.dir, 'runDir');
    await ensureWritableDir(this.path('checkpoints'), 'runDir');
  }

  /** The resolved config written by init (unvalidated JSON: a run config is read with parseSavedRunConfig). */
  async readConfig(): Promise<unknown> {
    return readJsonFile(this.path('config'));
  }

  /** Appends a step's metrics row to metrics.jsonl and flushes it to disk. */
  async appendMetrics(row: StepRow): Promise<void> {
    await appendRows(this.path('metrics'), [row]);
  }

  /** Appends sample rows (each with its step) to samples.jsonl and flushes them to disk. */
  async appendSamples(rows: readonly StepRow[]): Promise<void> {
    await appendRows(this.path('samples'), rows);
  }

  /**
   * Prepares the logs for continuing after `step` (the resumed checkpoint's; −1 for a fresh start): rows of later
   * steps are removed from metrics.jsonl and samples.jsonl, so that once the run goes on the files equal an
   * uninterrupted run's. A step's rows must therefore be appended before its checkpoint is committed.
   */
  async truncateLogsAfter(step: number): Promise<void> {
    await truncateAfterStep(this.path('metrics'), step);
    await truncateAfterStep(this.path('samples'), step);
  }

  /** Commits the checkpoint of `step` (see commitCheckpoint): `fill` writes its files; keeps the newest `keepLast`. */
  async commitCheckpoint(step: number, fill: (dir: string) => Promise<void>, keepLast: number): Promise<CheckpointRef> {
    return commitCheckpoint(this.path('checkpoints'), step, fill, keepLast);
  }

  /** The newest complete checkpoint, or null. */
  async latestCheckpoint(): Promise<CheckpointRef | null> {
    return findLatestCheckpoint(this.dir);
  }
}
