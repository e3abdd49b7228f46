import { join } from 'node:path';
import type { RunConfig } from '../config/rl-config.js';
import { fixTemplateDate, localDate } from '../tokenizer/chat-template.js';
import { pathExists, readJsonFile } from '../util/json-file.js';
import { RUN_FILES } from './run-folder.js';

/**
 * `cfg` with its one date (data.date) settled and fixed for every chat template this process renders: the config's
 * own; else, when `continuing` a run, the date saved in `runDir`'s config (none for a run saved before runs had one:
 * its templates keep reading the clock, so its resume still matches); else today's (`clock`). Filled into the config,
 * it is written into the run's saved config with the rest.
 */
export async function settleRunDate(
  cfg: RunConfig,
  runDir: string,
  continuing: boolean,
  clock: () => Date = () => new Date(),
): Promise<RunConfig> {
  const date = cfg.data.date ?? (continuing ? await savedDate(runDir) : localDate(clock()));
  fixTemplateDate(date ?? null);
  return date === undefined ? cfg : { ...cfg, data: { ...cfg.data, date } };
}

/** The date in `runDir`'s saved config, or undefined when it has none (or there is none). */
async function savedDate(runDir: string): Promise<string | undefined> {
  const saved = (await savedRunConfig(runDir)) as { data?: { date?: unknown } } | undefined;
  return typeof saved?.data?.date === 'string' ? saved.data.date : undefined;
}

/** `runDir`'s saved config as its JSON holds it (unvalidated), or undefined when there is none. */
export async function savedRunConfig(runDir: string): Promise<Record<string, unknown> | undefined> {
  const file = join(runDir, RUN_FILES.config);
  // No saved config: the resume fails on its own, with its own message.
  if (!(await pathExists(file))) return undefined;
  return (await readJsonFile(file)) as Record<string, unknown>;
}
