/**
 * The random-reward control of `hacrl bench paper`: a reward of 0 or 1 that ignores correctness. It is a hash of the
 * prompt and response, so it is random with respect to the answer yet the same on every run (determinism by seeds).
 */
import { createHash } from 'node:crypto';
import type { Sample } from '../rewards/reward.js';

/** 1 for about half the samples, chosen by the first byte of sha256(prompt, response); never reads the gold. */
export default function randomReward(sample: Sample): number {
  const h = createHash('sha256').update(sample.prompt).update('\u0000').update(sample.response).digest();
  return h[0]! < 128 ? 1 : 0;
}
