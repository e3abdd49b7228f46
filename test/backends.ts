// The backends the engine's tests run on. When the native addon did not load, a skipped test says so in the output,
// with the reason, so that its cases (and native-vs-TypeScript agreement) are never left out silently.
import { test } from 'node:test';
import type { Kernels } from '../src/backend/kernels.js';
import { availableBackends, nativeLoadError } from '../src/backend/select.js';

/** availableBackends(), plus a visible skipped test `SUITE on native` when the addon is missing. */
export function testedBackends(suite: string): Kernels[] {
  const backends = availableBackends();
  if (!backends.some((b) => b.name === 'native'))
    test(
      `${suite} on native`,
      { skip: `native addon not loaded, its cases are left out: ${nativeLoadError()}` },
      () => {},
    );
  return backends;
}
