/**
 * A team trained in one process as if each agent ran apart and every partner's newest step were always `lag` steps
 * old: at step t each agent trains on its own fresh records of step t plus each partner's records of step t − lag
 * (none while t ≤ lag), with the log-probs its generator recorded and the P̂ history of that step. For lag ≥ 1 each
 * agent's exchange is the asynchronous one (async-exchange.ts) looking at a transport that hides every partner step
 * newer than t − lag, so the learner sees exactly what an asynchronous agent sees when its partner's newest published
 * step is lag old; lag 0 is the lockstep exchange, which ends byte-equal to `hacrl train` of the same config. Each
 * agent trains in its own folder `<runDir>/<agent>`; what a step consumes depends on `lag` alone, never on timing.
 */
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RunConfig } from '../config/rl-config.js';
import { asyncExchange, stepLimits } from '../distributed/agent-run.js';
import { RolloutExchange } from '../distributed/exchange.js';
import { Manifest } from '../distributed/manifest.js';
import { InProcessTransport, type Channel, type RolloutTransport } from '../distributed/transport.js';
import { resolveRun } from '../train/resolved-run.js';
import { trainRl, type ProgressFn, type StepExchange } from '../train/rl-trainer.js';

/** Seconds an agent waits for a partner step; generous, as the partner computes on the same thread. */
const WAIT_SECONDS = 3600;

/** The transport as agent `self` sees it at a step: the partners' steps up to `horizon` only. */
class LaggedView implements RolloutTransport {
  /** The newest partner step visible (0: none). */
  horizon = 0;

  constructor(
    private readonly inner: RolloutTransport,
    private readonly self: string,
  ) {}

  private hidden(step: number, agent: string, channel: Channel = 'step'): boolean {
    return agent !== this.self && channel === 'step' && step > this.horizon;
  }

  publish(step: number, agent: string, payload: Uint8Array, channel?: Channel): Promise<void> {
    return this.inner.publish(step, agent, payload, channel);
  }

  fetch(step: number, agent: string, channel?: Channel): Promise<Uint8Array | null> {
    return this.hidden(step, agent, channel) ? Promise.resolve(null) : this.inner.fetch(step, agent, channel);
  }

  storedAt(step: number, agent: string): Promise<number | null> {
    return this.hidden(step, agent) ? Promise.resolve(null) : this.inner.storedAt(step, agent);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/**
 * Agent `self`'s exchange at `lag` ≥ 1: step t waits until every partner has published step t − lag (the partners
 * train in this process, each needing only older steps of this agent's, so the wait ends), shows the asynchronous
 * exchange the partners' steps up to t − lag, and takes one partner step per step (maxStepsPerPartner 1) at most lag
 * old — that is, t − lag.
 */
class LaggedExchange implements StepExchange {
  constructor(
    private readonly inner: StepExchange,
    private readonly view: LaggedView,
    private readonly transport: RolloutTransport,
    private readonly partners: readonly string[],
    private readonly lag: number,
  ) {}

  get local(): ReadonlySet<string> {
    return this.inner.local;
  }

  async complete(...[step, table, sampled]: Parameters<StepExchange['complete']>) {
    const seen = step - this.lag;
    for (const p of this.partners)
      for (let pause = 1; seen >= 1 && (await this.transport.fetch(seen, p)) === null; pause = Math.min(2 * pause, 50))
        await sleep(pause);
    this.view.horizon = Math.max(0, seen);
    return this.inner.complete(step, table, sampled);
  }
}

/**
 * Trains every agent of `cfg` (each in `<cfg.runDir>/<agent>`, fresh) with partners `lag` steps stale (lag 0:
 * lockstep); `progress` gets each agent's lines prefixed with its name.
 */
export async function trainStalePair(cfg: RunConfig, lag: number, progress: ProgressFn): Promise<void> {
  if (!(Number.isInteger(lag) && lag >= 0))
    throw new Error(`the staleness must be a whole number of steps ≥ 0, got ${lag}`);
  const run = resolveRun(cfg);
  const names = run.agents.map((a) => a.name);
  if (names.length < 2) throw new Error(`a stale pair needs 2 or more agents; the config has ${names.join(', ')}`);
  const transport = new InProcessTransport();
  const limits = await stepLimits(run);
  const common = { run: 'stale', agents: names, limits, waitSeconds: WAIT_SECONDS, onLate: 'stop' as const };
  const exchanges = await Promise.all(
    names.map(async (self) => {
      const log = (line: string) => progress(`${self}: ${line}`);
      if (lag === 0) {
        const x = new RolloutExchange(transport, { ...common, local: [self], fingerprint: {}, log });
        return { x, greet: () => x.greet() };
      }
      const view = new LaggedView(transport, self);
      const bounds = { maxStaleness: lag, maxAhead: lag, maxStepsPerPartner: 1 };
      const manifest = await Manifest.open(join(cfg.runDir, self));
      const inner = await asyncExchange(view, run, self, manifest, bounds, { ...common, fingerprint: {}, log }, {});
      const partners = names.filter((n) => n !== self);
      return { x: new LaggedExchange(inner, view, transport, partners, lag), greet: () => inner.greet() };
    }),
  );
  await Promise.all(exchanges.map((e) => e.greet()));
  // The first agent to fail closes the transport: its partners stop at their next read instead of waiting
  // WAIT_SECONDS for records that will never come; the first failure is the one reported.
  let first: unknown = null;
  await Promise.allSettled(
    names.map((self, i) =>
      trainRl(
        { ...cfg, runDir: join(cfg.runDir, self) },
        { resume: false, progress: (line) => progress(`${self}: ${line}`), exchange: exchanges[i]!.x },
      ).catch(async (e: unknown) => {
        first ??= e;
        await transport.close(`agent ${self} failed: ${(e as Error).message}`);
        throw e;
      }),
    ),
  );
  if (first !== null) throw first;
}
