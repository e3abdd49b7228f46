/**
 * One agent of a run as its own process: it samples, trains, validates and checkpoints only its agent, in its own
 * folder `<runDir>/<agent>`, and exchanges each step's records with the other agents over NATS JetStream. Given the
 * same config and seeds, every agent ends exactly where the single-process run (`hacrl train`) leaves it.
 *
 * Of each partner (an agent another process trains) this process reads no weights: its tokenizer (re-tokenizing its
 * responses, its replayed mini-batch draws and the arrival checks), its config.json vocabulary size (the arrival
 * checks' id range) and its folder's file hashes (the fingerprint, streamed).
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { parseSavedRunConfig } from '../config/load-config.js';
import type { RunConfig } from '../config/rl-config.js';
import { readHfConfig } from '../model/hf-config.js';
import { Interrupted, StopRequest } from '../run/interrupt.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import { renderPrompt } from '../tasks/prompt.js';
import { problemsOfStep } from '../train/sample-sources.js';
import { AsyncExchange, type AsyncExchangeOptions } from './async-exchange.js';
import { Manifest } from './manifest.js';
import { findLatestCheckpoint, RunFolder } from '../run/run-folder.js';
import type { ProgressDisplay } from '../train/progress.js';
import { loadTokenizer } from '../tokenizer/load.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import { partnerTokenizers } from '../train/learners.js';
import { resolveRun, type ResolvedRun } from '../train/resolved-run.js';
import { trainRl, type StepExchange } from '../train/rl-trainer.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildRewards } from '../train/run-source.js';
import { RolloutExchange, type PartnerCheck } from './exchange.js';
import { brokerCredentials, NatsTransport } from './nats-transport.js';
import type { RolloutTransport } from './transport.js';
import { checkPartnerStep, type PartnerSettings } from './record-checks.js';
import type { StepLimits } from './records.js';
import { runFingerprint } from './run-fingerprint.js';

/** How one agent process runs. */
export interface AgentRunOptions {
  /** The agent of the config this process runs. */
  agent: string;
  /** Broker address; default the config's exchange.broker. */
  broker?: string;
  /** Where credentials may come from (HACRL_NATS_USER, HACRL_NATS_PASSWORD, HACRL_NATS_NKEY_SEED). */
  env: NodeJS.ProcessEnv;
  progress: ProgressDisplay;
  stop?: StopRequest;
  /** exchange.mode async: a fresh agent starts after the partners' newest step (joins a run under way); default false. */
  join?: boolean;
  /** exchange.mode async: leave the run after this step (the others go on); default: at the last step. */
  leaveAfter?: number;
  /**
   * exchange.mode async: replay this agent of a finished run from the manifest in this folder (its run folder),
   * against the run's broker, instead of exchanging; default none.
   */
  replayFrom?: string;
}

/**
 * The run's name on the broker: exchange.runId, or a hash of the config without its exchange section (where the
 * broker is and how to log in do not change what is trained) but with its mode when async (the payloads differ), so
 * agents given the same file agree without talking.
 * The run's date (data.date, settled when each agent starts) is left out too: agents started on different days still
 * meet, and their fingerprints name the difference.
 */
export function runIdOf(cfg: RunConfig): string {
  if (cfg.exchange.runId !== '') return cfg.exchange.runId;
  // Async payloads differ from lockstep ones: the mode names another run (lockstep keeps its name).
  const mode = cfg.exchange.mode === 'async' ? 'async' : null;
  const trained = JSON.stringify({ ...cfg, exchange: mode, data: { ...cfg.data, date: null } });
  return createHash('sha256').update(trained).digest('hex').slice(0, 16);
}

