/**
 * The mini-batch update loop every learner runs: forward pass over a mini-batch's prompt+response pairs, a loss over
 * the per-sequence log-probs (and entropies), backward, gradient clip, optimizer step; and the step's summary of the
 * per-update statistics.
 */
import type { Kernels } from '../backend/kernels.js';
import { lengthGroups, packPromptResponses, type PromptResponse } from '../model/pack.js';
import type { Transformer } from '../model/transformer.js';
import type { AdamW } from '../optim/adamw.js';
import { clipGradNorm } from '../optim/grad-clip.js';
import { Tape } from '../tensor/tape.js';
import { mean } from '../util/stats.js';
import { workPoint } from '../util/work-points.js';
import type { StepMetrics } from './sample-sources.js';

/**
 * One mini-batch's loss over its sequences' current log-probs and entropies (one array per sequence, in `batch`
 * order): the loss, its gradient in the log-probs and, under an entropy bonus, in the entropies.
 */
export type MiniBatchLoss = (
  batch: readonly number[],
  logProbs: readonly Float32Array[],
  entropy: readonly Float32Array[],
  update: number,
) => { loss: number; grad: Float32Array[]; entropyGrad?: Float32Array[]; stats: Record<string, number> };

/** What the update loop did. */
export interface UpdateResult {
  /** Every statistic of every update, by name, in update order (plus loss and grad_norm). */
  stats: Record<string, number[]>;
  /** Updates skipped because the loss or gradient was not finite. */
  skippedUpdates: number;
}

/** Splits `order` into `count` consecutive mini-batches of near-equal size (the last ones may be one shorter). */
export function splitMiniBatches(order: readonly number[], count: number): number[][] {
  const size = Math.ceil(order.length / count);
  const out: number[][] = [];
  for (let start = 0; start < order.length; start += size) out.push(order.slice(start, start + size));
  return out;
}

/**
 * One optimizer update per mini-batch of `batches` (indices that `item` turns into prompt+response pairs), in order:
 * forward passes (one per length group, see lengthGroups), the loss and its gradients from `lossFn`, backward,
 * gradient clip, AdamW step. An update whose loss or gradient norm is not finite is skipped (no step) and counted.
 */
export function runUpdates(
  model: Transformer,
  optimizer: AdamW,
  k: Kernels,
  item: (i: number) => PromptResponse,
  batches: readonly (readonly number[])[],
  lossFn: MiniBatchLoss,
  o: {
    clip: number;
    lr: number;
    /** Recompute each block in the backward instead of keeping its activations (Ctx.checkpointing); default false. */
    checkpointing?: boolean;
  },
): UpdateResult {
  const stats: Record<string, number[]> = {};
  const note = (name: string, v: number): void => void (stats[name] ??= []).push(v);
  let skippedUpdates = 0;
  for (const [update, batch] of batches.entries()) {
    const items = batch.map(item);
    // Each length group is its own forward pass on its own tape (padding only to its longest); the loss sees the
    // whole mini-batch, and the backward passes add their gradients up.
    const passes = lengthGroups(items.map((s) => s.prompt.length + s.response.length)).map((members) => {
      const packed = packPromptResponses(members.map((j) => items[j]!));
      const tape = new Tape();
      const ctx = o.checkpointing ? { k, tape, checkpointing: true } : { k, tape };
      const out = model.tokenLogProbs(ctx, packed, packed.targets, { entropy: true });
      return { members, packed, tape, ...out };
    });
    const rows: Float32Array[] = [];
    const entropyRows: Float32Array[] = [];
    for (const p of passes)
      p.members.forEach((j, m) => {
        const r = p.packed.responseRows[m]!;
        rows[j] = p.logProb.data.subarray(r.start, r.start + r.length);
        entropyRows[j] = p.entropy!.subarray(r.start, r.start + r.length);
      });
    const { loss, grad, entropyGrad, stats: s } = lossFn(batch, rows, entropyRows, update);
    optimizer.zeroGrad();
    for (const p of passes) {
      const seed = new Float32Array(p.logProb.size);
      p.members.forEach((j, m) => {
        const r = p.packed.responseRows[m]!;
        seed.set(grad[j]!, r.start);
        if (entropyGrad) p.entropySeed!.set(entropyGrad[j]!, r.start);
      });
      p.tape.backward(p.logProb, seed);
    }
    const gradNorm = clipGradNorm(k, model.trainable.values(), o.clip);
    if (Number.isFinite(loss) && Number.isFinite(gradNorm)) optimizer.step(k, o.lr);
    else skippedUpdates++;
    note('loss', loss);
    note('grad_norm', gradNorm);
    for (const [name, v] of Object.entries(s)) note(name, v);
    workPoint.updated(
      update + 1,
      batches.length,
      items.reduce((n, x) => n + x.prompt.length + x.response.length, 0),
    );
  }
  return { stats, skippedUpdates };
}

/**
 * One number per statistic for the step: the mean over updates of its finite values, except names ending in _min or
 * _max (the extreme) and names ending in _m (kept per update as NAME0, NAME1, …: e.g. a per-mini-batch fraction).
 */
export function summarizeUpdates(stats: Record<string, number[]>): StepMetrics {
  const out: StepMetrics = {};
  for (const [name, values] of Object.entries(stats)) {
    const finite = values.filter(Number.isFinite);
    if (name.endsWith('_m')) values.forEach((v, m) => (out[`${name}${m}`] = v));
    else if (name.endsWith('_min')) out[name] = finite.length ? Math.min(...finite) : NaN;
    else if (name.endsWith('_max')) out[name] = finite.length ? Math.max(...finite) : NaN;
    else out[name] = mean(finite);
  }
  return out;
}
