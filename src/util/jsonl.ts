import { z } from 'zod';
import { writeFileAtomic } from './atomic-write.js';
import { readTextFile } from './text-file.js';

/**
 * Reads a JSON Lines file, validating every row with `schema`. Blank lines are skipped; a UTF-8 byte-order mark is
 * accepted; bytes that are not UTF-8 are refused. A row that is not JSON or does not fit the schema raises an error
 * naming the file, the line and what is wrong (the field, for schema errors).
 */
export async function readJsonl<S extends z.ZodType>(path: string, schema: S): Promise<z.output<S>[]> {
  const text = await readTextFile(path);
  const rows: z.output<S>[] = [];
  const lines = text.split('\n');
  for (const [i, line] of lines.entries()) {
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (e) {
      throw new Error(`${path}:${i + 1}: not valid JSON (${(e as Error).message})`);
    }
    const r = schema.safeParse(value);
    if (!r.success) throw new Error(`${path}:${i + 1}: ${z.prettifyError(r.error).replace(/\n/g, '; ')}`);
    rows.push(r.data);
  }
  return rows;
}

/** Writes rows as JSON Lines atomically (one JSON object per line). */
export async function writeJsonl(path: string, rows: readonly unknown[]): Promise<void> {
  await writeFileAtomic(path, rows.map((r) => JSON.stringify(r) + '\n').join(''));
}
