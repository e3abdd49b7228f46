/**
 * A small agent for a workflow, built from scratch: a tokenizer fitted to the workflow's text (solver episodes' prompts
 * and responses, plus printable ASCII so any model-written text encodes), a fresh model, and optionally a warm start —
 * SFT on solver rows (src/workflows/warm-start.ts), bounded by steps — so that RL starts with signal.
 */
import { z } from 'zod';
import type { Kernels } from '../backend/kernels.js';
import type { Transformer } from '../model/transformer.js';
import type { Problem } from '../tasks/problem.js';
import type { Tokenizer } from '../tokenizer/tokenizer.js';
import { warmStartRows } from '../workflows/warm-start.js';
import type { Workflow } from '../workflows/workflow.js';
import { buildModel, buildTokenizer, type AgentSpec } from '../model/agent-spec.js';
import { playGreedy, successRate } from '../workflows/play.js';
import { modelPolicy } from '../workflows/model-policy.js';
import { Rng } from '../util/rng.js';
import { sftStepper, type SftOptions } from './sft-trainer.js';
import { trainIntoBandWithAttempts, WarmStartBandSchema, type AttemptedBandOutcome } from './warm-start-band.js';

/** The warm start of a workflow agent. */
export const WarmStartSchema = z
  .object({
    /** SFT optimizer steps (with a band: the most); default 0 (an untrained agent), at most 1000000. */
    steps: z.number().int().min(0).max(1_000_000, 'warm-start steps are at most 1000000').default(0),
    /** Solver rows to train on; default 2000, at most 100000 (they are generated and held in memory). */
    rows: z.number().int().positive().max(100_000, 'warm-start rows are at most 100000 (--rows)').default(2000),
    /** Rows per step; default 16, at most 1024. */
    batchSize: z.number().int().positive().max(1024, 'the warm-start batch is at most 1024 rows').default(16),
    /** Peak learning rate (cosine decay to 10%); default 3e-3. */
    lr: z.number().positive().default(3e-3),
    /** Roles whose rows train the agent (a per-role policy: its role); default every role. */
    roles: z.array(z.string().min(1)).optional(),
    /**
     * Probability that a warm-start episode applies another instance's solver answer instead of this one's (before
     * the last turn), so rows cover wrong proposals and later turns (warm-start.ts); default 0 (solver path only).
     */
    detour: z.number().min(0).max(1).default(0),
    /**
     * Detour the last turn too, every role's answer but the final role's (warm-start.ts), so that in a one-turn
     * workflow the coder sees wrong test cases; default false (absent: warm-start cache keys written without it hold).
     */
    detourLastTurn: z.boolean().optional(),
    /**
     * Roles whose applied answer may be a detour (warm-start.ts); default every role (absent: warm-start cache keys
     * written without it hold).
     */
    detourRoles: z.array(z.string().min(1)).min(1, 'detourRoles names at least one role').optional(),
    /**
     * Stop at the first chunk of `band.every` steps whose greedy success on calibration instances is inside the band
     * (warm-start-band.ts), at most `steps`; default none (exactly `steps` steps).
     */
    band: WarmStartBandSchema.optional(),
  })
  .strict()
  .refine((w) => w.band === undefined || w.steps > 0, {
    message: 'a warm start with a band needs steps > 0 (the most it may train)',
    path: ['steps'],
  });
/** A warm start with defaults filled in. */
export type WarmStart = z.output<typeof WarmStartSchema>;

/** First instance seed of warm-start rows, far from training (seed·10⁷ + …) and held-out instances. */
export const WARM_START_SEED = 1_000_000;

/** Characters every workflow agent can spell: printable ASCII and the newline. */
export const WORKFLOW_AGENT_CHARS = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('') + '\n';

/** Positions a fresh workflow agent has at least (tokens of prompt plus response). */
export const WORKFLOW_AGENT_POSITIONS = 2048;

/**
 * The SFT settings of a warm start: `warm`'s steps, batch and peak learning rate, a warm-up of up to 20 steps, cosine
 * decay to 0.1·lr, weight decay 0.01, clipping at 1, batch order from `seed`; prompts are the row's text as it is.
 */
