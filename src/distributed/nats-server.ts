/**
 * A local nats-server (Debian's, installed by scripts/setup.sh) with JetStream on a free loopback port and a temporary
 * file store, which a caller can SIGKILL and start again on the same port and store: what the tests and `hacrl bench
 * async` run their agents over.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A free TCP port on 127.0.0.1. */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** A running nats-server with JetStream and file storage. */
export class NatsServer {
  private child: ChildProcess | null = null;

  private constructor(
    readonly port: number,
    private readonly store: string,
    private readonly extra: readonly string[],
  ) {}

  /** The address agents connect to. */
  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Starts a server on a free loopback port with an empty store; `extra`: more nats-server flags (e.g. --user). */
  static async start(extra: readonly string[] = []): Promise<NatsServer> {
    const server = new NatsServer(await freePort(), await mkdtemp(join(tmpdir(), 'hacrl-nats-')), extra);
    await server.restart();
    return server;
  }

  /** Starts the server (again) on the same port and store; resolves once it accepts clients. */
  async restart(): Promise<void> {
    const args = ['-js', '-a', '127.0.0.1', '-p', String(this.port), '-sd', this.store, ...this.extra];
    const child = spawn('nats-server', args, {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.child = child;
    let log = '';
    await new Promise<void>((resolve, reject) => {
      child.once('error', (e) =>
        reject(new Error(`cannot start nats-server (bash scripts/setup.sh installs it): ${e.message}`)),
      );
      child.once('exit', (code) => reject(new Error(`nats-server exited (${code}) before it was ready:\n${log}`)));
      child.stderr!.on('data', (d: Buffer) => {
        log += d.toString();
        if (log.includes('Server is ready')) resolve();
      });
    });
  }

  /** Kills the server at once (SIGKILL), as a crash would, and waits until it is gone. */
  async kill(): Promise<void> {
    const child = this.child!;
    this.child = null;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
  }

  /** Stops the server and deletes its store. */
  async stop(): Promise<void> {
    if (this.child) await this.kill();
    await rm(this.store, { recursive: true, force: true });
  }
}
