/**
 * Where agents' steps meet: a transport stores each agent's payload of a step once and hands it to whoever asks.
 * Two implement it: `InProcessTransport` (agents in one process) and `NatsTransport` (JetStream, nats-transport.ts).
 */

/**
 * A payload differs from the one already stored for its (step, agent). An agent's payload of a step is a function of
 * the run's configuration and seeds, so this is another run under the same name, never a restart.
 */
export class ConflictingPayload extends Error {}

/** The broker refused a publish this agent's credentials do not allow; waiting cannot change that. */
export class PublishRefused extends Error {}

/** The transport was closed while an agent still read or wrote through it; waiting cannot change that either. */
export class TransportClosed extends Error {}

/**
 * What a payload is: an agent's records of a step (or its fingerprint, step 0), what an asynchronous step consumed
 * (its manifest), or that the agent left the run after a step (async).
 */
export type Channel = 'step' | 'manifest' | 'leave';

/** Stores and serves each (step, agent) payload; the first one stored for a pair is the one every reader gets. */
export interface RolloutTransport {
  /**
   * Stores agent `agent`'s payload of step `step` on `channel` (default 'step'); publishing the same bytes again
   * changes nothing, and different bytes throw ConflictingPayload.
   */
  publish(step: number, agent: string, payload: Uint8Array, channel?: Channel): Promise<void>;
  /** The payload agent `agent` published for step `step` on `channel` (default 'step'), or null while there is none. */
  fetch(step: number, agent: string, channel?: Channel): Promise<Uint8Array | null>;
  /**
   * When agent `agent`'s payload of step `step` was stored, as a position comparable across agents and steps (a
   * later store has a larger one), or null while there is none.
   */
  storedAt(step: number, agent: string): Promise<number | null>;
  close(): Promise<void>;
}

/** Agents of one process: payloads in memory. */
export class InProcessTransport implements RolloutTransport {
  private readonly payloads = new Map<string, Uint8Array>();
  private readonly order = new Map<string, number>();
  private closed: string | null = null;

  publish(step: number, agent: string, payload: Uint8Array, channel: Channel = 'step'): Promise<void> {
    if (this.closed !== null) return Promise.reject(new TransportClosed(this.closed));
    const key = channel === 'step' ? `${step}/${agent}` : `${channel}/${step}/${agent}`;
    const stored = this.payloads.get(key);
    if (stored === undefined) {
      this.payloads.set(key, payload);
      this.order.set(key, this.order.size);
    } else if (!Buffer.from(stored).equals(payload))
      return Promise.reject(
        new ConflictingPayload(`agent ${agent}'s records of step ${step} differ from the stored ones`),
      );
    return Promise.resolve();
  }

  fetch(step: number, agent: string, channel: Channel = 'step'): Promise<Uint8Array | null> {
    if (this.closed !== null) return Promise.reject(new TransportClosed(this.closed));
    const key = channel === 'step' ? `${step}/${agent}` : `${channel}/${step}/${agent}`;
    return Promise.resolve(this.payloads.get(key) ?? null);
  }

  storedAt(step: number, agent: string): Promise<number | null> {
    return Promise.resolve(this.order.get(`${step}/${agent}`) ?? null);
  }

  /** Later publishes and fetches reject with TransportClosed carrying `why` (default: the transport was closed). */
  close(why = 'the in-process transport was closed'): Promise<void> {
    this.closed = why;
    return Promise.resolve();
  }
}
