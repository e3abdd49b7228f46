/**
 * Per-step JSON Lines logs (metrics.jsonl, samples.jsonl): rows are appended and flushed to disk as they come, and on
 * resume every row of a later step is cut away, so the file ends up equal to an uninterrupted run's.
 */
import { open, readFile } from 'node:fs/promises';
import { writeFileAtomic } from '../util/atomic-write.js';

/** A log row: the training step it belongs to, and anything else. */
export interface StepRow {
  step: number;
  [key: string]: unknown;
}

/** Appends rows (one JSON object per line) and fsyncs, so a crash right after loses none of them. */
export async function appendRows(path: string, rows: readonly StepRow[]): Promise<void> {
  if (rows.length === 0) return;
  const fh = await open(path, 'a');
  try {
    await fh.write(rows.map((r) => JSON.stringify(r) + '\n').join(''));
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Removes the rows of steps after `step` (all rows with a step when `step` is −1), and a last line cut short by a
 * crash; rows without a numeric step are kept. A missing file is left missing. Returns how many rows were removed.
 */
export async function truncateAfterStep(path: string, step: number): Promise<number> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw e;
  }
  const lines = text.split('\n');
  const torn = lines.pop() !== ''; // the text after the last newline: '' unless a write was cut short
  const kept = lines.filter((line, i) => line.trim() !== '' && rowStep(line, path, i) <= step);
  const removed = lines.filter((line) => line.trim() !== '').length - kept.length + (torn ? 1 : 0);
  if (removed > 0) await writeFileAtomic(path, kept.map((l) => l + '\n').join(''));
  return removed;
}

// A complete line that is not JSON means the file was damaged by something other than a torn append: stop rather
// than silently drop history.
function rowStep(line: string, path: string, index: number): number {
  let row: unknown;
  try {
    row = JSON.parse(line);
  } catch (e) {
    throw new Error(`${path}:${index + 1}: not valid JSON (${(e as Error).message}); fix or remove the line`);
  }
  const step = (row as { step?: unknown } | null)?.step;
  return typeof step === 'number' ? step : -Infinity;
}
