// `hacrl serve`: the OpenAI-compatible server over checkpoint folders, until SIGINT or SIGTERM.
import { basename, resolve } from 'node:path';
import { isIP } from 'node:net';
import { Command, InvalidArgumentError, Option } from 'commander';
import { engine } from '../backend/engine.js';
import { isAdapterFolder } from '../model/peft.js';
import { BASE_HELP, loadPretrained, sharedBase, type BaseModels, type Pretrained } from '../model/pretrained.js';
import { HacrlServer, SERVE_DEFAULTS, type ServeOptions } from '../serve/server.js';
import type { Precision } from '../tensor/bf16.js';
import { checkPrecisionRuns, precisionOption } from './precision.js';

/** `NAME=DIR` or `DIR` (served under the folder's name) → name → folder. */
export function parseServedModels(args: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const a of args) {
    const eq = a.indexOf('=');
    const [name, dir] = eq > 0 ? [a.slice(0, eq), a.slice(eq + 1)] : [basename(resolve(a)), a];
    if (out.has(name)) throw new Error(`--model: the name "${name}" is given twice; name them, NAME=DIR`);
    out.set(name, dir);
  }
  return out;
}

function intAtLeast(min: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`expected an integer ≥ ${min}, got "${value}"`);
    return n;
  };
}

/** True when `host` is a loopback address or name, which only this machine can reach. */
function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  return isIP(h) === 4 && h.startsWith('127.');
}

/** Options of `hacrl serve` (ServeOptions plus the models, the shutdown grace and the precision). */
interface ServeCli extends Omit<ServeOptions, 'apiKey'> {
  /** The key clients must send; absent: none asked for. */
  apiKey?: string;
  model: string[];
  shutdownGraceMs: number;
  /** Precision of every served model's products, as a training agent's (src/cli/precision.ts); default fp32. */
  precision: Precision;
  /** The base of every adapter folder served, in place of the one each records. */
  base?: string;
}

/**
 * The served models by name, each folder (`dirs`: name → folder) loaded at `precision`: adapter folders on one base
 * (base_model_name_or_path) share it, loaded once, frozen and read-only (sharedBase, as a run's LoRA agents share
 * theirs); at fp32 a whole model served beside them is that same base. `base`: every adapter folder's base, in place
 * of the one it records.
 */
export async function loadServedModels(
  dirs: ReadonlyMap<string, string>,
  precision: Precision,
  base?: string,
): Promise<Map<string, Pretrained>> {
  const bases: BaseModels = new Map();
  const models = new Map<string, Pretrained>();
  for (const [name, dir] of dirs) {
    // At bf16 a whole model keeps float32 masters, as a training agent's (its embedding rows unrounded), where a frozen
    // base holds bfloat16 bits: other numbers, so it is loaded on its own.
    const whole = precision === 'fp32' && !(await isAdapterFolder(dir));
    models.set(
      name,
      whole ? await sharedBase(resolve(dir), bases, precision) : await loadPretrained(dir, bases, { precision, base }),
    );
  }
  return models;
}

/** Loads the models, serves them, and on SIGINT/SIGTERM shuts down gracefully (a second signal exits at once). */
async function runServe(o: ServeCli, print: (line: string) => void): Promise<void> {
  checkPrecisionRuns(o.precision);
  const apiKey = o.apiKey || null;
  if (apiKey === null && !isLoopback(o.host))
    console.error(
      `hacrl serve: warning: ${o.host} is reachable from other machines and no --api-key (or HACRL_API_KEY) is ` +
        'set: anyone who can reach it can generate with these models',
    );
  const models = await loadServedModels(parseServedModels(o.model), o.precision, o.base);
  const server = await HacrlServer.start(models, engine(), { ...o, apiKey });
  print(`hacrl serve: ${[...models.keys()].join(', ')} at ${server.url} (Ctrl-C stops)`);
  await new Promise<void>((done) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      print(`hacrl serve: ${signal}: finishing running requests (up to ${o.shutdownGraceMs} ms), then stopping`);
      process.once(signal, () => process.exit(130));
      void server.stop(o.shutdownGraceMs).then(done);
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });
}

/** `hacrl serve …` as a commander command. */
export function serveCommand(print: (line: string) => void = console.log): Command {
  const d = SERVE_DEFAULTS;
  return new Command('serve')
    .description('serve checkpoints over the OpenAI API: /v1/models, /v1/completions, /v1/chat/completions')
    .requiredOption(
      '--model <spec...>',
      'checkpoint or PEFT adapter folder to serve, NAME=DIR or DIR (named after the folder)',
    )
    .option('--base <dir>', BASE_HELP)
    .option('--host <address>', 'address to bind (loopback by default: give 0.0.0.0 to expose it)', d.host)
    .option('--port <n>', 'TCP port (0: a free one)', intAtLeast(0), d.port)
    .option('--max-batch <n>', 'most sequences of one model decoded together', intAtLeast(1), d.maxBatch)
    .option('--max-waiting <n>', 'most sequences waiting for the batch; more get 429', intAtLeast(0), d.maxWaiting)
    .option('--max-body-bytes <n>', 'largest request body in bytes; larger get 413', intAtLeast(1), d.maxBodyBytes)
    .option(
      '--max-stream-buffer-bytes <n>',
      "most bytes of a stream's events a client has not read; past it the client is dropped",
      intAtLeast(1),
      d.maxStreamBufferBytes,
    )
    .addOption(
      new Option('--api-key <key>', 'answer only requests with Authorization: Bearer KEY (else 401)').env(
        'HACRL_API_KEY',
      ),
    )
    .option('--shutdown-grace-ms <n>', 'on SIGINT/SIGTERM, how long running requests may finish', intAtLeast(0), 10000)
    .addOption(precisionOption())
    .action((o: ServeCli) => runServe(o, print));
}
