/**
 * Warm start: supervised training of a small agent on worked solutions, so RL later starts from a non-zero success
 * rate. Prompt tokens are masked out of the loss; the response is the solution followed by the agent's EOS.
 */
import { performance } from 'node:perf_hooks';
import type { Kernels } from '../backend/kernels.js';
import { evaluate, promptIds, type EvalReport } from '../eval/evaluate.js';
import { buildModel, buildTokenizer, type AgentSpec } from '../model/agent-spec.js';
import type { PromptResponse } from '../model/pack.js';
import { sftLoss } from '../model/sft.js';
import type { Transformer } from '../model/transformer.js';
import { AdamW } from '../optim/adamw.js';
import { clipGradNorm } from '../optim/grad-clip.js';
import { learningRate } from '../optim/schedule.js';
import type { Problem } from '../tasks/problem.js';
import { DEFAULT_PLAIN_FORMAT, type PromptOptions } from '../tasks/prompt.js';
import { Tape } from '../tensor/tape.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import { Rng } from '../util/rng.js';

/** Settings of a warm-start run. */
export interface SftOptions {
  /** Most optimizer steps. */
  steps: number;
  /** Sequences per step. */
  batchSize: number;
  /** Peak learning rate (cosine decay to minLrRatio·lr after warm-up). */
  lr: number;
  /** Linear warm-up steps. */
  warmupSteps: number;
  /** Final learning rate as a fraction of the peak. */
  minLrRatio: number;
  /** AdamW decoupled weight decay. */
  weightDecay: number;
  /** Gradient-norm clipping threshold. */
  clip: number;
  /** Seed of the data order. */
  seed: number;
  /** Evaluate greedy accuracy every this many steps (and at the end); 0 = only at the end. */
  evalEvery: number;
  /** Stop once greedy accuracy on the evaluation set reaches this (e.g. 0.4 for a deliberately imperfect agent). */
  stopAtAccuracy: number;
  /** Stop after this many seconds of training (the final evaluation still runs). */
  timeLimitSec: number;
  /** Most new tokens when evaluating. */
  maxNewTokens: number;
  /** How questions become prompts. */
  prompt: PromptOptions;
}

/** One line of the training log. */
export interface SftLogEntry {
  step: number;
  /** Mean response-token NLL (nats) of the step's batch. */
  loss: number;
  lr: number;
  gradNorm: number;
  /** Training tokens (prompt + response) processed per second in this step. */
  tokensPerSec: number;
  /** Greedy accuracy on the evaluation set, when evaluated at this step. */
  accuracy?: number;
  elapsedSec: number;
}

/**
 * A fresh agent for warm starts on `train`: the spec's model, with a tokenizer fitted to the question template, the
 * problems' prompts and worked solutions, and the plain prompt layout (part of every prompt: these tokenizers have no
 * chat template).
 */
export function taskAgent(
  spec: AgentSpec,
  train: readonly Problem[],
  template: string,
): { model: Transformer; tokenizer: Tokenizer } {
  const corpus = [DEFAULT_PLAIN_FORMAT, template, ...train.flatMap((p) => [p.prompt, p.solution])];
  const tokenizer = buildTokenizer(spec, corpus);
  return { model: buildModel(spec, tokenizer), tokenizer };
}

/** Prompt/response token ids of each problem: the response is the worked solution plus EOS. */
export function sftItems(tokenizer: Tokenizer, problems: readonly Problem[], prompt: PromptOptions): PromptResponse[] {
  const prompts = promptIds(tokenizer, problems, prompt);
  return problems.map((p, i) => ({
    prompt: prompts[i]!,
    response: [...tokenizer.encode(p.solution), tokenizer.eosId],
  }));
}

/** One SFT optimizer step at a time, so that a caller can train in chunks and decide between them. */
export interface SftStepper {
  /** Runs the next optimizer step; returns its log line. */
  step(): SftLogEntry;
}

/**
 * An SFT run on `train` over `o.steps` steps (the learning-rate schedule's length), stepped by the caller. Each step
 * throws when its loss or gradient is not finite (a diverged model).
 */
export function sftStepper(
  model: Transformer,
  k: Kernels,
  tokenizer: Tokenizer,
  train: readonly Problem[],
  o: SftOptions,
): SftStepper {
  const items = sftItems(tokenizer, train, o.prompt);
  const rng = new Rng(o.seed);
  const opt = new AdamW(model.params, { lr: o.lr, weightDecay: o.weightDecay });
  const schedule = {
    peak: o.lr,
    warmupSteps: o.warmupSteps,
    totalSteps: o.steps,
    kind: 'cosine' as const,
    minRatio: o.minLrRatio,
  };
  let order: number[] = [];
  let step = 0;
  const start = performance.now();
  return {
    step(): SftLogEntry {
      const t0 = performance.now();
      if (order.length < o.batchSize) order = order.concat(rng.shuffle(items.map((_, i) => i)));
      const batch = order.splice(0, o.batchSize).map((i) => items[i]!);
      const tape = new Tape();
      const { loss } = sftLoss({ k, tape }, model, batch);
      opt.zeroGrad();
      tape.backward(loss);
      const gradNorm = clipGradNorm(k, model.params.values(), o.clip);
      const lr = learningRate(step, schedule);
      // A diverged model is not a warm start: stop before its weights are used or saved.
      if (!Number.isFinite(loss.data[0]!) || !Number.isFinite(gradNorm))
        throw new Error(
          `warm start: step ${step + 1} has a non-finite loss or gradient (loss ${loss.data[0]}, gradient norm ` +
            `${gradNorm}): the model diverged; lower the learning rate (now ${o.lr})`,
        );
      opt.step(k, lr);
      step++;
      const tokens = batch.reduce((n, s) => n + s.prompt.length + s.response.length, 0);
      return {
        step,
        loss: loss.data[0]!,
        lr,
        gradNorm,
        tokensPerSec: tokens / ((performance.now() - t0) / 1e3),
        elapsedSec: (performance.now() - start) / 1e3,
      };
    },
  };
}

/**
 * Trains `model` in place; calls `log` after every step and returns the final evaluation. Throws at the first step
 * whose loss or gradient is not finite (a diverged model).
 */
export async function trainSft(
  model: Transformer,
  k: Kernels,
  tokenizer: Tokenizer,
  train: readonly Problem[],
  evalSet: readonly Problem[],
  o: SftOptions,
  log: (e: SftLogEntry) => void,
): Promise<EvalReport> {
  const stepper = sftStepper(model, k, tokenizer, train, o);
  const evalOptions = { maxNewTokens: o.maxNewTokens, prompt: o.prompt };
  for (let step = 0; step < o.steps; step++) {
    const entry = stepper.step();
    const last = step + 1 === o.steps || entry.elapsedSec >= o.timeLimitSec;
    if (!last && o.evalEvery > 0 && (step + 1) % o.evalEvery === 0) {
      entry.accuracy = (await evaluate(model, k, tokenizer, evalSet, evalOptions)).greedy.value;
      log(entry);
      if (entry.accuracy >= o.stopAtAccuracy) break;
      continue;
    }
    log(entry);
    if (last) break;
  }
  return evaluate(model, k, tokenizer, evalSet, evalOptions);
}
