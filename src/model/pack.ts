import type { Batch } from './transformer.js';

/** A prompt and its response as token ids. */
export interface PromptResponse {
  prompt: readonly number[];
  response: readonly number[];
}

/** Sequences packed for one forward pass, right-padded, with next-token targets on the response positions only. */
export interface PackedBatch extends Batch {
  /** targets[r] = the token after row r when that token belongs to the response, else -1. */
  targets: Int32Array;
  /** For sequence b, the rows whose targets are its response tokens: [start, start + response length). */
  responseRows: { start: number; length: number }[];
}

/**
 * Packs prompt+response pairs as rows [prompt..., response...] padded on the right to the longest (causal attention
 * never sees the padding). Row t predicts token t+1, so the log-prob of response token j is at row
 * prompt.length − 1 + j. Every prompt needs at least one token.
 */
export function packPromptResponses(items: readonly PromptResponse[], padId = 0): PackedBatch {
  const seqLen = Math.max(1, ...items.map((s) => s.prompt.length + s.response.length));
  const batch = items.length;
  const ids = new Int32Array(batch * seqLen).fill(padId);
  const targets = new Int32Array(batch * seqLen).fill(-1);
  const responseRows = items.map((s, b) => {
    if (s.prompt.length === 0) throw new Error(`pack: sequence ${b} has an empty prompt (it needs at least one token)`);
    const row = b * seqLen;
    ids.set(s.prompt, row);
    ids.set(s.response, row + s.prompt.length);
    const start = row + s.prompt.length - 1;
    targets.set(s.response, start);
    return { start, length: s.response.length };
  });
  return { ids, batch, seqLen, targets, responseRows };
}

/**
 * Splits sequences (by their lengths) into groups to pack separately, so short ones are not padded to the longest:
 * the lengths sorted longest first (ties by index) are cut into consecutive runs minimising the padded rows, Σ over
 * groups of size × longest, plus `groupCost` rows per group (default 64: one more forward/backward pass's fixed
 * cost, about what 64 rows of a small model's products take). Returns indices into `lengths`, longest group first.
 * Padding was a third of an RL mini-batch's rows (responses from 1 to 64 tokens).
 */
export function lengthGroups(lengths: readonly number[], groupCost = 64): number[][] {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[b]! - lengths[a]! || a - b);
  const n = order.length;
  // best[i]: least cost of grouping order[i..]; cut[i]: where the first group of that grouping ends.
  const best = new Float64Array(n + 1);
  const cut = new Int32Array(n + 1);
  for (let i = n - 1; i >= 0; i--) {
    best[i] = Infinity;
    const longest = lengths[order[i]!]!;
    for (let j = i + 1; j <= n; j++) {
      const cost = groupCost + (j - i) * longest + best[j]!;
      if (cost < best[i]!) [best[i], cut[i]] = [cost, j];
    }
  }
  const groups: number[][] = [];
  for (let i = 0; i < n; i = cut[i]!) groups.push(order.slice(i, cut[i]!));
  return groups;
}
