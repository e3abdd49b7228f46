/**
 * Key paths of a zod object schema: which keys exist where, so that a misspelt key in a config file or a command-line
 * override is refused with the closest valid one named, instead of being silently dropped.
 */
import { z } from 'zod';

/** The schema under defaults, optionals and nullables: the shape a value there must have. */
export function unwrapSchema(schema: z.ZodType): z.ZodType {
  let s = schema;
  while (
    s instanceof z.ZodDefault ||
    s instanceof z.ZodPrefault ||
    s instanceof z.ZodOptional ||
    s instanceof z.ZodNullable
  )
    s = s.unwrap() as z.ZodType;
  return s;
}

/** Every key path the schema accepts, array elements written as `N` (e.g. `agents.N.lr`), parents before children. */
export function keyPaths(schema: z.ZodType, prefix = ''): string[] {
  const s = unwrapSchema(schema);
  if (s instanceof z.ZodArray) return keyPaths(s.element as z.ZodType, `${prefix}N.`);
  if (!(s instanceof z.ZodObject)) return [];
  return Object.entries(s.shape as Record<string, z.ZodType>).flatMap(([key, child]) => [
    prefix + key,
    ...keyPaths(child, `${prefix}${key}.`),
  ]);
}

/** Edit distance between two strings, ignoring case (a typo in capitalisation is the commonest slip). */
export function editDistance(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  let prev = Array.from({ length: y.length + 1 }, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const cur = [i];
    for (let j = 1; j <= y.length; j++)
      cur.push(Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (x[i - 1] === y[j - 1] ? 0 : 1)));
    prev = cur;
  }
  return prev[y.length]!;
}

/** The candidate closest to `word`, or null when none is close enough to be a plausible typo. */
export function closest(word: string, candidates: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(word, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return bestDistance <= Math.max(2, Math.floor(word.length / 3)) ? best : null;
}

/**
 * The message for an unknown key at `path` (segments, the last one unknown) among `siblings`: the closest sibling,
 * else a key of the same name elsewhere in the schema (e.g. `groupSize` at the top → `rollout.groupSize`).
 */
export function unknownKeyMessage(root: z.ZodType, path: readonly string[], siblings: readonly string[]): string {
  const key = path[path.length - 1]!;
  const shown = path.join('.');
  const near = closest(key, siblings);
  const parent = path.slice(0, -1).join('.');
  if (near !== null) return `unknown key "${shown}": did you mean "${parent === '' ? near : `${parent}.${near}`}"?`;
  const elsewhere = keyPaths(root).filter((p) => closest(key, [p.slice(p.lastIndexOf('.') + 1)]) !== null);
  const hint = elsewhere.length > 0 ? `did you mean ${elsewhere.map((p) => `"${p}"`).join(' or ')}?` : '';
  return `unknown key "${shown}" (valid keys${parent === '' ? '' : ` of ${parent}`}: ${siblings.join(', ')})${hint === '' ? '' : `; ${hint}`}`;
}

/** Messages for every key in `value` that the schema does not define (nested objects and arrays included). */
export function unknownKeys(root: z.ZodType, value: unknown): string[] {
  const out: string[] = [];
  const walk = (schema: z.ZodType, v: unknown, path: string[]): void => {
    const s = unwrapSchema(schema);
    if (s instanceof z.ZodArray && Array.isArray(v))
      v.forEach((item, i) => walk(s.element as z.ZodType, item, [...path, String(i)]));
    if (!(s instanceof z.ZodObject) || !isPlainObject(v)) return;
    const shape = s.shape as Record<string, z.ZodType>;
    for (const [key, child] of Object.entries(v)) {
      const sub = shape[key];
      if (sub === undefined) out.push(unknownKeyMessage(root, [...path, key], Object.keys(shape)));
      else walk(sub, child, [...path, key]);
    }
  };
  walk(root, value, []);
  return out;
}

/** True for `{…}` values (not arrays, not null). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
