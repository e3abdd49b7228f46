/**
 * From a config file and command-line overrides to a validated RunConfig: read YAML or JSON, apply `key.path=value`
 * overrides, refuse unknown keys (naming the closest valid one), fill the recipe's values (the algorithm's or its named variant's), then validate.
 */
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { parseWith } from '../util/json-file.js';
import { applyOverrides } from './overrides.js';
import { applyRecipe } from './recipe-defaults.js';
import { checkRunConfig } from './rl-config-checks.js';
import { RunConfigObject, type RunConfig } from './rl-config.js';
import { isPlainObject, unknownKeys } from './schema-keys.js';

/** The run configuration: fields with defaults and docs, then the cross-field checks. */
const RunConfigSchema = RunConfigObject.superRefine(checkRunConfig);

/** Reads a config file: JSON for `.json`, YAML otherwise; an empty file is an empty config. */
export async function readConfigFile(path: string): Promise<Record<string, unknown>> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new Error(`cannot read config ${path}: ${(e as Error).message}`);
  }
  const json = extname(path).toLowerCase() === '.json';
  let value: unknown;
  try {
    value = json ? JSON.parse(text) : parseYaml(text);
  } catch (e) {
    throw new Error(`config ${path} is not valid ${json ? 'JSON' : 'YAML'}: ${(e as Error).message}`);
  }
  if (value === null || value === undefined) return {};
  if (!isPlainObject(value))
    throw new Error(
      `config ${path} must hold a mapping of keys (algorithm, agents, rollout, …), not a list or a value`,
    );
  return value;
}

/** Validates a raw config (after overrides): unknown keys first, then the recipe's values, then the schema. */
export function parseRunConfig(raw: Record<string, unknown>, what = 'the configuration'): RunConfig {
  const unknown = unknownKeys(RunConfigSchema, raw);
  if (unknown.length > 0) throw new Error(`${what} is invalid:\n${unknown.map((m) => `✖ ${m}`).join('\n')}`);
  return parseWith(RunConfigSchema, applyRecipe(raw), what);
}

/**
 * The resolved configuration a run saved when it started (config.resolved.json, at `file`), read with today's schema:
 * a key added since the run started is absent from the file and takes its current default, so that resuming compares
 * only the values the run was started with. A key removed since is refused, naming the file.
 */
export function parseSavedRunConfig(saved: unknown, file: string): RunConfig {
  if (!isPlainObject(saved)) throw new Error(`${file} holds no configuration mapping`);
  return parseRunConfig(saved, `the saved configuration ${file}`);
}

/** The run configuration from an optional file and `key.path=value` overrides (applied in order, later wins). */
export async function loadRunConfig(file: string | undefined, overrides: readonly string[] = []): Promise<RunConfig> {
  const raw = file === undefined ? {} : await readConfigFile(file);
  const what = `${file === undefined ? 'the configuration' : `config ${file}`}${overrides.length > 0 ? ' with its overrides' : ''}`;
  return parseRunConfig(applyOverrides(RunConfigSchema, raw, overrides), what);
}
