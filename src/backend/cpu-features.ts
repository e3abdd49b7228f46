/**
 * What the CPU offers for bf16 products, read from the flags Linux lists in /proc/cpuinfo: the native backend computes
 * bf16 only where AMX-BF16 or AVX512_BF16 exist (the instructions oneDNN's bf16 matmul runs on); the TypeScript
 * backend, the reference, computes it on every CPU.
 */
import { readFileSync } from 'node:fs';
import { defaultBackend } from './select.js';

/** The instruction sets (as /proc/cpuinfo names them) of which the native backend's bf16 products need one. */
export const BF16_CPU_FLAGS = ['amx_bf16', 'avx512_bf16'] as const;

/** The flags of the first processor listed in `cpuinfo` (default: this machine's /proc/cpuinfo; none where absent). */
export function cpuFlags(cpuinfo?: string): Set<string> {
  let text = cpuinfo;
  if (text === undefined)
    try {
      text = readFileSync('/proc/cpuinfo', 'utf8');
    } catch {
      return new Set();
    }
  const line = /^flags\s*:(.*)$/m.exec(text);
  return new Set(line ? line[1]!.trim().split(/\s+/) : []);
}

/**
 * Why `backend` ('native' or 'typescript'; default the one selected, HACRL_BACKEND) cannot compute bf16 products on a
 * CPU with `flags` (default this one's), naming the missing instruction sets and what to do instead; null when it can.
 */
export function bf16Refusal(
  backend: string = defaultBackend().name,
  flags: ReadonlySet<string> = cpuFlags(),
): string | null {
  if (backend !== 'native' || BF16_CPU_FLAGS.some((f) => flags.has(f))) return null;
  return (
    `the native backend computes bf16 products only on a CPU with AMX-BF16 or AVX512_BF16, and this CPU has ` +
    `neither (/proc/cpuinfo lists no ${BF16_CPU_FLAGS.join(' or ')}): use precision fp32, or HACRL_BACKEND=typescript ` +
    'for the slow pure-TypeScript reference'
  );
}
