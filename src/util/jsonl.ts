import { z } from 'zod';
import { writeFileAtomic } from './atomic-write.js';
import { readTextFile } from './text-file.js';

/**
 * The issues as one line naming each field. A row that fits none of a union's shapes is described by the shape it
 * came closest to (fewest issues), since "Invalid input" alone does not say which field to fix.
 */
export function describeIssues(issues: readonly z.core.$ZodIssue[]): string {
  return z.prettifyError(new z.ZodError(closestIssues(issues))).replace(/\n/g, '; ');
}

function closestIssues(issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue[] {
  return issues.flatMap((issue) => {
    if (issue.code !== 'invalid_union' || issue.errors.length === 0) return [issue];
    const best = issue.errors.reduce((a, b) => (b.length < a.length ? b : a));
    return closestIssues(best.map((inner) => ({ ...inner, path: [...issue.path, ...inner.path] })));
  });
}

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
    if (!r.success) throw new Error(`${path}:${i + 1}: ${describeIssues(r.error.issues)}`);
    rows.push(r.data);
  }
  return rows;
}

/** Writes rows as JSON Lines atomically (one JSON object per line). */
export async function writeJsonl(path: string, rows: readonly unknown[]): Promise<void> {
  await writeFileAtomic(path, rows.map((r) => JSON.stringify(r) + '\n').join(''));
}
