import { join } from 'node:path';
import { loadRunConfig } from '../config/load-config.js';
import { brokerPermissions } from '../distributed/broker-config.js';
import { runAgentProcess, runIdOf } from '../distributed/agent-run.js';
import { closeDefaultPool } from '../rewards/worker-pool.js';
import { StopRequest } from '../run/interrupt.js';
import { settleRunDate } from '../run/run-date.js';
import { settleRunKernels } from '../run/run-kernels.js';
import { findLatestCheckpoint } from '../run/run-folder.js';
import { createProgressDisplay } from '../train/progress.js';
import { resolveRun } from '../train/resolved-run.js';
import { checkRunFits } from '../train/run-plan.js';
import { machineMemory } from '../util/memory.js';

/** Options of `hacrl agent`. */
export interface AgentCliOptions {
  /** YAML or JSON run configuration: the same file for every agent. */
  config?: string;
  /** `key.path=value` overrides applied after the file (every agent needs the same ones). */
  set: string[];
  /** The agent of the config this process runs. */
  agent: string;
  /** NATS server address; default the config's exchange.broker. */
  broker?: string;
  /** Run even when the memory plan says this agent's process does not fit. */
  skipMemoryCheck?: boolean;
  /** exchange.mode async: start after the partners' newest step (join a run under way). */
  join?: boolean;
  /** exchange.mode async: leave the run after this step. */
  leaveAfter?: number;
}

/** `hacrl agent`: one agent of a run in this process, exchanging rollouts with the others over NATS JetStream. */
export async function runAgent(o: AgentCliOptions): Promise<void> {
  const loaded = await loadRunConfig(o.config, o.set);
  const runDir = join(loaded.runDir, o.agent);
  const continuing = (await findLatestCheckpoint(runDir)) !== null;
  const cfg = await settleRunKernels(await settleRunDate(loaded, runDir, continuing), runDir, continuing);
  const display = createProgressDisplay(process.stdout);
  display.message(
    o.skipMemoryCheck
      ? 'plan: not checked (--skip-memory-check)'
      : await checkRunFits(resolveRun(cfg), machineMemory(), { local: (name) => name === o.agent }),
  );
  // The same command continues the agent from its newest checkpoint: no --resume needed.
  const stop = new StopRequest({ resumeHint: 'Run the same command again to continue' }).install();
  try {
    await runAgentProcess(cfg, {
      agent: o.agent,
      ...(o.broker === undefined ? {} : { broker: o.broker }),
      env: process.env,
      ...(o.join ? { join: true } : {}),
      ...(o.leaveAfter === undefined ? {} : { leaveAfter: o.leaveAfter }),
      progress: display,
      stop,
    });
  } finally {
    stop.dispose();
    await closeDefaultPool();
  }
}

/**
 * `hacrl broker-users`: the nats-server authorization block of the run the configuration describes — one user per
 * agent, named after it, its password read from the server's environment (HACRL_PASSWORD_<AGENT>), allowed to
 * publish only its own subjects of the run.
 */
export async function runBrokerUsers(o: Pick<AgentCliOptions, 'config' | 'set'>): Promise<void> {
  const cfg = await loadRunConfig(o.config, o.set);
  const users = cfg.agents.map((a) => ({
    agent: a.name,
    password: `$HACRL_PASSWORD_${a.name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`,
  }));
  process.stdout.write(brokerPermissions(runIdOf(cfg), users));
}
