// `hacrl train` must make an agent better at what it is rewarded for, not only run: the hand-wired two-answer agent
// (greedy "\boxed{7}", sampled 7 or 3) trained where every gold is 3 goes from 0% to 100% greedy accuracy, alone under
// GRPO, as a team of two under HACPO, and through LoRA adapters on its frozen weights (3's probability 0.4 → near 1).
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { existsSync } from 'node:fs';
import { engine } from '../src/backend/engine.js';
import { loadPretrained, savePretrained } from '../src/model/pretrained.js';
import { scoreResponses } from '../src/model/response-log-probs.js';
import { hacrl, metricRows } from './cli.js';
import { bigramModel, tokenizer } from './two-answer-model.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-direction-'));
after(() => rm(root, { recursive: true, force: true }));

/** Trains the two-answer agent(s) where every gold is 3; returns each agent's greedy accuracy per validated step. */
async function train(name: string, set: string[]): Promise<Record<string, unknown>[]> {
  const runDir = join(root, name);
  const r = hacrl([
    'train',
    '--set',
    `runDir=${runDir}`,
    `data.train=${data}`,
    `data.validation=[${data}]`,
    'data.template={question}',
    'rollout.promptsPerStep=4',
    'rollout.groupSize=4',
    'rollout.maxNewTokens=12',
    'eval.problems=8',
    ...set,
  ]);
  assert.equal(r.status, 0, r.stderr);
  // The validation metric is named after the data file.
  return (await metricRows(runDir)).flatMap((row) => {
    const greedy = Object.entries(row).find(([k]) => /^val\/.*threes\/greedy$/.test(k))?.[1];
    return greedy === undefined ? [] : [{ step: row.step, agent: row.agent, greedy }];
  });
}

const agent = join(root, 'agent');
/** The same agent with 7 and 3 read from two coordinates of the residual stream, which LoRA adapters can write. */
const loraAgent = join(root, 'lora-agent');
const data = join(root, 'threes.jsonl');
before(async () => {
  await savePretrained(agent, { model: bigramModel(), tokenizer, generation: null });
  await savePretrained(loraAgent, { model: bigramModel({ separateChoice: true }), tokenizer, generation: null });
  await writeFile(
    data,
    Array.from({ length: 8 }, (_, i) => `${JSON.stringify({ prompt: `q${i}`, answer: '3' })}\n`).join(''),
  );
});

/** Six GRPO steps of agent a from `checkpoint` (with `extra` overrides) in run folder `name`: its greedy rows. */
const grpoRows = (name: string, checkpoint: string, extra: string[] = []): Promise<unknown[]> =>
  train(name, [
    'algorithm=grpo',
    'agents.0.name=a',
    `agents.0.checkpoint=${checkpoint}`,
    ...extra,
    'optim.lr=0.01',
    'steps=6',
    'eval.every=6',
  ]);
const ZERO_TO_ONE = [
  { step: 0, agent: 'a', greedy: 0 },
  { step: 6, agent: 'a', greedy: 1 },
];

test('GRPO on the two-answer agent with every gold 3: greedy accuracy rises from 0 to 1', async () => {
  assert.deepEqual(await grpoRows('grpo', agent), ZERO_TO_ONE);
});

test('HACPO with two copies of it: both agents go from 0 to 1', async () => {
  // Four updates a step (the recipe's mini-batches): a smaller rate than GRPO's single update, or Adam overshoots.
  const rows = await train('hacpo', [
    'algorithm=hacpo',
    'agents.0.name=a',
    `agents.0.checkpoint=${agent}`,
    'agents.1.name=b',
    `agents.1.checkpoint=${agent}`,
    'optim.lr=0.003',
    'steps=8',
    'eval.every=8',
  ]);
  assert.deepEqual(rows, [
    { step: 0, agent: 'a', greedy: 0 },
    { step: 0, agent: 'b', greedy: 0 },
    { step: 8, agent: 'a', greedy: 1 },
    { step: 8, agent: 'b', greedy: 1 },
  ]);
});

test('GRPO with LoRA adapters on the frozen agent: 3 goes from probability 0.4 to near 1, greedy accuracy 0 to 1', async () => {
  assert.deepEqual(await grpoRows('lora', loraAgent, ['agents.0.lora={rank: 4, alpha: 8}']), ZERO_TO_ONE);
  const trained = join(root, 'lora', 'checkpoints', 'step-000006', 'agents', 'a');
  assert.ok(existsSync(join(trained, 'adapter_model.safetensors')), 'the run trained adapters, not the agent');
  /** The probability of answering 3 at the choice, by the agent in `dir` (an adapter folder loads on its base). */
  const threes = async (dir: string): Promise<number> => {
    const { model, tokenizer: tok } = await loadPretrained(dir);
    const item = { prompt: tok.encode('Q: q0\nA: \\boxed{'), response: tok.encode('3') };
    return Math.exp(scoreResponses(model, engine(), [item])[0]![0]!);
  };
  const [before, after] = [await threes(loraAgent), await threes(trained)];
  assert.ok(Math.abs(before - 0.4) < 1e-4, `before: ${before}`);
  // Measured 0.99997.
  assert.ok(after > 0.99, `after: ${after}`);
});
