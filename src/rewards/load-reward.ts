/** Loading a user's reward function from a JavaScript (or, with a loader, TypeScript) module file. */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { RewardFn } from './reward.js';

const TS_HINT =
  'Node 20 cannot import TypeScript directly: compile the module to .js first (e.g. `npx tsc reward.ts`), or run ' +
  'node with a TypeScript loader (e.g. `node --import tsx …`)';

/**
 * Imports the module at `path` (relative to the working directory) and returns its reward function: the default
 * export if it is a function, else a named export `reward`. The function may be async. `.ts` files need a loader
 * (see TS_HINT); the error says so.
 */
export async function loadRewardModule(path: string): Promise<RewardFn> {
  const abs = resolve(path);
  if (!existsSync(abs)) throw new Error(`reward module ${path}: file not found`);
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(abs).href)) as Record<string, unknown>;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const hint = /\.[mc]?ts$/.test(abs) && err.code === 'ERR_UNKNOWN_FILE_EXTENSION' ? `. ${TS_HINT}` : '';
    throw new Error(`reward module ${path}: cannot import it (${err.message})${hint}`);
  }
  const fn = typeof mod.default === 'function' ? mod.default : mod.reward;
  if (typeof fn !== 'function') {
    const names = Object.keys(mod).join(', ') || 'none';
    throw new Error(
      `reward module ${path}: needs a default export or an export named "reward" that is a function (exports: ${names})`,
    );
  }
  return fn as RewardFn;
}