/** Runs agent `o.agent` of `cfg` until the last step; a restart continues from its newest checkpoint. */
export async function runAgentProcess(cfg: RunConfig, o: AgentRunOptions): Promise<void> {
  const resolved = resolveRun(cfg);
  const { agents } = resolved;
  if (!agents.some((a) => a.name === o.agent))
    throw new Error(
      `--agent ${o.agent}: the config has no such agent (it has ${agents.map((a) => a.name).join(', ')})`,
    );
  if (cfg.workflow)
    throw new Error('hacrl agent runs single-turn rollouts (grpo, gspo, hacpo, naive); run workflows with hacrl train');
  const runDir = join(cfg.runDir, o.agent);
  const resume = (await findLatestCheckpoint(runDir)) !== null;
  // Waits, limits and credentials may change between restarts (a longer wait after a late partner): they do not
  // change what is trained, so a restart keeps the exchange section the run folder was started with.
  const run = new RunFolder(runDir);
  const started = resume ? parseSavedRunConfig(await run.readConfig(), run.path('config')) : null;
  const mine: RunConfig = { ...cfg, runDir, exchange: started?.exchange ?? cfg.exchange };
  const limits = await stepLimits(resolved);
  const x = cfg.exchange;
  const tlsFiles = { caFile: x.tlsCaFile, certFile: x.tlsCertFile, keyFile: x.tlsKeyFile };
  const tls = Object.values(tlsFiles).some((f) => f !== undefined)
    ? Object.fromEntries(Object.entries(tlsFiles).filter(([, f]) => f !== undefined))
    : null;
  const manifest = x.mode === 'async' ? await Manifest.open(o.replayFrom ?? runDir) : null;
  const runId = o.replayFrom === undefined ? runIdOf(cfg) : manifest?.header?.run;
  if (runId === undefined)
    throw new Error(`--replay: ${o.replayFrom} holds no manifest of an asynchronous run (exchange.mode async)`);
  const transport = await NatsTransport.open({
    broker: o.broker ?? x.broker,
    run: runId,
    agent: o.agent,
    maxMessageBytes: x.maxMessageBytes,
    maxObjectBytes: x.maxObjectBytes,
    connectSeconds: x.waitSeconds,
    ...(await brokerCredentials(x, o.env)),
    ...(tls ? { tls } : {}),
  });
  try {
    // Read once: the arrival checks and the learners' re-tokenizing share them.
    const partners = await partnerTokenizers(agents, (name) => name === o.agent);
    const common = {
      run: runId,
      agents: agents.map((a) => a.name),
      limits,
      waitSeconds: x.waitSeconds,
      onLate: x.onLate,
      check: await partnerCheck(resolved, partners),
      onBadRecord: x.onBadRecord,
      // The date chat templates render goes into every prompt: partners must share it as they share the data.
      fingerprint: { ...(await runFingerprint(resolved)), 'data.date': cfg.data.date ?? '' },
      log: (line: string) => o.progress.message(line),
      // A signal while waiting for partners drops the step as one during its own work does.
      ...(o.stop ? { poll: () => o.stop!.poll() } : {}),
    };
    if (manifest) {
      const exchange = await asyncExchange(transport, resolved, o.agent, manifest, x, common, o);
      await exchange.greet();
      await trainAsync(mine, resume, o, slowed(exchange, o.env), manifest, partners);
    } else {
      const exchange = new RolloutExchange(transport, { ...common, local: [o.agent] });
      await exchange.greet();
      const slow = slowed(exchange, o.env);
      await trainRl(mine, {
        resume,
        progress: o.progress,
        exchange: slow,
        partners,
        ...(o.stop ? { stop: o.stop } : {}),
      });
    }
  } finally {
    await transport.close();
  }
}

/** What each agent's records of a step must satisfy: its groups and group size as the run resolves them, its vocabulary. */
export async function stepLimits(run: ResolvedRun): Promise<(agent: string) => StepLimits> {
  const vocab = new Map(
    await Promise.all(run.agents.map(async (a) => [a.name, (await readHfConfig(a.checkpoint)).vocabSize] as const)),
  );
  return (name) => ({ ...run.exchange.get(name)!, vocabSize: vocab.get(name)! });
}

/** The arrival checks of every partner (record-checks.ts): its settings as the run resolves them, its tokenizer. */
async function partnerCheck(run: ResolvedRun, tokenizers: ReadonlyMap<string, Tokenizer>): Promise<PartnerCheck> {
  if (run.source.kind !== 'rollout') throw new Error('hacrl agent runs single-turn rollouts only');
  const rewards = await buildRewards(run.source.rewards);
  const partners = new Map<string, PartnerSettings>();
  for (const a of run.agents) {
    const tokenizer = tokenizers.get(a.name);
    if (tokenizer)
      partners.set(a.name, {
        tokenizer,
        groupSize: a.groupSize,
        maxNewTokens: a.maxNewTokens,
        stopStrings: a.stopStrings,
      });
  }
  return (agent, step, partner, own) =>
    checkPartnerStep(agent, step, partner.records, partner.metrics, own, partners.get(agent)!, rewards);
}

/**
 * `exchange` with every step made HACRL_TEST_STEP_DELAY_MS milliseconds slower before it publishes (a test hook: one
 * agent of a pair made the slow one, in either mode); `exchange` itself when the variable is unset.
 */
function slowed<E extends StepExchange>(exchange: E, env: NodeJS.ProcessEnv): E {
  const ms = Number(env.HACRL_TEST_STEP_DELAY_MS ?? 0);
  if (!(ms > 0)) return exchange;
  const complete = exchange.complete.bind(exchange);
  exchange.complete = async (...args) => {
    await sleep(ms);
    return complete(...args);
  };
  return exchange;
}

/**
 * The asynchronous exchange of agent `self` (exchange.mode async) over `transport`, with `manifest`: what each step
 * consumes as `x` bounds it (maxStaleness, maxAhead, maxStepsPerPartner).
 */
