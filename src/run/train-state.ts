/**
 * Everything a checkpoint holds so that a resumed run continues bit for bit: per agent its weights (a Hugging Face
 * folder that `hacrl eval` can load as it is), its AdamW state and its RNG states; for the run the step, the data
 * cursor, the run-wide RNG states, the count of consecutive non-finite steps, and whatever else the trainer
 * registers as JSON in `extra`.
 *
 * Layout: state.json, agents/<name>/ (savePretrained: a LoRA agent's is a PEFT adapter folder naming its base, which
 * is loaded once however many agents share it), optimizer/<name>.safetensors (a LoRA agent's: the adapters' moments).
 */
import { mkdir } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { z } from 'zod';
import { AGENT_NAME } from '../config/rl-config.js';
import { loadPretrained, savePretrained, type BaseModels, type Pretrained } from '../model/pretrained.js';
import type { Precision } from '../tensor/bf16.js';
import type { AdamWState } from '../optim/adamw.js';
import { writeJsonAtomic } from '../util/atomic-write.js';
import { parseWith, readJsonWith } from '../util/json-file.js';
import { listCheckpoints } from './checkpoints.js';
import { loadAdamWState, saveAdamWState } from './optimizer-state.js';

const FORMAT = 'hacrl-train-state';
const VERSION = 1;

const RngStateSchema = z
  .array(z.number().int().min(0).max(0xffffffff))
  .length(4)
  .refine((w) => w.some((x) => x !== 0), 'an RNG state cannot be all zeros')
  .describe('Rng.state(): four 32-bit words');
const RngMapSchema = z.record(z.string().min(1), RngStateSchema);
const JsonSchema = z.json();

/** A JSON value (what `extra` may hold). */
export type JsonValue = z.output<typeof JsonSchema>;

const StateFileSchema = z.strictObject({
  format: z.literal(FORMAT),
  version: z.literal(VERSION),
  step: z.number().int().min(0),
  nonFiniteStreak: z.number().int().min(0),
  cursor: z.strictObject({ epoch: z.number().int().min(0), position: z.number().int().min(0) }),
  rngs: RngMapSchema,
  agents: z
    .array(z.strictObject({ name: z.string().regex(AGENT_NAME), rngs: RngMapSchema }))
    .refine((a) => new Set(a.map((x) => x.name)).size === a.length, 'agent names must be unique'),
  extra: z.record(z.string(), JsonSchema),
});

/** Where the run is in its training data: the epoch and the position in that epoch's shuffled order. */
export interface DataCursor {
  epoch: number;
  position: number;
}

/** One agent's part of a checkpoint. */
export interface AgentTrainState {
  /** The agent's name (a folder name: letters, digits, ".", "_", "-"). */
  name: string;
  /** Weights, tokenizer and generation defaults. */
  pretrained: Pretrained;
  /** AdamW step count and moments. */
  optimizer: AdamWState;
  /** The agent's RNG states by role, e.g. { sampling: rng.state() }. */
  rngs: Record<string, number[]>;
}

/** A whole checkpoint. */
export interface TrainState {
  /** Training steps completed. */
  step: number;
  /** Consecutive steps so far whose loss or gradient was not finite. */
  nonFiniteStreak: number;
  /** The next training problem to draw. */
  cursor: DataCursor;
  /** Run-wide RNG states by role, e.g. { data: dataRng.state() } (the data order). */
  rngs: Record<string, number[]>;
  /** Every agent, in config order. */
  agents: AgentTrainState[];
  /** Anything else the trainer needs to continue exactly (e.g. HACPO's capability history), as JSON. */
  extra: Record<string, JsonValue>;
}

const agentDir = (dir: string, name: string): string => join(dir, 'agents', name);
const optimizerFile = (dir: string, name: string): string => join(dir, 'optimizer', `${name}.safetensors`);

/** Writes `state` into the folder `dir` (created if missing); state.json, validated first, is written last. */
export async function saveTrainState(dir: string, state: TrainState): Promise<void> {
  const json = parseWith(
    StateFileSchema,
    {
      format: FORMAT,
      version: VERSION,
      step: state.step,
      nonFiniteStreak: state.nonFiniteStreak,
      cursor: state.cursor,
      rngs: state.rngs,
      agents: state.agents.map((a) => ({ name: a.name, rngs: a.rngs })),
      extra: state.extra,
    },
    'train state',
  );
  await mkdir(join(dir, 'optimizer'), { recursive: true });
  for (const a of state.agents) {
    await savePretrained(agentDir(dir, a.name), a.pretrained);
    await saveAdamWState(optimizerFile(dir, a.name), a.optimizer);
  }
  await writeJsonAtomic(join(dir, 'state.json'), json);
}

/**
 * Reads a train state written by saveTrainState; errors name the file at fault. A state.json whose step is not the
 * one its checkpoint folder is named for (`step-000123`) is refused: one of the two was moved or edited.
 * `precisionOf` gives each agent's precision (default fp32 for all): a LoRA agent's base at bf16 loads as bfloat16.
 */
export async function loadTrainState(
  dir: string,
  precisionOf: (agent: string) => Precision = () => 'fp32',
): Promise<TrainState> {
  const json = await readJsonWith(join(dir, 'state.json'), StateFileSchema);
  const named = /^step-(\d+)$/.exec(basename(dir));
  if (named && Number(named[1]) !== json.step)
    throw new Error(`${join(dir, 'state.json')} says step ${json.step}, but its folder is ${basename(dir)}`);
  const agents: AgentTrainState[] = [];
  const bases: BaseModels = new Map();
  for (const a of json.agents)
    agents.push({
      name: a.name,
      pretrained: await loadPretrained(agentDir(dir, a.name), bases, { precision: precisionOf(a.name) }),
      optimizer: await loadAdamWState(optimizerFile(dir, a.name)),
      rngs: a.rngs,
    });
  return {
    step: json.step,
    nonFiniteStreak: json.nonFiniteStreak,
    cursor: json.cursor,
    rngs: json.rngs,
    agents,
    extra: json.extra,
  };
}

/**
 * The newest checkpoint in `root` (a run's checkpoints folder) that loads: when the latest is damaged (a file edited,
 * truncated or deleted after it was committed), the previous ones are tried in turn, and `progress` says which was
 * skipped and why. Throws listing every checkpoint's problem when none loads. `precisionOf`: as loadTrainState.
 */
export async function loadNewestValidState(
  root: string,
  progress: (line: string) => void,
  precisionOf?: (agent: string) => Precision,
): Promise<TrainState> {
  const problems: string[] = [];
  for (const ref of (await listCheckpoints(root)).reverse()) {
    try {
      const state = await loadTrainState(ref.dir, precisionOf);
      if (problems.length > 0)
        progress(
          `resuming from ${basename(ref.dir)} instead, the newest checkpoint that loads (skipped: ${problems.join('; ')})`,
        );
      return state;
    } catch (e) {
      problems.push(`${basename(ref.dir)}: ${(e as Error).message}`);
    }
  }
  throw new Error(
    problems.length === 0
      ? `no complete checkpoint in ${root}`
      : `no checkpoint in ${root} loads: ${problems.join('; ')}`,
  );
}
