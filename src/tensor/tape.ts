import type { Kernels } from '../backend/kernels.js';
import { recycle, takeZeroed } from './grad-pool.js';
import type { Tensor } from './tensor.js';

/**
 * Pooled buffers handed out during one pass and given back together when it ends: a pass's activations, as fresh
 * typed arrays, made V8 run a full mark-compact for every 64 MiB of them.
 */
export class Arena {
  private readonly owned: Float32Array[] = [];

  /** n zeroed floats, valid until release(). */
  buffer(n: number): Float32Array {
    const b = takeZeroed(n);
    this.owned.push(b);
    return b;
  }

  /** Gives every buffer back to the pool: nothing may read or write them after this. */
  release(): void {
    recycle(this.detach());
  }

  /** Every buffer handed out so far, forgotten here: the caller gives them back (nothing may use them after). */
  detach(): Float32Array[] {
    return this.owned.splice(0);
  }
}

/**
 * Records the backward closures of the ops of one forward pass, in order, and runs them in reverse. Ops are coarse
 * (a fused kernel each) so the tape stays short: a transformer layer records about a dozen entries.
 */
export class Tape {
  private readonly steps: (() => void)[] = [];
  /** Outputs of the recorded ops: intermediates, whose gradients are dead once the backward pass is over. */
  private readonly outputs: Tensor[] = [];
  /** Buffers handed out by `buffer`, back to the pool when the pass ends. */
  private readonly arena = new Arena();

  /**
   * Appends the backward of an op just computed; `output`, the op's result, has its gradient buffer recycled when
   * the backward pass ends (so read an intermediate's gradient inside that pass, never after it).
   */
  record(backward: () => void, output?: Tensor): void {
    this.steps.push(backward);
    if (output) this.outputs.push(output);
  }

  /**
   * n zeroed floats for a recorded op's output or saved activation, owned by the tape: they go back to the pool when
   * backward (or clear) ends, so nothing may read or write them after that.
   */
  buffer(n: number): Float32Array {
    return this.arena.buffer(n);
  }

  /** Number of recorded ops. */
  get length(): number {
    return this.steps.length;
  }

  /**
   * Back-propagates from `output`: its gradient is `seed` (default all ones, i.e. d(sum output)), then every recorded
   * op runs its backward, last first. The tape is emptied so the activations it held can be reclaimed, and the
   * gradients of the ops' outputs (output's included) and the tape's buffers go back to the pool for the next pass.
   */
  backward(output: Tensor, seed?: Float32Array): void {
    const g = output.ensureGrad();
    if (seed) {
      if (seed.length !== g.length)
        throw new Error(`backward: seed has ${seed.length} elements, the output has ${g.length}`);
      g.set(seed);
    } else g.fill(1);
    while (this.steps.length > 0) this.steps.pop()!();
    // The pass's buffers go back together, so that the pool keeps all of them for the next pass (grad-pool.ts).
    const done = this.arena.detach();
    for (const t of this.outputs) {
      const g = t.detachGrad();
      if (g) done.push(g);
    }
    this.outputs.length = 0;
    recycle(done);
  }

  /** Drops every recorded op without running it (an inference pass that recorded by mistake, or an aborted step). */
  clear(): void {
    this.steps.length = 0;
    this.outputs.length = 0;
    this.arena.release();
  }
}

/** What every op needs: the kernels to compute with, and the tape to record on (null: no gradients, inference). */
export interface Ctx {
  readonly k: Kernels;
  readonly tape: Tape | null;
  /** Where untracked ops take their outputs when set (the caller releases it when the pass is over); default fresh arrays. */
  readonly arena?: Arena;
  /**
   * Activation checkpointing: a recording pass of a model runs each of its blocks through `checkpoint` (ops.ts),
   * keeping only the block's input and output and recomputing the block during the backward; default false.
   */
  readonly checkpointing?: boolean;
}
