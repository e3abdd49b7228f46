import type { Kernels } from './kernels.js';
import { loadNative, type NativeKernels } from './native.js';
import { typescriptKernels } from './typescript.js';

let native: NativeKernels | null | undefined;
let nativeError = '';
let warned = false;

/** The native backend, or null when the addon cannot be loaded (the reason is in nativeLoadError()). */
export function nativeBackend(): NativeKernels | null {
  if (native === undefined) {
    const r = loadNative();
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
  return n ? [n, typescriptKernels] : [typescriptKernels];
}

/**
 * The backend to compute with. HACRL_BACKEND=typescript (or `prefer = 'typescript'`) asks for the pure-TypeScript
 * one; otherwise the native addon, falling back to TypeScript with a single warning on stderr when it cannot load.
 */
export function defaultBackend(prefer?: 'native' | 'typescript'): Kernels {
  const want = prefer ?? (process.env.HACRL_BACKEND as 'native' | 'typescript' | undefined) ?? 'native';
  if (want !== 'native' && want !== 'typescript')
    throw new Error(`HACRL_BACKEND must be "native" or "typescript", got "${String(want)}"`);
  if (want === 'typescript') return typescriptKernels;
  const n = nativeBackend();
  if (n) return n;
  if (!warned) {
    warned = true;
    process.emitWarning(`hacrl: native addon unavailable (${nativeError}); using the slow pure-TypeScript backend`);
  }
  return typescriptKernels;
}
