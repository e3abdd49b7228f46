/**
 * Gradient buffers of intermediate tensors, recycled from one backward pass to the next. A training step allocates
 * as many gradient floats as activation floats, hundreds of MiB per step, all dead when the backward pass ends; as
 * fresh typed arrays they made V8 run a full mark-compact for about every 64 MiB (a fifth of an RL step's CPU time in
 * a profile) and took fresh zeroed pages from the kernel. The tape hands them back here instead (Tape.backward).
 * Between passes the pool keeps as much as the largest pass handed back at once (`recycle`), at least MIN_POOL_CAP:
 * under a fixed 512 MiB cap a 0.5B model's pass (about 8 GiB of buffers at 8 × 256 tokens) took most of them fresh
 * every step, and the kernel's page faults on them cost a fifth of the step (sys time, measured). Sampling begins
 * with `trimPool` (generate.ts): while the inference copies and the KV cache are alive, the pool holds only what fits
 * beside them under the largest pass's footprint, as the memory plan counts it.
 */

/** Below this many floats a buffer is allocated plainly (pooling it would save nothing). */
export const MIN_POOLED = 4096;
/** Floats the pool may keep before any pass has handed back more at once, and at least after trimPool (512 MiB). */
export const MIN_POOL_CAP = 1 << 27;

/** Free buffers by capacity. */
const free = new Map<number, Float32Array[]>();
let pooled = 0;
/** Most floats kept: the largest batch `recycle` was handed, at least MIN_POOL_CAP; beyond it, to the GC. */
let cap = MIN_POOL_CAP;

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
  const size = view.buffer.byteLength / 4;
  if (view.length < MIN_POOLED || view.byteOffset !== 0 || size !== capacityOf(size)) return;
  if (pooled + size > cap) return;
  let list = free.get(size);
  if (!list) free.set(size, (list = []));
  list.push(new Float32Array(view.buffer));
  pooled += size;
}

/**
 * Hands back every buffer of a pass that has ended, keeping them all for the next pass: the cap grows to their
 * total when that is larger, and free buffers of earlier passes make room for them (the next pass most likely has
 * the same shapes). The pool never holds more than the largest such pass had out at once.
 */
export function recycle(views: readonly Float32Array[]): void {
  let total = 0;
  for (const v of views) if (v.length >= MIN_POOLED) total += v.buffer.byteLength / 4;
  cap = Math.max(cap, total);
  evictDownTo(cap - total);
  for (const v of views) giveBack(v);
}

/** Drops free buffers, the largest first, until at most `limit` floats are pooled. */
function evictDownTo(limit: number): void {
  for (const size of [...free.keys()].sort((a, b) => b - a)) {
    const list = free.get(size)!;
    while (pooled > limit && list.length) {
      list.pop();
      pooled -= size;
    }
  }
}

/** Most floats the pool may keep now (MIN_POOL_CAP until a larger pass was recycled). */
export function poolCap(): number {
  return cap;
}

/**
 * Makes room for `reserve` floats that another phase (sampling) is about to allocate: keeps the smallest free buffers
 * up to max(MIN_POOL_CAP, cap − reserve) floats, so the process stays under the largest pass's footprint. Dropping
 * them all instead made a pass without activation checkpointing take gigabytes of fresh pages after every sampling
 * phase, a quarter of its time in page faults (a 0.5B LoRA step, measured). The cap stays: the next pass most likely
 * has the same shapes.
 */
export function trimPool(reserve: number): void {
  evictDownTo(Math.max(MIN_POOL_CAP, cap - reserve));
}
