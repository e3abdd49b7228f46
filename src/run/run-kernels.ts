import { requireReproducible, reproducibleMode } from '../backend/select.js';
import type { RunConfig } from '../config/rl-config.js';
import { savedRunConfig } from './run-date.js';

/**
 * `cfg` with its kernel mode (`reproducible`) settled and switched on for this process before any kernel runs: the
 * config's own; else, when `continuing` a run, the one in `runDir`'s saved config; else the mode `hacrl
 * --reproducible` or HACRL_REPRODUCIBLE chose. Filled into the config, it is written into the run's saved config. A
 * run saved before runs recorded the mode resumes with the mode the command line chooses, its config unchanged.
 */
export async function settleRunKernels(cfg: RunConfig, runDir: string, continuing: boolean): Promise<RunConfig> {
  const saved = continuing ? await savedRunConfig(runDir) : undefined;
  const on = cfg.reproducible ?? (saved?.reproducible as boolean | undefined);
  if (on !== undefined) {
    requireReproducible(
      on,
      cfg.reproducible === undefined ? `the saved configuration of ${runDir}` : 'the configuration',
    );
    return { ...cfg, reproducible: on };
  }
  return saved === undefined ? { ...cfg, reproducible: reproducibleMode().on } : cfg;
}
