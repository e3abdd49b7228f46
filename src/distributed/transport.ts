/**
 * Where agents' steps meet: a transport stores each agent's payload of a step once and hands it to whoever asks.
 * Two implement it: `InProcessTransport` (agents in one process) and `NatsTransport` (JetStream, nats-transport.ts).
 */

/**
 * A payload differs from the one already stored for its (step, agent). An agent's payload of a step is a function of
 * the run's configuration and seeds, so this is another run under the same name, never a restart.
 */
export class ConflictingPayload extends Error {}

/** Stores and serves each (step, agent) payload; the first one stored for a pair is the one every reader gets. */
export interface RolloutTransport {
  /**
   * Stores agent `agent`'s payload of step `step`; publishing the same bytes again changes nothing, and different
   * bytes throw ConflictingPayload.
   */
  publish(step: number, agent: string, payload: Uint8Array): Promise<void>;
  /** The payload agent `agent` published for step `step`, or null while there is none. */
  fetch(step: number, agent: string): Promise<Uint8Array | null>;
  close(): Promise<void>;
}

/** Agents of one process: payloads in memory. */
export class InProcessTransport implements RolloutTransport {
  private readonly payloads = new Map<string, Uint8Array>();

  publish(step: number, agent: string, payload: Uint8Array): Promise<void> {
    const key = `${step}/${agent}`;
    const stored = this.payloads.get(key);
    if (stored === undefined) this.payloads.set(key, payload);
    else if (!Buffer.from(stored).equals(payload))
      return Promise.reject(
        new ConflictingPayload(`agent ${agent}'s records of step ${step} differ from the stored ones`),
      );
    return Promise.resolve();
  }

  fetch(step: number, agent: string): Promise<Uint8Array | null> {
    return Promise.resolve(this.payloads.get(`${step}/${agent}`) ?? null);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
