// An agent process (a training run under a rollout exchange) never loads the weights of the agents other processes
// train: with a partner's weight file replaced by bytes that are no safetensors file, the agent trains, checkpoints and
// resumes (a single process given the same folders refuses the file, so the file would have been noticed), and the
// partner is in its team by name and tokenizer only.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parseRunConfig } from '../src/config/load-config.js';
import { buildLearners, initialState, partnerTokenizers } from '../src/train/learners.js';
import { resolveRun } from '../src/train/resolved-run.js';
import { trainRl, type StepExchange } from '../src/train/rl-trainer.js';
import { saveTinyAgent } from './tiny-agents.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-agent-partners-'));
after(() => rm(root, { recursive: true, force: true }));
const mine = join(root, 'mine');
const partner = join(root, 'partner');

before(async () => {
  await saveTinyAgent(mine, 'qwen3', 1);
  await saveTinyAgent(partner, 'llama', 2);
  await writeFile(join(partner, 'model.safetensors'), 'these bytes are not a safetensors file');
});

/** A HACPO run of `mine` (agent a) and `partner` (agent b), LoRA agents when `lora`. */
function config(runDir: string, lora: boolean) {
  return parseRunConfig({
    algorithm: 'hacpo',
    agents: [
      { name: 'a', checkpoint: mine, ...(lora ? { lora: { rank: 2 } } : {}) },
      { name: 'b', checkpoint: partner, ...(lora ? { lora: { rank: 2 } } : {}) },
    ],
    data: { train: 'easy:train:32', validation: ['easy:test:2'], template: '{question}' },
    rollout: { promptsPerStep: 2, groupSize: 2, maxNewTokens: 4 },
    eval: { every: 0, problems: 2 },
    steps: 2,
    checkpoint: { every: 1 },
    runDir,
  });
}

/**
 * An exchange under which this process trains agent a, and b's process publishes the same responses (both tiny agents
 * share one tokenizer, so a's tokens are b's), numbered after a's as one process numbers them.
 */
const onlyA: StepExchange = {
  local: new Set(['a']),
  complete: async (_step, table, sampled) => {
    const n = table.length;
    const b = table.map((r) => ({ ...r, id: r.id + n, episode: r.episode + n, generator: 'b', role: 'b' }));
    return { table: [...table, ...b], sampled: new Map([...sampled, ['b', sampled.get('a')!]]) };
  },
};

describe('an agent process and its partners', () => {
  for (const lora of [false, true])
    test(`${lora ? 'LoRA agents' : 'whole models'}: trains, checkpoints and resumes without reading the partner's weights`, async () => {
      const runDir = join(root, lora ? 'lora' : 'whole');
      await trainRl(config(runDir, lora), { resume: false, progress: () => {}, exchange: onlyA });
      const last = join(runDir, 'checkpoints', 'step-000002');
      assert.deepEqual(await readdir(join(last, 'agents')), ['a'], 'only its own agent is checkpointed');
      const weights = join(last, 'agents', 'a', lora ? 'adapter_model.safetensors' : 'model.safetensors');
      const first = await readFile(weights);
      await rm(last, { recursive: true });
      await trainRl(config(runDir, lora), { resume: true, progress: () => {}, exchange: onlyA });
      assert.ok((await readFile(weights)).equals(first), 'resumed from step 1, the same weights at step 2');
      await assert.rejects(
        trainRl(config(join(root, `one-${lora}`), lora), { resume: false, progress: () => {} }),
        /model\.safetensors/,
        'one process loads the partner and refuses its file',
      );
    });

  test('a partner is in the team by name, tokenizer, capability and order: no weights, optimizer or RNG', async () => {
    const run = resolveRun(config(join(root, 'team'), false));
    const local = (name: string): boolean => name === 'a';
    const state = await initialState(run.agents, run.seed, local);
    assert.deepEqual(
      state.agents.map((a) => a.name),
      ['a'],
    );
    const partners = await partnerTokenizers(run.agents, local);
    assert.deepEqual([...partners.keys()], ['b']);
    const [a, b] = await buildLearners(run, state, local, partners);
    assert.equal(b!.policy.tokenizer, partners.get('b'), 'the tokenizer given, not another copy');
    await assert.rejects(buildLearners(run, state, local, new Map()), /agent b: no tokenizer was given/);
    assert.ok(a!.local && a!.policy.model.params.size > 0);
    assert.equal(b!.local, false);
    assert.deepEqual(Object.keys(b!).sort(), ['capability', 'local', 'order', 'policy']);
    assert.deepEqual(Object.keys(b!.policy).sort(), ['name', 'tokenizer']);
    assert.equal(b!.policy.tokenizer.decode(b!.policy.tokenizer.encode('the answer is 42')), 'the answer is 42');
  });
});
