/**
 * Gradient buffers of intermediate tensors, recycled from one backward pass to the next. A training step allocates
 * as many gradient floats as activation floats, hundreds of MiB per step, all dead when the backward pass ends; as
 * fresh typed arrays they made V8 run a full mark-compact for about every 64 MiB (a fifth of an RL step's CPU time in
 * a profile) and took fresh zeroed pages from the kernel. The tape hands them back here instead (Tape.backward).
 */

/** Below this many floats a buffer is allocated plainly (pooling it would save nothing). */
export const MIN_POOLED = 4096;
/** Most floats kept for reuse (512 MiB); buffers handed back beyond it are left to the garbage collector. */
export const MAX_POOLED = 1 << 27;

/** Free buffers by capacity. */
const free = new Map<number, Float32Array[]>();
let pooled = 0;

/** The capacity class of n floats: n rounded up to 1/8 of its power of two, so reuse across sizes wastes ≤ 12.5%. */
export function capacityOf(n: number): number {
  const step = 2 ** Math.max(0, Math.floor(Math.log2(n)) - 3);
  return Math.ceil(n / step) * step;
}

/**
 * The smallest free capacity that holds `cap` floats without wasting more than half of itself, or 0: mini-batches of
 * different lengths ask for sizes in different classes, and an exact match alone missed most reuse.
 */
function bestFit(cap: number): number {
  let best = 0;
  for (const [c, list] of free) if (c >= cap && c <= 2 * cap && list.length && (!best || c < best)) best = c;
  return best;
}

/** n zeroed floats: a recycled buffer when one that fits is free, else a new one of n's capacity class. */
export function takeZeroed(n: number): Float32Array {
  if (n < MIN_POOLED) return new Float32Array(n);
  const cap = capacityOf(n);
  const fit = bestFit(cap);
  if (!fit) return new Float32Array(cap).subarray(0, n);
  const buf = free.get(fit)!.pop()!;
  pooled -= fit;
  const view = buf.subarray(0, n);
  view.fill(0);
  return view;
}

/** Hands back a buffer from takeZeroed that nothing will read or write again. */
export function giveBack(view: Float32Array): void {
  const cap = view.buffer.byteLength / 4;
  if (view.length < MIN_POOLED || view.byteOffset !== 0 || cap !== capacityOf(cap)) return;
  if (pooled + cap > MAX_POOLED) return;
  let list = free.get(cap);
  if (!list) free.set(cap, (list = []));
  list.push(new Float32Array(view.buffer));
  pooled += cap;
}
