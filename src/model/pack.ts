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
