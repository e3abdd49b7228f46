/**
 * The rollout exchange over NATS JetStream. Agent A's records of step t go on the stream `HACRL_<run>` under
 * `run.<run>.step.<t>.agent.<A>` with the message id `<run>/<t>/<A>` (an asynchronous run's manifests and leave
 * notes under `run.<run>.manifest.<t>.agent.<A>` and `run.<run>.leave.<t>.agent.<A>`, ids `<run>/<channel>/<t>/<A>`): the server drops a repeated publish of the same
 * id, and readers take the first message with it on the subject, so a restarted agent's publishes change nothing
 * (and a publisher whose bytes differ from the stored ones learns it is another run under the same name). A step
 * over the message limit goes through the Object Store `hacrl_<run>` and the stream carries a reference (name, size,
 * SHA-256). Both use file storage, so a broker killed and restarted loses nothing it acknowledged.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import {
  jetstream,
  jetstreamManager,
  type JetStreamClient,
  type JetStreamManager,
  type StoredMsg,
} from '@nats-io/jetstream';
import { Objm, type ObjectStore } from '@nats-io/obj';
import {
  connect,
  headers,
  nkeyAuthenticator,
  type NatsConnection,
  type NodeConnectionOptions,
} from '@nats-io/transport-node';
import { z } from 'zod';
import { ConflictingPayload, PublishRefused, type Channel, type RolloutTransport } from './transport.js';

/** How to reach the broker and what it may carry. */
export interface NatsSettings {
  /** Server URL, e.g. nats://127.0.0.1:4222. */
  broker: string;
  /** The run's name: stream, subjects and object store derive from it. */
  run: string;
  /** This agent's name (the connection's name on the server). */
  agent: string;
  /** Largest message on the stream, bytes (the server's max_payload caps it). */
  maxMessageBytes: number;
  /** Largest payload through the Object Store, bytes. */
  maxObjectBytes: number;
  /** Seconds to keep trying to reach the broker at start. */
  connectSeconds: number;
  user?: string;
  password?: string;
  /** An nkey seed (the text of a .nk file). */
  nkeySeed?: string;
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
}

/** Credentials of a NatsSettings from the config's files, each overridden by its environment variable. */
export async function brokerCredentials(
  c: { user?: string; passwordFile?: string; nkeySeedFile?: string },
  env: NodeJS.ProcessEnv,
): Promise<Pick<NatsSettings, 'user' | 'password' | 'nkeySeed'>> {
  const fromFile = async (path: string | undefined): Promise<string | undefined> =>
    path === undefined ? undefined : (await readFile(path, 'utf8')).trim();
  const user = env.HACRL_NATS_USER ?? c.user;
  const password = env.HACRL_NATS_PASSWORD ?? (await fromFile(c.passwordFile));
  const nkeySeed = env.HACRL_NATS_NKEY_SEED ?? (await fromFile(c.nkeySeedFile));
  return {
    ...(user === undefined ? {} : { user }),
    ...(password === undefined ? {} : { password }),
    ...(nkeySeed === undefined ? {} : { nkeySeed }),
  };
}

/** A broker URL fit to print: user and password it may carry are masked. */
export function printableBroker(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}

/** The header that says whether the body is the payload or a reference to it in the Object Store. */
const KIND = 'Hacrl-Payload';
/** Room left for headers and the subject in a message, bytes. */
const ENVELOPE_BYTES = 1024;

const ObjectRefSchema = z.strictObject({ object: z.string(), size: z.number().int().min(0), digest: z.string() });

/** The SHA-256 of `data`, hex: names an object by its content and checks it on the way back. */
const digestOf = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

/** The JetStream transport of one agent process. */
export class NatsTransport implements RolloutTransport {
  private constructor(
    private readonly nc: NatsConnection,
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly objects: ObjectStore,
    private readonly s: NatsSettings,
  ) {}

  /** Connects (retrying until `connectSeconds`), and creates the run's stream and object store when missing. */
  static async open(s: NatsSettings): Promise<NatsTransport> {
    const options: NodeConnectionOptions = {
      servers: s.broker,
      name: `hacrl agent ${s.agent}`,
      // Once connected, ride out a broker restart: the client reconnects and every call is retried by the exchange.
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      ...(s.user === undefined ? {} : { user: s.user, pass: s.password }),
      ...(s.nkeySeed === undefined ? {} : { authenticator: nkeyAuthenticator(new TextEncoder().encode(s.nkeySeed)) }),
      ...(s.tls ? { tls: s.tls } : {}),
    };
    const deadline = Date.now() + s.connectSeconds * 1e3;
    let nc: NatsConnection | null = null;
    while (nc === null) {
      try {
        nc = await connect(options);
      } catch (e) {
        // Refused credentials will not improve with waiting (and the error never carries them).
        if ((e as Error).name === 'AuthorizationError')
          throw new Error(
            `the NATS server at ${printableBroker(s.broker)} refused this agent's credentials (${(e as Error).message}): ` +
              'check exchange.user / passwordFile / nkeySeedFile or HACRL_NATS_USER / HACRL_NATS_PASSWORD / HACRL_NATS_NKEY_SEED',
          );
        if (Date.now() >= deadline)
          throw new Error(
            `cannot reach the NATS server at ${printableBroker(s.broker)} within ${s.connectSeconds} s ` +
              `(${(e as Error).message}); start it (nats-server -js) or pass --broker`,
          );
        await new Promise((r) => setTimeout(r, 250));
      }
    }
    const maxMessageBytes = Math.min(s.maxMessageBytes, nc.info?.max_payload ?? s.maxMessageBytes);
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({
      name: `HACRL_${s.run}`,
      subjects: [`run.${s.run}.>`],
      storage: 'file',
      max_msg_size: maxMessageBytes,
      // Readers look messages up by subject (direct get), without consumers.
      allow_direct: true,
      // The server drops a repeated message id within this window; readers take the first message after it anyway.
      duplicate_window: 24 * 3600 * 1e9,
    });
    const objects = await new Objm(nc).create(`hacrl_${s.run}`, { storage: 'file' });
    return new NatsTransport(nc, jetstream(nc), jsm, objects, { ...s, maxMessageBytes });
  }

