// A Qwen-style padded embedding (more rows than the tokenizer has ids, the padding rows' logits made huge): no
// sampler — training rollouts, evaluation, a workflow's model policy, the server's batcher — ever draws a padding id,
// and the log-probs the losses use are normalised over the decodable ids alone.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { evaluate } from '../src/eval/evaluate.js';
import { generate } from '../src/model/generate.js';
import { loadPretrained, type Pretrained } from '../src/model/pretrained.js';
import { scoreResponses } from '../src/model/response-log-probs.js';
import { Transformer } from '../src/model/transformer.js';
import { sampleRollouts } from '../src/rollout/rollout.js';
import { Batcher } from '../src/serve/batcher.js';
import type { Problem } from '../src/tasks/problem.js';
import { Tape } from '../src/tensor/tape.js';
import { Rng } from '../src/util/rng.js';
import { modelPolicy } from '../src/workflows/model-policy.js';
import { AGENT_VOCAB, saveTinyAdapter, saveTinyAgent } from './tiny-agents.js';

const PADDING = 16;
const k = engine();
const problems: Problem[] = ['what is 12 + 30?', 'hello agents', 'the answer is'].map((prompt, i) => ({
  id: `p${i}`,
  prompt,
  answer: '42',
  solution: '\\boxed{42}',
  task: 'plain',
  difficulty: {},
}));
const decodable = (ids: readonly number[]): boolean => ids.every((id) => id >= 0 && id < AGENT_VOCAB);

describe('a padded embedding', () => {
  let dir: string;
  let agent: Pretrained;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'hacrl-padded-'));
    await saveTinyAgent(dir, 'qwen2', 3, PADDING);
    agent = await loadPretrained(dir);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test('loads with the tokenizer ids as its decodable ids, and unmasked its padding rows would win', () => {
    assert.equal(agent.model.cfg.vocabSize, AGENT_VOCAB + PADDING);
    assert.equal(agent.model.decodableIds, AGENT_VOCAB);
    const cfg = { ...agent.model.cfg, decodableIds: undefined };
    const unmasked = new Transformer(cfg, agent.model.params, null, agent.model.precision);
    const prompts = problems.map((p) => agent.tokenizer.encode(p.prompt));
    const greedy = generate(unmasked, k, prompts, { temperature: 0, maxNewTokens: 4 });
    assert.ok(
      greedy.some((g) => !decodable(g.ids)),
      'the setup must make padding ids the likeliest',
    );
  });

  test('training rollouts (as `train` and `agent` sample them) draw only decodable ids, at every setting', () => {
    const policy = { name: 'qwen', model: agent.model, tokenizer: agent.tokenizer };
    for (const knobs of [{ temperature: 1 }, { temperature: 0 }, { temperature: 1, topK: 5 }, { topP: 0.9 }]) {
      const rollouts = sampleRollouts(policy, k, problems, 4, { maxNewTokens: 12, ...knobs }, new Rng(7));
      for (const r of rollouts) {
        assert.ok(decodable(r.responseIds), `${JSON.stringify(knobs)}: ${r.responseIds}`);
        assert.ok(r.samplingLogProbs.every((lp) => lp <= 0 && lp > -100));
      }
    }
  });

  test('a LoRA adapter folder on the padded base (as the example trains) keeps the rule', async () => {
    const adapterDir = join(dir, 'adapter');
    await saveTinyAdapter(adapterDir, dir, 5);
    const adapted = await loadPretrained(adapterDir);
    assert.equal(adapted.model.decodableIds, AGENT_VOCAB);
    const policy = { name: 'qwen-lora', model: adapted.model, tokenizer: adapted.tokenizer };
    for (const r of sampleRollouts(policy, k, problems, 4, { maxNewTokens: 12 }, new Rng(3)))
      assert.ok(decodable(r.responseIds), `${r.responseIds}`);
  });

  test("the losses' log-probs match the sampler's and are normalised over the decodable ids", () => {
    const policy = { name: 'qwen', model: agent.model, tokenizer: agent.tokenizer };
    const rollouts = sampleRollouts(policy, k, problems.slice(0, 1), 2, { maxNewTokens: 6 }, new Rng(1));
    const scored = scoreResponses(
      agent.model,
      k,
      rollouts.map((r) => ({ prompt: r.promptIds, response: r.responseIds })),
    );
    rollouts.forEach((r, i) =>
      r.samplingLogProbs.forEach((lp, j) => assert.ok(Math.abs(lp - scored[i]![j]!) < 1e-4, `${lp} ${scored[i]![j]}`)),
    );
    // One prompt scored against every decodable id as its next token: the probabilities sum to 1.
    const prompt = agent.tokenizer.encode(problems[0]!.prompt);
    const seqLen = prompt.length;
    const ids = new Int32Array(AGENT_VOCAB * seqLen);
    const targets = new Int32Array(AGENT_VOCAB * seqLen).fill(-1);
    for (let t = 0; t < AGENT_VOCAB; t++) {
      ids.set(prompt, t * seqLen);
      targets[(t + 1) * seqLen - 1] = t;
    }
    const tape = new Tape();
    const { logProb, entropy } = agent.model.tokenLogProbs({ k, tape }, { ids, batch: AGENT_VOCAB, seqLen }, targets, {
      entropy: true,
    });
    let mass = 0;
    for (let t = 0; t < AGENT_VOCAB; t++) mass += Math.exp(logProb.data[(t + 1) * seqLen - 1]!);
    assert.ok(Math.abs(mass - 1) < 1e-3, `mass over decodable ids ${mass}`);
    assert.ok(entropy!.every(Number.isFinite));
    const weights = new Float32Array(logProb.size).fill(1);
    tape.backward(logProb, weights);
    for (const [name, t] of agent.model.trainable) assert.ok(t.grad!.every(Number.isFinite), `${name} gradient`);
  });

  test('evaluation (eval and validation) decodes every greedy and sampled response', async () => {
    const report = await evaluate(agent.model, k, agent.tokenizer, problems, { k: 3, maxNewTokens: 12, name: dir });
    assert.equal(report.problems.length, problems.length);
  });

  test("a workflow's model policy (mas) draws only decodable ids", async () => {
    const policy = modelPolicy(agent.model, agent.tokenizer, k, new Rng(2), 'policy solver');
    const gens = await policy.generate(
      problems.map((p) => p.prompt),
      { temperature: 1, topP: 1, maxNewTokens: 12, stopStrings: [] },
    );
    for (const g of gens) assert.ok(decodable(g.ids!));
  });

  test("the server's batcher draws only decodable ids and offers none as an alternative", async () => {
    const batcher = new Batcher(agent.model, k, 4);
    const seen: number[] = [];
    const runs = [0, 1].map((temperature, seed) =>
      batcher.submit({
        prompt: agent.tokenizer.encode('hello'),
        maxTokens: 12,
        temperature,
        topP: 1,
        seed,
        stopTokens: new Set<number>(),
        topLogprobs: 5,
        onToken: (t) => {
          seen.push(t.id, ...t.top.map((a) => a.id));
          return false;
        },
      }),
    );
    await Promise.all(runs);
    await batcher.close();
    assert.ok(seen.length > 0 && decodable(seen));
  });
});
