/**
 * Command-line overrides of a config: `key.path=value` strings such as `rollout.groupSize=8` or `agents.0.lr=1e-5`,
 * applied to the raw (not yet validated) config. Keys are checked against the schema as they are walked, so a typo is
 * refused naming the closest valid key rather than silently ignored.
 */
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { isPlainObject, unknownKeyMessage, unwrapSchema } from './schema-keys.js';

type Container = Record<string, unknown> | unknown[];

/** Returns a copy of `raw` with every override applied in order (later ones win). */
export function applyOverrides(
  root: z.ZodType,
  raw: Record<string, unknown>,
  overrides: readonly string[],
): Record<string, unknown> {
  const out = structuredClone(raw);
  for (const o of overrides) applyOverride(root, out, o);
  return out;
}

/** Applies one `key.path=value` override to `raw` in place. */
export function applyOverride(root: z.ZodType, raw: Record<string, unknown>, override: string): void {
  const eq = override.indexOf('=');
  const path = override.slice(0, Math.max(eq, 0)).trim().split('.');
  if (eq <= 0 || path.some((seg) => seg === ''))
    throw new Error(
      `override "${override}" must look like key.path=value (e.g. rollout.groupSize=8 or agents.0.lr=1e-5)`,
    );
  const fail = (why: string): never => {
    throw new Error(`override "${override}": ${why}`);
  };
  let schema = root;
  let container: Container = raw;
  for (const [i, seg] of path.entries()) {
    const s = unwrapSchema(schema);
    const here = path.slice(0, i).join('.');
    if (s instanceof z.ZodObject) {
      const shape = s.shape as Record<string, z.ZodType>;
      if (!Object.hasOwn(shape, seg)) fail(unknownKeyMessage(root, path.slice(0, i + 1), Object.keys(shape)));
      schema = shape[seg]!;
    } else if (s instanceof z.ZodArray && Array.isArray(container)) {
      if (!/^\d+$/.test(seg)) fail(`"${here}" is a list: the next key must be an index (0, 1, …), not "${seg}"`);
      if (Number(seg) > container.length)
        fail(
          `"${here}" has ${container.length} entries: the index must be at most ${container.length} (which appends one)`,
        );
      schema = s.element as z.ZodType;
    } else fail(`"${here}" is a single value: it has no key "${seg}"`);
    if (i === path.length - 1) setChild(container, seg, parseValue(override.slice(eq + 1), schema, fail));
    else container = childContainer(container, seg, unwrapSchema(schema) instanceof z.ZodArray);
  }
}

// Text fields take the value verbatim: YAML would turn a template such as "{question} Answer:" into a mapping.
function parseValue(text: string, schema: z.ZodType, fail: (why: string) => never): unknown {
  const s = unwrapSchema(schema);
  if (s instanceof z.ZodString || s instanceof z.ZodEnum) return text;
  try {
    return parseYaml(text) as unknown;
  } catch (e) {
    return fail(`the value is not valid YAML (${(e as Error).message.split('\n')[0]})`);
  }
}

function getChild(c: Container, seg: string): unknown {
  return Array.isArray(c) ? c[Number(seg)] : c[seg];
}

function setChild(c: Container, seg: string, value: unknown): void {
  if (Array.isArray(c)) c[Number(seg)] = value;
  else c[seg] = value;
}

// A missing or scalar intermediate is replaced by an empty container of the kind the schema expects there.
function childContainer(c: Container, seg: string, wantArray: boolean): Container {
  const v = getChild(c, seg);
  if (wantArray ? Array.isArray(v) : isPlainObject(v)) return v as Container;
  const fresh: Container = wantArray ? [] : {};
  setChild(c, seg, fresh);
  return fresh;
}
