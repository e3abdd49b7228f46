/**
 * The abstract policy the workflows sample from: prompts in, texts out. A real model (src/model/generate.ts behind a
 * tokenizer) or a scripted fake for tests both fit, so rollouts do not depend on the trainer.
 */
import type { SamplingOptions } from '../model/generate.js';

/**
 * Per-role sampling settings: the sampler's own options (model/generate.ts) that a role sets — temperature (the
 * spec's training default 1.0), topP (0.95), maxNewTokens, and stopStrings, which end a response and are kept out
 * of it.
 */
export type SamplingSettings = Required<Pick<SamplingOptions, 'temperature' | 'topP' | 'maxNewTokens' | 'stopStrings'>>;

/** One generated response. */
export interface Generation {
  /** The response text (without the prompt and without the stop string). */
  text: string;
  /** Why generation ended, e.g. 'stop' or 'length'; free text for the logs. */
  finishReason?: string;
  /** The sampled token ids (stop token or stop-string tokens included), when the policy is a model; else absent. */
  ids?: number[];
}

/** Anything that answers prompts: `generate` returns one Generation per prompt, in order. */
export interface Policy {
  generate(prompts: readonly string[], settings: SamplingSettings): Promise<Generation[]>;
}
