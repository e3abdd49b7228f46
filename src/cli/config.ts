import { configJsonSchema } from '../config/rl-config.js';
import { loadRunConfig } from '../config/load-config.js';
import { resolveRun } from '../train/resolved-run.js';
import { planRun } from '../train/run-plan.js';
import { machineMemory } from '../util/memory.js';
import { planVerdict } from './plan.js';

/** `hacrl config schema`: prints the JSON Schema of a run config file (for editors and validation). */
export function runConfigSchema(): void {
  console.log(JSON.stringify(configJsonSchema(), null, 2));
}

/**
 * `hacrl config resolve FILE [key.path=value…]`: prints the config after the recipe, defaults and overrides, and the
 * memory plan's one-line verdict on stderr (stdout stays one JSON document).
 */
export async function runConfigResolve(file: string | undefined, overrides: readonly string[]): Promise<void> {
  const cfg = await loadRunConfig(file, overrides);
  console.log(JSON.stringify(cfg, null, 2));
  const line = await planRun(resolveRun(cfg)).then(
    ({ plan }) => planVerdict(plan, machineMemory()),
    (e: unknown) => `memory plan: not available (${e instanceof Error ? e.message : String(e)})`,
  );
  console.error(line);
}
