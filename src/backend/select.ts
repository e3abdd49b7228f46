import type { Kernels } from './kernels.js';
import { loadNative, type NativeKernels, type ReproducibleMode } from './native.js';
import { reproducibleTypescriptKernels } from './reproducible.js';
import { typescriptKernels } from './typescript.js';

let mode: ReproducibleMode | undefined;

/** A 0/1 switch of the environment (unset is 0). */
function flag(name: string): boolean {
  const v = process.env[name];
  if (v === undefined || v === '' || v === '0') return false;
  if (v === '1') return true;
  throw new Error(`${name} must be 0 or 1, got "${v}"`);
}

/**
 * Settles HACRL_REPRODUCIBLE for this process and the processes it starts, before any kernel runs: `asked` (a
 * command-line switch) wins, then the variable as the user set it, then `byDefault` (the command's default).
 */
export function settleReproducible(asked: boolean | undefined, byDefault: boolean): void {
  if (mode !== undefined) throw new Error('hacrl: the kernel mode was settled after the kernels were chosen');
  if (asked !== undefined) process.env.HACRL_REPRODUCIBLE = asked ? '1' : '0';
  else if (byDefault && !process.env.HACRL_REPRODUCIBLE) process.env.HACRL_REPRODUCIBLE = '1';
}

/**
 * Turns the mode on or off as `what` (a run's configuration) says, before any kernel runs; refuses when
 * HACRL_REPRODUCIBLE (or --reproducible, --fast-kernels) asks for the other.
 */
export function requireReproducible(on: boolean, what: string): void {
  const env = process.env.HACRL_REPRODUCIBLE;
  if (env && flag('HACRL_REPRODUCIBLE') !== on)
    throw new Error(
      `${what} says reproducible: ${on}, but HACRL_REPRODUCIBLE=${env} (or --reproducible, --fast-kernels) asks ` +
        'for the other kernels: drop one of the two',
    );
  if (mode !== undefined && mode.on !== on)
    throw new Error('hacrl: the kernel mode was set after the kernels were chosen');
  process.env.HACRL_REPRODUCIBLE = on ? '1' : '0';
}

/** The reproducible mode of this process, read from HACRL_REPRODUCIBLE and HACRL_FORCE_AVX2 once (the only reader). */
export function reproducibleMode(): ReproducibleMode {
  if (mode === undefined) {
    mode = { on: flag('HACRL_REPRODUCIBLE'), forceAvx2: flag('HACRL_FORCE_AVX2') };
    if (mode.forceAvx2 && !mode.on)
      process.emitWarning(
        'hacrl: HACRL_FORCE_AVX2 only selects a build of the reproducible kernels; it does nothing without HACRL_REPRODUCIBLE=1',
      );
  }
  return mode;
}

/** The pure-TypeScript backend, in the reproducible mode when that is on. */
function typescriptBackend(): Kernels {
  return reproducibleMode().on ? reproducibleTypescriptKernels : typescriptKernels;
}

let native: NativeKernels | null | undefined;
let nativeError = '';
let warned = false;

/** The native backend, or null when the addon cannot be loaded (the reason is in nativeLoadError()). */
export function nativeBackend(): NativeKernels | null {
  if (native === undefined) {
    const r = loadNative(reproducibleMode());
    if ('kernels' in r) native = r.kernels;
    else {
      native = null;
      nativeError = r.error;
    }
  }
  return native;
}

/** Why the native backend is unavailable ('' when it loaded). */
export function nativeLoadError(): string {
  nativeBackend();
  return nativeError;
}

/** Every backend that works on this machine, native first. */
export function availableBackends(): Kernels[] {
  const n = nativeBackend();
  return n ? [n, typescriptBackend()] : [typescriptBackend()];
}

/**
 * The backend to compute with. HACRL_BACKEND=typescript (or `prefer = 'typescript'`) asks for the pure-TypeScript
 * one; otherwise the native addon, falling back to TypeScript with a single warning on stderr when it cannot load.
 * Either runs its reproducible kernels when reproducibleMode() is on.
 */
export function defaultBackend(prefer?: 'native' | 'typescript'): Kernels {
  const want = prefer ?? (process.env.HACRL_BACKEND as 'native' | 'typescript' | undefined) ?? 'native';
  if (want !== 'native' && want !== 'typescript')
    throw new Error(`HACRL_BACKEND must be "native" or "typescript", got "${String(want)}"`);
  if (want === 'typescript') return typescriptBackend();
  const n = nativeBackend();
  if (n) return n;
  if (!warned) {
    warned = true;
    process.emitWarning(`hacrl: native addon unavailable (${nativeError}); using the slow pure-TypeScript backend`);
  }
  return typescriptBackend();
}
