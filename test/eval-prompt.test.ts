// The prompt a model is given, reproducible and recorded (issue 58, item 7): `hacrl eval --system` and `--run-config`
// prompt as a run's agents were, and the rendered prompt is in `eval --output` rows and in samples.jsonl rows.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { loadPretrained } from '../src/model/pretrained.js';
import { mathReward } from '../src/rewards/reward.js';
import { closeDefaultPool } from '../src/rewards/worker-pool.js';
import { renderPrompt } from '../src/tasks/prompt.js';
import { RolloutSource } from '../src/train/sample-sources.js';
import type { SampleRecord } from '../src/train/sample-table.js';
import { Rng } from '../src/util/rng.js';
import { hacrl } from './cli.js';
import { saveTinyAgent } from './tiny-agents.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-eval-prompt-'));
after(() => rm(root, { recursive: true, force: true }));
const agent = join(root, 'agent');
before(() => saveTinyAgent(agent, 'qwen2', 2));

describe('hacrl eval prompts as asked and records the prompt', () => {
  const data = ['--data', 'easy:test:2', '--max-new-tokens', '2'];
  /** The rendered prompts of `eval --output` after `hacrl eval` with `args`. */
  async function evalPrompts(name: string, args: string[]): Promise<string[]> {
    const out = join(root, `${name}.json`);
    const r = hacrl(['eval', '--model', agent, ...data, '--output', out, ...args]);
    assert.equal(r.status, 0, r.stderr);
    const rows = JSON.parse(await readFile(out, 'utf8')) as { problems: { rendered_prompt: string }[] }[];
    return rows[0]!.problems.map((p) => p.rendered_prompt);
  }

  test('--system puts a system message through the chat template, and --output shows it', async () => {
    const plain = await evalPrompts('plain', []);
    assert.equal(plain.length, 2);
    assert.ok(plain[0]!.startsWith('<|im_start|>user\n') && plain[0]!.endsWith('<|im_start|>assistant\n'), plain[0]);
    const withSystem = await evalPrompts('system', ['--system', 'Answer briefly.']);
    assert.equal(withSystem[0], `<|im_start|>system\nAnswer briefly.<|im_end|>\n${plain[0]}`);
  });

  test("--run-config takes the template and system message of the run's agents; flags override them", async () => {
    const config = join(root, 'run.yaml');
    await writeFile(
      config,
      `agents:\n  - { name: a, checkpoint: ${agent} }\n  - { name: b, checkpoint: ${agent}, system: Be b. }\n` +
        `data:\n  template: "Q: {question}"\n  system: Be a.\n`,
    );
    const a = await evalPrompts('run-a', ['--run-config', config, '--agent', 'a']);
    assert.match(a[0]!, /^<\|im_start\|>system\nBe a\.<\|im_end\|>\n<\|im_start\|>user\nQ: [^]+<\|im_end\|>\n/);
    const b = await evalPrompts('run-b', ['--run-config', config, '--agent', 'b', '--template', '{question}!']);
    assert.match(b[0]!, /^<\|im_start\|>system\nBe b\.<\|im_end\|>\n<\|im_start\|>user\n(?!Q: )[^]+!<\|im_end\|>/);
    const r = hacrl(['eval', '--model', agent, ...data, '--run-config', config]);
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /its agents are prompted differently: pass --agent NAME \(one of a, b\)/);
  });
});

test('samples.jsonl rows of a rollout step carry the prompt each role rendered', async () => {
  const policy = await loadPretrained(agent);
  const prompt = { template: 'Solve: {question}', system: 'Think.' };
  const problems = [{ id: 'p0', prompt: '1+2=', answer: '3', solution: '', task: 'arith', difficulty: {} }];
  const source = new RolloutSource(
    [
      {
        name: 'a',
        policy: { name: 'a', ...policy },
        rollout: {
          groupSize: 2,
          sampling: { temperature: 1, maxNewTokens: 3 },
          prompt,
          rewards: [{ name: 'math', fn: mathReward(), weight: 1 }],
          generationBatch: 4,
        },
        rng: new Rng(1),
        validation: { maxNewTokens: 3, ...prompt, temperature: 1, topP: 1, topK: 0 },
      },
    ],
    { train: { next: () => problems }, promptsPerStep: 1, validation: [], samplesLogged: 2, oldLogProbs: 'sampler' },
  );
  try {
    const table: SampleRecord[] = [];
    await source.collect({ k: engine(), step: 0 }, table);
    const rows = source.logRows(1);
    assert.equal(rows.length, 2);
    const rendered = renderPrompt(policy.tokenizer, '1+2=', prompt);
    assert.ok(rendered.includes('Think.') && rendered.includes('Solve: 1+2='), rendered);
    for (const row of rows) {
      assert.equal(row.rendered_prompt, rendered);
      assert.equal(row.prompt, '1+2=');
    }
    assert.deepEqual(policy.tokenizer.encode(rendered), table[0]!.tokens.prompt, 'the tokens the policy was given');
  } finally {
    await closeDefaultPool();
  }
});