  private subject(step: number, agent: string, channel: Channel = 'step'): string {
    return `run.${this.s.run}.${channel}.${step}.agent.${agent}`;
  }

  private id(step: number, agent: string, channel: Channel = 'step'): string {
    return channel === 'step' ? `${this.s.run}/${step}/${agent}` : `${this.s.run}/${channel}/${step}/${agent}`;
  }

  async publish(step: number, agent: string, payload: Uint8Array, channel: Channel = 'step'): Promise<void> {
    const subject = this.subject(step, agent, channel);
    const h = headers();
    let body = payload;
    if (payload.length + ENVELOPE_BYTES <= this.s.maxMessageBytes) h.set(KIND, 'inline');
    else {
      if (payload.length > this.s.maxObjectBytes)
        throw new Error(
          `agent ${agent}'s records of step ${step} are ${payload.length} bytes, over exchange.maxObjectBytes ` +
            `(${this.s.maxObjectBytes})`,
        );
      const digest = digestOf(payload);
      // Named by content: an object, once referenced, is never replaced under a reader.
      const object = `${subject}/${digest}`;
      const stored = await this.objects.info(object);
      if (stored === null || stored.deleted) await this.objects.putBlob({ name: object }, payload);
      h.set(KIND, 'object');
      body = new TextEncoder().encode(JSON.stringify({ object, size: payload.length, digest }));
    }
    const ack = await this.js
      .publish(subject, body, { msgID: this.id(step, agent, channel), headers: h })
      .catch((e: unknown) => {
        if (!/Permissions Violation/.test((e as Error).message)) throw e;
        throw new PublishRefused(
          `the broker refused to store agent ${agent}'s records of step ${step} (${(e as Error).message}): the user ` +
            `this process logs in as may publish only its own agent's subjects; run agent ${agent} with its own ` +
            'credentials (docs/distributed.md, "One user per agent")',
        );
      });
    if (!ack.duplicate) return;
    const first = await this.firstWithId(subject, this.id(step, agent, channel));
    if (first !== null && (first.header.get(KIND) !== h.get(KIND) || !Buffer.from(first.data).equals(body)))
      throw new ConflictingPayload(
        `the broker already holds different records of agent ${agent} for step ${step} of run ${this.s.run}: ` +
          'another run under the same name (the same configuration started over, or its starting checkpoints ' +
          `changed), or records published under agent ${agent}'s name by someone else — then they may be forged, ` +
          `and partners that read step ${step} before this agent may have trained on them (their logs show what ` +
          `they refused). Set exchange.runId to a new name, or delete the stream HACRL_${this.s.run}; give each ` +
          'agent its own broker user (docs/distributed.md, "One user per agent")',
      );
  }

  async fetch(step: number, agent: string, channel: Channel = 'step'): Promise<Uint8Array | null> {
    const subject = this.subject(step, agent, channel);
    const msg = await this.firstWithId(subject, this.id(step, agent, channel));
    if (msg === null) return null;
    if (msg.header.get(KIND) !== 'object') return msg.data;
    const ref = ObjectRefSchema.parse(msg.json());
    if (ref.size > this.s.maxObjectBytes)
      throw new Error(
        `agent ${agent}'s records of step ${step} are ${ref.size} bytes, over exchange.maxObjectBytes (${this.s.maxObjectBytes})`,
      );
    const data = await this.objects.getBlob(ref.object);
    if (data === null || data.length !== ref.size || digestOf(data) !== ref.digest)
      throw new Error(`agent ${agent}'s records of step ${step} in the Object Store do not match their reference`);
    return data;
  }

  /** The stream sequence of the first message of (step, agent): the broker's order of stores. */
  async storedAt(step: number, agent: string): Promise<number | null> {
    return (await this.firstWithId(this.subject(step, agent), this.id(step, agent)))?.seq ?? null;
  }

  /** The first message on `subject` carrying message id `id` (a later one with the same id is a duplicate). */
  private async firstWithId(subject: string, id: string): Promise<StoredMsg | null> {
    for (let seq = 0; ;) {
      const msg = await this.jsm.direct.getMessage(`HACRL_${this.s.run}`, { seq, next_by_subj: subject });
      if (msg === null || msg.header.get('Nats-Msg-Id') === id) return msg;
      seq = msg.seq + 1;
    }
  }

  /** Every publish was acknowledged before it returned, so nothing is left to flush: close at once, broker or not. */
  async close(): Promise<void> {
    await this.nc.close();
  }
}
