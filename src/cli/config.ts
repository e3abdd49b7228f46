import { configJsonSchema } from '../config/rl-config.js';
import { loadRunConfig } from '../config/load-config.js';

/** `hacrl config schema`: prints the JSON Schema of a run config file (for editors and validation). */
export function runConfigSchema(): void {
  console.log(JSON.stringify(configJsonSchema(), null, 2));
}

/** `hacrl config resolve FILE [key.path=value…]`: prints the config after the recipe, defaults and overrides. */
export async function runConfigResolve(file: string | undefined, overrides: readonly string[]): Promise<void> {
  console.log(JSON.stringify(await loadRunConfig(file, overrides), null, 2));
}