export function warmStartSft(warm: Pick<WarmStart, 'steps' | 'batchSize' | 'lr'>, seed: number): SftOptions {
  return {
    steps: warm.steps,
    batchSize: warm.batchSize,
    lr: warm.lr,
    warmupSteps: Math.min(20, warm.steps),
    minLrRatio: 0.1,
    weightDecay: 0.01,
    clip: 1,
    seed,
    evalEvery: 0,
    stopAtAccuracy: 2,
    timeLimitSec: Infinity,
    maxNewTokens: 1,
    prompt: { template: '{question}', plainFormat: '{content}' },
  };
}

/**
 * A fresh agent for `wf` (tokenizer fitted to its solver episodes), SFT-trained for `warm.steps` steps, or with
 * `warm.band` until its greedy success on calibration instances reaches the band (then `band` says where it stopped;
 * a try that misses it is followed by one with batch-order seed `seed` + 1, up to `band.attempts`).
 */
export async function workflowAgent(
  wf: Workflow<unknown>,
  spec: AgentSpec,
  warm: WarmStart,
  seed: number,
  k: Kernels,
  log: (line: string) => void = () => {},
): Promise<{ model: Transformer; tokenizer: Tokenizer; band?: AttemptedBandOutcome }> {
  const rows = await warmStartRows(wf, {
    count: warm.steps > 0 ? warm.rows : 8,
    seed: WARM_START_SEED,
    detour: warm.detour,
    ...(warm.detourLastTurn ? { detourLastTurn: true } : {}),
    ...(warm.detourRoles ? { detourRoles: warm.detourRoles } : {}),
    ...(warm.roles ? { roles: warm.roles } : {}),
  });
  // Workflow prompts (grid, history, other roles' words) run to several hundred characters, past the 512 positions
  // of a default agent; the prompt-length check would refuse them at the first rollout.
  const sized = { ...spec, maxPositions: Math.max(spec.maxPositions, WORKFLOW_AGENT_POSITIONS) };
  const tokenizer = buildTokenizer(sized, [WORKFLOW_AGENT_CHARS, ...rows.flatMap((r) => [r.prompt, r.response])]);
  if (warm.steps === 0) return { model: buildModel(sized, tokenizer), tokenizer };
  // The SFT prompt layout with template '{question}' and plain format '{content}' is the prompt text itself.
  const problems: Problem[] = rows.map((r, i) => ({
    id: `${r.instance}:${r.role}:${i}`,
    prompt: r.prompt,
    answer: r.response,
    solution: r.response,
    task: wf.name,
    difficulty: {},
  }));
  // A fresh model and its SFT stepper: the same weights and batch order every time (a band's restart retraces them).
  const fresh = (sftSeed: number) => {
    const model = buildModel(sized, tokenizer);
    const stepper = sftStepper(model, k, tokenizer, problems, warmStartSft(warm, sftSeed));
    return { model, stepper };
  };
  let current = fresh(seed);
  const train = async (steps: number): Promise<void> => {
    for (let i = 0; i < steps; i++) {
      const e = current.stepper.step();
      if (e.step % 50 === 0 || e.step === warm.steps)
        log(`warm start step ${e.step}/${warm.steps} loss ${e.loss.toFixed(4)}`);
    }
  };
  if (warm.band === undefined) {
    await train(warm.steps);
    return { model: current.model, tokenizer };
  }
  const success = async (seeds: readonly number[]): Promise<number> => {
    // One model plays every role: per-role arms start each role's policy from this same warm start.
    const policy = modelPolicy(current.model, tokenizer, k, new Rng(1));
    const s = successRate(await playGreedy(wf, Object.fromEntries(wf.roles.map((r) => [r.policy, policy])), seeds));
    log(`warm start calibration: ${(100 * s).toFixed(1)}% greedy on ${seeds.length} instances`);
    return s;
  };
  const attempts = warm.band.attempts ?? 1;
  const { result, band } = await trainIntoBandWithAttempts(warm.band, warm.steps, (a) => {
    if (a > 0) {
      log(
        `warm start: attempt ${a + 1} of ${attempts}, batch order ${seed + a} (no earlier attempt stopped in the band)`,
      );
      current = fresh(seed + a);
    }
    return {
      train,
      success,
      restart: () => {
        log('warm start: one chunk overshot the band; retracing it from step 0 in finer chunks');
        current = fresh(seed + a);
        return Promise.resolve();
      },
      result: () => current.model,
    };
  });
  return { model: result, tokenizer, band };
}
