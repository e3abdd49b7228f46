/**
 * Where agents' steps meet: a transport stores each agent's payload of a step once and hands it to whoever asks.
 * Two implement it: `InProcessTransport` (agents in one process) and `NatsTransport` (JetStream, nats-transport.ts).
 */

/** Stores and serves each (step, agent) payload; the first one stored for a pair is the one every reader gets. */
export interface RolloutTransport {
  /** Stores agent `agent`'s payload of step `step`; publishing the pair again changes nothing. */
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
    if (!this.payloads.has(key)) this.payloads.set(key, payload);
    return Promise.resolve();
  }

  fetch(step: number, agent: string): Promise<Uint8Array | null> {
    return Promise.resolve(this.payloads.get(`${step}/${agent}`) ?? null);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