export async function asyncExchange(
  transport: RolloutTransport,
  run: ResolvedRun,
  self: string,
  manifest: Manifest,
  x: Pick<RunConfig['exchange'], 'maxStaleness' | 'maxAhead' | 'maxStepsPerPartner'>,
  common: Omit<
    AsyncExchangeOptions,
    | 'self'
    | 'maxStaleness'
    | 'maxAhead'
    | 'maxStepsPerPartner'
    | 'promptsPerStep'
    | 'capabilityWindow'
    | 'renderPrompt'
    | 'drawn'
    | 'manifest'
    | 'join'
  >,
  o: Pick<AgentRunOptions, 'join' | 'replayFrom'>,
): Promise<AsyncExchange> {
  if (run.source.kind !== 'rollout') throw new Error('hacrl agent runs single-turn rollouts only');
  const problems = (await loadDataSpec(run.source.train)).problems;
  const me = run.agents.find((a) => a.name === self)!;
  const tokenizer = await loadTokenizer(me.checkpoint);
  const prompt = { template: me.template, ...(me.system === undefined ? {} : { system: me.system }) };
  return new AsyncExchange(transport, {
    ...common,
    self,
    maxStaleness: x.maxStaleness,
    maxAhead: x.maxAhead,
    maxStepsPerPartner: x.maxStepsPerPartner,
    promptsPerStep: run.promptsPerStep,
    capabilityWindow: run.learning.capabilityWindow,
    renderPrompt: (p) => tokenizer.encode(renderPrompt(tokenizer, p, prompt)),
    drawn: (step) =>
      problemsOfStep(problems, run.seed, run.promptsPerStep, step).map((p, group) => ({
        group,
        prompt: p.prompt,
        gold: p.answer,
      })),
    manifest,
    join: o.join ?? false,
    replay: o.replayFrom !== undefined,
  });
}

/**
 * Trains agent `o.agent` with the asynchronous `exchange` (its partners' tokenizers: `partners`) and publishes that it
 * leaves once it stops: after the last step, after `o.leaveAfter`, or on a stop request.
 */
async function trainAsync(
  cfg: RunConfig,
  resume: boolean,
  o: AgentRunOptions,
  exchange: AsyncExchange,
  manifest: Manifest,
  partners: ReadonlyMap<string, Tokenizer>,
): Promise<void> {
  // A replay ends where the replayed agent's manifest does.
  const after = o.replayFrom === undefined ? (o.leaveAfter ?? Infinity) : manifest.lastStep();
  const stop = new LeaveAfter(exchange, after, o.stop);
  try {
    await trainRl(cfg, { resume, progress: o.progress, exchange, stop, partners });
  } catch (e) {
    if (!(e instanceof Interrupted) || o.stop?.requested) throw e;
  }
  if (o.replayFrom === undefined) await exchange.leave();
}

/**
 * `hacrl train --replay DIR`: every agent of the asynchronous run in DIR (its folders DIR/<agent>) trained again in this
 * process, one after the other, into `cfg.runDir`, each step taking what the agent's manifest lists from the run's
 * broker — byte-equal to the run that wrote the manifests. An agent without a folder in DIR is left out.
 */
export async function replayRun(cfg: RunConfig, from: string, o: Pick<AgentRunOptions, 'env' | 'progress' | 'broker'>) {
  for (const a of cfg.agents) {
    const folder = new RunFolder(join(from, a.name));
    const saved = await folder.readConfig().catch(() => null);
    if (saved === null) {
      o.progress.message(`${from}/${a.name} holds no run of agent ${a.name}: left out of the replay`);
      continue;
    }
    const original = parseSavedRunConfig(saved, folder.path('config'));
    o.progress.message(`replaying agent ${a.name} from ${folder.dir}`);
    // Where the broker is and how to log in come from this config; what was trained, from the run's own.
    const replayed = { ...original, runDir: cfg.runDir, exchange: { ...cfg.exchange, mode: 'async' as const } };
    await runAgentProcess(replayed, { ...o, agent: a.name, replayFrom: folder.dir });
  }
}

/** A stop request that also holds once the exchange has completed step `after` (an agent leaving the run). */
class LeaveAfter extends StopRequest {
  constructor(
    private readonly exchange: AsyncExchange,
    private readonly after: number,
    private readonly outer: StopRequest | undefined,
  ) {
    super();
  }

  override get requested(): boolean {
    return this.exchange.lastStep >= this.after || (this.outer?.requested ?? false);
  }

  /** Leaving waits for the step's end; a signal to the process (the outer request's) drops the step as anywhere. */
  override poll(): void {
    this.outer?.poll();
  }

  /** A stop the process's signal asked for is reported by its request: its signal, exit status and resume hint. */
  override interrupted(step: number, checkpointDir: string): Interrupted {
    return this.outer?.requested ? this.outer.interrupted(step, checkpointDir) : super.interrupted(step, checkpointDir);
  }

  /** A dropped step (only a signal drops one), as the process's request reports it. */
  override dropped(...args: Parameters<StopRequest['dropped']>): Interrupted {
    return this.outer ? this.outer.dropped(...args) : super.dropped(...args);
  }
}
