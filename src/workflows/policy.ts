/**
 * The abstract policy the workflows sample from: prompts in, texts out. A real model (src/model/generate.ts behind a
 * tokenizer) or a scripted fake for tests both fit, so rollouts do not depend on the trainer.
 */

/** Per-role sampling settings. */
export interface SamplingSettings {
  /** Softmax temperature (0 = greedy); the spec's training default 1.0. */
  temperature: number;
  /** Nucleus mass; the spec's training default 0.95. */
  topP: number;
  /** Most new tokens per response. */
  maxTokens: number;
  /** Generation ends at the first of these strings (kept out of the response). */
  stop: string[];
}

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
