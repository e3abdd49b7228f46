/**
 * `npm run bench:sandbox -- [--hold-mb 1536] [--runs 40]`: what a sandboxed run costs a trainer that holds `hold-mb`
 * of memory and writes all of it between runs (as a training step does), with the programs started by the sandbox's
 * launcher (the sandbox's way; each a run of its own, reuseResults off) and, side by side, by a process spawned from
 * the trainer itself (a fork of the trainer, as any `child_process.spawn` from it is). Prints per run: wall time, the
 * trainer's own kernel time and its page faults, with the time of the writes alone subtracted; the CPU named.
 */
import { spawn } from 'node:child_process';
import { cpus } from 'node:os';
import { runSandboxed } from '../src/sandbox/run-code.js';
import { count } from './cli-args.js';

const HOLD_MB = count('hold-mb', 1536);
const RUNS = count('runs', 40);

const held = Array.from({ length: Math.ceil(HOLD_MB / 64) }, () => new Float32Array(16 << 20));
let pass = 0;
/** Writes every page of the held memory. */
const write = (): void => {
  pass++;
  for (const b of held) b.fill(pass);
};

/** A fork of the trainer that execs node on an empty program, as the trainer's own spawn of a sandbox would. */
const forkFromTrainer = (): Promise<void> =>
  new Promise((done, fail) => {
    const child = spawn(process.execPath, ['-e', 'console.log(2)'], { stdio: 'ignore' });
    child.on('error', fail);
    child.on('close', () => done());
  });

/** Per-run wall ms, trainer kernel ms and trainer page faults of `runs` × (start + write all memory). */
async function measure(start: () => Promise<unknown>): Promise<{ wallMs: number; sysMs: number; faults: number }> {
  const r0 = process.resourceUsage();
  const t0 = performance.now();
  for (let i = 0; i < RUNS; i++) {
    await start();
    write();
  }
  const r1 = process.resourceUsage();
  return {
    wallMs: (performance.now() - t0) / RUNS,
    sysMs: (r1.systemCPUTime - r0.systemCPUTime) / 1000 / RUNS,
    faults: (r1.minorPageFault - r0.minorPageFault) / RUNS,
  };
}

write();
await runSandboxed('console.log(1)'); // starts the launcher (a fork of the trainer, once) and checks the limits
write(); // pays the faults of that one fork
const writes = await measure(() => Promise.resolve());
const launcher = await measure(() => runSandboxed('console.log(2)', { reuseResults: false }));
const forked = await measure(forkFromTrainer);
const row = (name: string, m: typeof writes): string =>
  `| ${name} | ${(m.wallMs - writes.wallMs).toFixed(1)} | ${(m.sysMs - writes.sysMs).toFixed(1)} | ${Math.round(m.faults - writes.faults)} |`;
console.log(`bench sandbox: ${cpus()[0]?.model ?? 'unknown CPU'}; the trainer holds ${HOLD_MB} MB; ${RUNS} runs each`);
console.log('| program started by | wall ms per run | trainer kernel ms per run | trainer page faults per run |');
console.log('| --- | --- | --- | --- |');
console.log(row("the sandbox's launcher (a sandboxed program)", launcher));
console.log(row('a spawn from the trainer (node -e, no sandbox)', forked));
const cost = (m: typeof writes): number => m.wallMs - writes.wallMs;
console.log(
  `writing the held memory alone: ${writes.wallMs.toFixed(1)} ms per pass (subtracted above); wall time of a spawn ` +
    `from the trainer / a sandboxed run through the launcher: ${(cost(forked) / cost(launcher)).toFixed(1)}×`,
);
