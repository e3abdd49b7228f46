import { loadRunConfig } from '../config/load-config.js';
import { replayRun } from '../distributed/agent-run.js';
import { closeDefaultPool } from '../rewards/worker-pool.js';
import { createProgressDisplay } from '../train/progress.js';
import { resumeCommand, StopRequest } from '../run/interrupt.js';
import { settleRunDate } from '../run/run-date.js';
import { settleRunKernels } from '../run/run-kernels.js';
import { trainRl } from '../train/rl-trainer.js';
import { resolveRun } from '../train/resolved-run.js';
import { checkRunFits } from '../train/run-plan.js';
import { machineMemory } from '../util/memory.js';

/** Options of `hacrl train`. */
export interface TrainCliOptions {
  /** YAML or JSON run configuration. */
  config?: string;
  /** `key.path=value` overrides applied after the file. */
  set: string[];
  /** Continue the run folder's latest checkpoint. */
  resume: boolean;
  /** Train even when the memory plan says the run does not fit. */
  skipMemoryCheck?: boolean;
  /** Replay the finished asynchronous run in this folder from its agents' manifests (into the config's runDir). */
  replay?: string;
}

/** `hacrl train`: the training the configuration names (its algorithm's recipe); a live status line on a terminal, plain lines otherwise. */
export async function runTrain(o: TrainCliOptions): Promise<void> {
  const loaded = await loadRunConfig(o.config, o.set);
  if (o.replay !== undefined) {
    try {
      await replayRun(loaded, o.replay, { env: process.env, progress: createProgressDisplay(process.stdout) });
    } finally {
      await closeDefaultPool();
    }
    return;
  }
  const cfg = await settleRunKernels(await settleRunDate(loaded, loaded.runDir, o.resume), loaded.runDir, o.resume);
  const display = createProgressDisplay(process.stdout);
  display.message(
    o.skipMemoryCheck
      ? 'plan: not checked (--skip-memory-check)'
      : await checkRunFits(resolveRun(cfg), machineMemory()),
  );
  const stop = new StopRequest({ resumeHint: `Resume with: ${resumeCommand(process.argv.slice(2))}` }).install();
  try {
    await trainRl(cfg, { resume: o.resume, progress: display, stop });
  } finally {
    stop.dispose();
    await closeDefaultPool();
  }
}
