import { loadRunConfig } from '../config/load-config.js';
import { closeDefaultPool } from '../rewards/worker-pool.js';
import { trainRl } from '../train/rl-trainer.js';

/** Options of `hacrl train`. */
export interface TrainCliOptions {
  /** YAML or JSON run configuration. */
  config?: string;
  /** `key.path=value` overrides applied after the file. */
  set: string[];
  /** Continue the run folder's latest checkpoint. */
  resume: boolean;
}

/** `hacrl train`: the training the configuration names (its algorithm's recipe), with progress lines on stdout. */
export async function runTrain(o: TrainCliOptions): Promise<void> {
  const cfg = await loadRunConfig(o.config, o.set);
  try {
    await trainRl(cfg, { resume: o.resume, progress: (line) => console.log(line) });
  } finally {
    await closeDefaultPool();
  }
}
