import { access } from 'node:fs/promises';
import { z } from 'zod';
import { readTextFile } from './text-file.js';

/** Validates `value` with a zod schema; the error names `what` (a file, usually) and every failing field. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const r = schema.safeParse(value);
  if (!r.success) throw new Error(`${what} is invalid:\n${z.prettifyError(r.error)}`);
  return r.data;
}

/**
 * Validates `value`, the config section at `prefix` (e.g. `workflow.env`), with a zod schema; the error says what is
 * invalid (`what`) and names every failing field by its whole path, e.g. `workflow.env.height: …`.
 */
export function parseSection<S extends z.ZodType>(
  schema: S,
  value: unknown,
  prefix: string,
  what: string,
): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const lines = r.error.issues.map((i) => `${[prefix, ...i.path.map(String)].join('.')}: ${i.message}`);
  throw new Error(`invalid ${what}:\n  ${lines.join('\n  ')}`);
}

/** Reads and parses a JSON file; errors name the file (missing, unreadable or not JSON). */
export async function readJsonFile(path: string): Promise<unknown> {
  const text = await readTextFile(path);
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw new Error(`${path} is not valid JSON: ${(e as Error).message}`);
  }
}

/** Reads a JSON file and validates it with `schema`; errors name the file. */
export async function readJsonWith<S extends z.ZodType>(path: string, schema: S): Promise<z.output<S>> {
  return parseWith(schema, await readJsonFile(path), path);
}

/** True when `path` exists (any kind of file). */
export async function pathExists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
