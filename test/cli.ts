// Running the built CLI from tests, the size flags of the very small agents the CLI tests train, and their metrics.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { rowsPerAgent } from '../src/report/run-data.js';

/** Runs `node dist/src/cli/main.js ARGS` and returns its exit status and output. */
export function hacrl(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['dist/src/cli/main.js', ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `hacrl sft` flags of a one-layer, 32-wide agent that trains in about a second. */
export const TINY_AGENT_FLAGS = ['--hidden', '32', '--layers', '1', '--heads', '2', '--batch-size', '8'];

/**
 * Starts `hacrl ARGS` and SIGKILLs it the moment `file` exists (e.g. a checkpoint's state.json), as a crash would;
 * rejects when the run ends before that.
 */
export async function hacrlKilledAt(args: string[], file: string): Promise<void> {
  const child = spawn(process.execPath, ['dist/src/cli/main.js', ...args], { stdio: 'ignore' });
  const exited = new Promise((r) => child.once('exit', r));
  await new Promise<void>((resolve, reject) => {
    const poll = setInterval(() => {
      if (existsSync(file)) {
        clearInterval(poll);
        child.kill('SIGKILL');
        resolve();
      }
    }, 5);
    child.on('exit', () => {
      clearInterval(poll);
      reject(new Error(`the run finished before ${file} appeared, so it could not be killed`));
    });
  });
  await exited;
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
