// Running the built CLI from tests, and the size flags of the very small agents the CLI tests train.
import { spawnSync } from 'node:child_process';

/** Runs `node dist/src/cli/main.js ARGS` and returns its exit status and output. */
export function hacrl(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ['dist/src/cli/main.js', ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** `hacrl sft` flags of a one-layer, 32-wide agent that trains in about a second. */
export const TINY_AGENT_FLAGS = ['--hidden', '32', '--layers', '1', '--heads', '2', '--batch-size', '8'];
