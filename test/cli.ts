// Running the built CLI from tests, the size flags of the very small agents the CLI tests train, and their metrics.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { rowsPerAgent } from '../src/report/run-data.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** Runs `node dist/src/cli/main.js ARGS` and returns its exit status and output. */
export function hacrl(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['dist/src/cli/main.js', ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `hacrl sft` flags of a one-layer, 32-wide agent that trains in about a second. */
export const TINY_AGENT_FLAGS = ['--hidden', '32', '--layers', '1', '--heads', '2', '--batch-size', '8'];

/** `hacrl sft` arguments of a tiny agent written to `out`: 10 steps on 200 problems, no intermediate evaluation. */
export function tinySftArgs(out: string, extra: readonly string[] = []): string[] {
  return [
    'sft',
    '--out',
    out,
    '--steps',
    '10',
    '--eval-every',
    '0',
    '--eval-n',
    '8',
    '--train-n',
    '200',
    ...TINY_AGENT_FLAGS,
    ...extra,
  ];
}

/**
 * Starts `hacrl ARGS` (with `env` added to the environment) and SIGKILLs it the moment `file` exists (e.g. a
 * checkpoint's state.json), as a crash would; rejects when the run ends before that.
 */
export async function hacrlKilledAt(args: string[], file: string, env: NodeJS.ProcessEnv = {}): Promise<void> {
  await hacrlSignalledAt(args, file, ['SIGKILL'], env);
}

/**
 * Starts `hacrl ARGS` (with `env` added to the environment), sends it `signals` one after the other the moment `at`
 * holds — a file exists (e.g. a checkpoint's state.json), or standard output matches a pattern — and returns how it
 * ended with its output and the milliseconds from the first signal to the first "received" notice on standard error
 * and to the exit; rejects when the run ends before `at` holds.
 */
export async function hacrlSignalledAt(
  args: string[],
  at: string | RegExp,
  signals: NodeJS.Signals[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ status: number | null; stdout: string; stderr: string; noticeMs: number; exitMs: number }> {
  const child = spawn(process.execPath, ['dist/src/cli/main.js', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let [stdout, stderr] = ['', ''];
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  let [sent, noticed] = [NaN, NaN];
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
    if (Number.isNaN(noticed) && stderr.includes('received')) noticed = performance.now();
  });
  const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
  const what = typeof at === 'string' ? at : `output matching ${at}`;
  let signalled = false;
  await new Promise<void>((resolve, reject) => {
    const poll = setInterval(() => {
      if (typeof at === 'string' ? existsSync(at) : at.test(stdout)) {
        clearInterval(poll);
        signalled = true;
        resolve();
      }
    }, 5);
    child.on('exit', () => {
      clearInterval(poll);
      if (!signalled)
        reject(new Error(`the run finished before ${what}, so it could not be signalled:\n${stdout}${stderr}`));
    });
  });
  // One at a time: signals sent together merge into one. The next goes once the process has noticed the last.
  let gone = false;
  void exited.then(() => (gone = true));
  sent = performance.now();
  for (const [i, s] of signals.entries()) {
    child.kill(s);
    while (i + 1 < signals.length && !gone && (stderr.match(/received/g) ?? []).length <= i) await sleep(5);
  }
  const status = await exited;
  return { status, stdout, stderr, noticeMs: noticed - sent, exitMs: performance.now() - sent };
}

/**
 * Starts `hacrl serve ARGS` (with `env` added to the environment) and resolves once it listens, with its OpenAI base
 * address (http://127.0.0.1:PORT/v1) and `stop`, which sends SIGTERM and resolves with its exit status; rejects with
 * its stderr when it exits before listening.
 */
export async function startHacrlServe(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ baseURL: string; stop: () => Promise<number | null> }> {
  const child = spawn(process.execPath, ['dist/src/cli/main.js', 'serve', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)));
  const baseURL = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /at (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(out);
      if (m) resolve(m[1]!);
    });
    void exited.then((code) => reject(new Error(`hacrl serve exited (${code}) before listening: ${stderr}`)));
  });
  return {
    baseURL,
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** metrics.jsonl of a run as it was written: one row per step. */
export async function rawMetricRows(runDir: string): Promise<({ step: number } & Record<string, unknown>)[]> {
  const text = await readFile(join(runDir, 'metrics.jsonl'), 'utf8');
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { step: number } & Record<string, unknown>);
}

/**
 * metrics.jsonl of a run as one row per step and agent, without the wall-clock and memory fields (which legitimately
 * differ between runs); asserts that every metric name is namespaced per agent (agent/NAME/metric), except the
 * process's memory (mem/…), which is run-level.
 */
export async function metricRows(runDir: string): Promise<Record<string, unknown>[]> {
  const lines = await rawMetricRows(runDir);
  for (const line of lines)
    for (const key of Object.keys(line))
      assert.match(key, /^(step|mem\/[a-z_]+|agent\/[^/]+\/.+)$/, 'metric names are namespaced');
  return lines
    .map((line) => Object.fromEntries(Object.entries(line).filter(([key]) => !key.startsWith('mem/'))) as typeof line)
    .flatMap(rowsPerAgent)
    .map((row) => Object.fromEntries(Object.entries(row).filter(([key]) => !/^time_|tokens_per_s/.test(key))));
}

/**
 * Asserts that the checkpoints of `step` of two runs hold the same bytes: every agent's weights (or adapters) and AdamW
 * moments, and state.json — the step, the data cursor, every RNG state (run-wide and per agent) and the trainer's
 * extra state (e.g. HACPO's capability history) — so that a resumed run is shown to continue exactly, not only to end
 * with equal weights.
 */
export async function assertSameCheckpoint(
  runA: string,
  runB: string,
  step: number,
  agents: readonly string[],
): Promise<void> {
  const dir = (run: string): string => join(run, 'checkpoints', `step-${String(step).padStart(6, '0')}`);
  // A LoRA agent's folder holds its adapters (PEFT format) in place of the weights.
  const weightFiles = (a: string): string[] =>
    existsSync(join(dir(runA), 'agents', a, 'adapter_config.json'))
      ? ['adapter_config.json', 'adapter_model.safetensors']
      : ['model.safetensors'];
  const files = [
    'state.json',
    ...agents.flatMap((a) => [
      ...weightFiles(a).map((f) => join('agents', a, f)),
      join('optimizer', `${a}.safetensors`),
    ]),
  ];
  for (const f of files) {
    const [a, b] = await Promise.all([readFile(join(dir(runA), f)), readFile(join(dir(runB), f))]);
    assert.ok(a.equals(b), `checkpoint step ${step}: ${f} differs between ${runA} and ${runB}`);
  }
  // The comparison covers RNG states only if the checkpoint holds them.
  const state = JSON.parse(await readFile(join(dir(runA), 'state.json'), 'utf8')) as {
    rngs: Record<string, number[]>;
    agents: { name: string; rngs: Record<string, number[]> }[];
  };
  assert.ok(Object.keys(state.rngs).length > 0, 'state.json holds the run-wide RNG states');
  assert.deepEqual(
    state.agents.map((a) => a.name),
    agents,
  );
  for (const a of state.agents) assert.ok(Object.keys(a.rngs).length > 0, `state.json holds ${a.name}'s RNG states`);
}
