// The memory plan: its parts against the buffers the code allocates (a tape's and an arena's floats counted on tiny
// models of each family), its arithmetic (inputs that shrink which parts, phases maxed not summed), and the CLI:
// `hacrl plan`, the refusal of `hacrl train` before any work and its override, `hacrl config resolve`'s line.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { readHfConfig, writeHfConfig } from '../src/model/hf-config.js';
import { writeCheckpoint } from '../src/model/checkpoint.js';
import { loadModel, tablesStoredBf16, tensorsForCheckpoint } from '../src/model/weights.js';
import { parseRunConfig } from '../src/config/load-config.js';
import { longestPrompt, MEASURED_QUESTIONS, planRun } from '../src/train/run-plan.js';
import { renderPrompt } from '../src/tasks/prompt.js';
import { loadTokenizer } from '../src/tokenizer/load.js';
import { mulberry32 } from './helpers.js';
import {
  agentMemory,
  blockFloats,
  forwardFloats,
  planMemory,
  type AgentMemoryInput,
} from '../src/model/memory-plan.js';
import { packPromptResponses } from '../src/model/pack.js';
import { hfWeightNames } from '../src/model/weight-names.js';
import { scoreResponses } from '../src/model/response-log-probs.js';
import { shapeConfig } from '../src/model/shapes.js';
import { Arena, Tape } from '../src/tensor/tape.js';
import { machineMemory } from '../src/util/memory.js';
import { hacrl } from './cli.js';
import { saveTinyAgent } from './tiny-agents.js';
import { CONFIGS, testModel, VOCAB } from './tiny-models.js';
import { resolveRun } from '../src/train/resolved-run.js';

const k = engine();

/**
 * The most floats live at once in arenas (a tape's buffers are its arena's) while fn runs, and those still live when
 * it returns: Arena.buffer adds, Arena.release subtracts what the arena held.
 */
function liveFloats(fn: () => void): { peak: number; end: number } {
  const proto = Arena.prototype as unknown as { buffer(n: number): Float32Array; release(): void };
  const [buffer, release] = [proto.buffer, proto.release];
  const held = new WeakMap<object, number>();
  let live = 0;
  let peak = 0;
  proto.buffer = function (this: object, n: number) {
    held.set(this, (held.get(this) ?? 0) + n);
    live += n;
    peak = Math.max(peak, live);
    return buffer.call(this, n);
  };
  proto.release = function (this: object) {
    live -= held.get(this) ?? 0;
    held.delete(this);
    release.call(this);
  };
  try {
    fn();
  } finally {
    [proto.buffer, proto.release] = [buffer, release];
  }
  return { peak, end: live };
}

/** `count` sequences of `length` tokens (prompt 3, the rest response): every row the same length, no padding. */
function pairs(count: number, length: number) {
  return Array.from({ length: count }, (_, i) => ({
    prompt: [1 + i, 2, 3],
    response: Array.from({ length: length - 3 }, (_, j) => 1 + ((i * 7 + j) % (VOCAB - 1))),
  }));
}

describe('what a pass holds, counted against the estimate', () => {
  for (const [family, json] of Object.entries(CONFIGS)) {
    const model = testModel(json, 2);
    const cfg = model.cfg;
    const rows = 3 * 12;
    const packed = packPromptResponses(pairs(3, 12));
    const logits = rows * cfg.vocabSize; // the tiny vocabulary keeps every logit for the backward
    test(`${family}: a training tape keeps what the plan counts`, () => {
      const { end } = liveFloats(() => model.tokenLogProbs({ k, tape: new Tape() }, packed, packed.targets));
      assert.equal(end, forwardFloats(cfg, rows) + logits);
    });
    test(`${family}: under checkpointing it keeps block outputs, one block at a time besides`, () => {
      const tape = new Tape();
      const { peak, end } = liveFloats(() =>
        model.tokenLogProbs({ k, tape, checkpointing: true }, packed, packed.targets),
      );
      assert.equal(end, forwardFloats(cfg, rows, { outputsOnly: true }) + logits);
      const block = blockFloats(cfg);
      assert.ok(peak > end && peak <= end + rows * (block.outputs + block.saved), `peak ${peak}, end ${end}`);
      tape.clear();
    });
    test(`${family}: a scoring pass holds block outputs and one block at a time`, () => {
      const { peak, end } = liveFloats(() => scoreResponses(model, k, pairs(3, 12)));
      assert.equal(end, 0);
      const block = blockFloats(cfg);
      const bound = forwardFloats(cfg, rows, { outputsOnly: true }) + rows * (block.outputs + block.saved) + logits;
      assert.ok(peak <= bound && peak > rows * (block.outputs + block.saved), `peak ${peak}, bound ${bound}`);
      assert.ok(peak < forwardFloats(cfg, rows), 'not every layer is held to the end');
    });
  }
});

/** A qwen2.5-0.5b-shaped agent sampling 8 × 4 sequences of ≤ 64 + 256 tokens in 4 mini-batches. */
const base: AgentMemoryInput = {
  name: 'a',
  cfg: shapeConfig('qwen2.5-0.5b'),
  reference: false,
  sequences: 32,
  generationBatch: 64,
  promptTokens: 64,
  maxNewTokens: 256,
  trainSequences: 32,
  miniBatches: 4,
  checkpointing: false,
};
const part = (a: AgentMemoryInput, name: string): number =>
  agentMemory(a).parts.find((p) => p.name === name)?.bytes ?? 0;

describe('the estimate', () => {
  const params = 494_032_768; // Qwen2.5-0.5B, tied head
  test('weights, gradients and AdamW follow the parameter counts and the bytes per weight', () => {
    assert.equal(part(base, 'weights'), 4 * params);
    assert.equal(part(base, 'AdamW m and v'), 8 * params);
    // Gradients come from the pool's size classes: at most 1/8 over the parameters.
    assert.ok(part(base, 'gradients') >= 4 * params && part(base, 'gradients') <= 4.5 * params);
    // At bf16 a frozen base and the KL reference store matrices in 2 bytes, the norms' and biases' vectors in 4, and
    // the embedding table in 4 (as an fp32 checkpoint's is kept); trainable weights stay fp32 masters.
    const table = 151_936 * 896;
    const vectors = hfWeightNames(base.cfg)
      .filter((w) => w.shape.length === 1)
      .reduce((n, w) => n + w.shape[0]!, 0);
    const lora = { ...base, trainableParameters: 8_798_208, precision: 'bf16' as const };
    assert.equal(part(lora, 'weights'), 2 * params + 2 * vectors + 2 * table);
    assert.equal(part({ ...lora, trainableParameters: undefined }, 'weights'), 4 * params);
    assert.equal(part(lora, 'gradients'), 4 * 8_798_208);
    assert.equal(part(lora, 'AdamW m and v'), 8 * 8_798_208);
    assert.equal(part(base, 'KL reference'), 0);
    assert.equal(part({ ...base, reference: true }, 'KL reference'), 4 * params);
    assert.equal(
      part({ ...base, reference: true, precision: 'bf16' }, 'KL reference'),
      2 * params + 2 * vectors + 2 * table,
    );
    // bf16 makes bfloat16 inference copies of trainable weights only; its products round their operands into a scratch
    // of bfloat16 bits: trainable weights are rounded (the largest, the head, included), a frozen base is multiplied
    // as stored, except a head tied to an fp32 embedding table (this shape ties them), rounded like a master.
    assert.equal(part(lora, 'inference weight copies'), 0);
    assert.ok(part(base, 'inference weight copies') > 0);
    assert.equal(
      part({ ...base, precision: 'bf16' }, 'inference weight copies'),
      part(base, 'inference weight copies') / 2,
    );
    const full = part({ ...base, precision: 'bf16' }, 'bf16 operand scratch');
    assert.ok(full >= 2 * table, 'at least the rounded head');
    assert.equal(part(lora, 'bf16 operand scratch'), full);
    const untied = { ...lora, cfg: { ...lora.cfg, tiedEmbeddings: false } };
    assert.equal(part(untied, 'bf16 operand scratch'), full - 2 * table);
    assert.equal(part(base, 'bf16 operand scratch'), 0);
    // A checkpoint storing its tables as BF16 (as the Hub ships Qwen2.5 and Llama 3.2) keeps them as stored: 2 bytes a
    // value, and its tied head is multiplied without rounding.
    const stored = { ...lora, tablesBf16: true };
    assert.equal(part(stored, 'weights'), 2 * params + 2 * vectors);
    assert.equal(
      part({ ...stored, reference: true, trainableParameters: undefined }, 'KL reference'),
      part(stored, 'weights'),
    );
    assert.equal(part(stored, 'bf16 operand scratch'), full - 2 * table);
    assert.equal(part({ ...stored, precision: 'fp32' }, 'weights'), part({ ...lora, precision: 'fp32' }, 'weights'));
  });

  test("one bf16 operand scratch per process: the largest agent's is counted, the others show it shared", () => {
    const llama = { ...base, name: 'llama', cfg: shapeConfig('llama-3.2-1b'), precision: 'bf16' as const };
    const qwen = { ...base, name: 'qwen', precision: 'bf16' as const };
    const plan = planMemory([qwen, llama], 0);
    const [q, l] = plan.agents as [ReturnType<typeof agentMemory>, ReturnType<typeof agentMemory>];
    const scratch = (name: string): number =>
      agentMemory(name === 'qwen' ? qwen : llama).parts.find((p) => p.name === 'bf16 operand scratch')!.bytes;
    assert.ok(scratch('llama') > scratch('qwen') && scratch('qwen') > 0);
    assert.equal(l.parts.find((p) => p.name === 'bf16 operand scratch')!.bytes, scratch('llama'));
    assert.equal(q.parts.find((p) => p.name === 'bf16 operand scratch (shared with llama)')!.bytes, 0);
    assert.equal(q.resident, agentMemory(qwen).resident - scratch('qwen'));
    assert.equal(plan.total, q.resident + l.resident + plan.peakPhase!.bytes);
    // fp32 agents have none: the plan is the sum as before.
    const fp32 = planMemory(
      [
        { ...qwen, precision: 'fp32' },
        { ...llama, precision: 'fp32' },
      ],
      0,
    );
    assert.equal(fp32.total, fp32.agents.reduce((n, a) => n + a.resident, 0) + fp32.peakPhase!.bytes);
  });

  test('the KV cache holds one generation batch at prompt + new tokens', () => {
    const { layers, kvHeads, headDim } = base.cfg;
    assert.equal(part(base, 'KV cache'), 2 * layers * 32 * kvHeads * 320 * headDim * 4);
    assert.equal(part({ ...base, sequences: 256 }, 'KV cache'), 2 * layers * 64 * kvHeads * 320 * headDim * 4);
  });

  test('old log-probs from the sampler and no KL penalty: no scoring pass, so no scoring activations', () => {
    assert.ok(part(base, 'scoring activations') > 0);
    assert.equal(part({ ...base, scores: false }, 'scoring activations'), 0);
    assert.equal(agentMemory({ ...base, scores: false }).parts.filter((p) => p.held === 'scoring').length, 0);
  });

  test('checkpointing, more mini-batches and shorter responses shrink the training activations', () => {
    const full = part(base, 'training activations');
    assert.ok(part({ ...base, checkpointing: true }, 'training activations') < full / 5);
    assert.ok(part({ ...base, miniBatches: 8 }, 'training activations') < 0.6 * full);
    assert.ok(part({ ...base, maxNewTokens: 64 }, 'training activations') < 0.5 * full);
  });

  test('phases are maxed over agents and phases, resident parts summed', () => {
    const b = { ...base, name: 'b', cfg: shapeConfig('smollm2-135m'), checkpointing: true };
    const plan = planMemory([base, b], 1000);
    const [pa, pb] = plan.agents as [ReturnType<typeof agentMemory>, ReturnType<typeof agentMemory>];
    assert.equal(plan.total, 1000 + pa.resident + pb.resident + Math.max(pa.phase.bytes, pb.phase.bytes));
    assert.equal(plan.peakPhase?.agent, 'a');
    const phases = ['sampling', 'scoring', 'training'].map((h) =>
      pa.parts.filter((p) => p.held === h).reduce((n, p) => n + p.bytes, 0),
    );
    assert.equal(pa.phase.bytes, Math.max(...phases));
    // An agent another process trains costs nothing here: its weights stay with that process.
    assert.deepEqual(agentMemory({ ...b, local: false }).parts, []);
  });
});

describe('hacrl plan, and the refusal of hacrl train', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'hacrl-plan-'));
  after(() => rm(dir, { recursive: true, force: true }));
  const agent = join(dir, 'agent');
  await saveTinyAgent(agent, 'qwen3');
  // The same tokenizer under a config.json of Qwen2.5-0.5B's shape: planned from the config alone, never loaded.
  const huge = join(dir, 'huge');
  await saveTinyAgent(huge, 'qwen3');
  await writeHfConfig(huge, shapeConfig('qwen2.5-0.5b'));
  const config = async (name: string, checkpoint: string): Promise<string> => {
    const file = join(dir, `${name}.yaml`);
    await writeFile(
      file,
      [
        'algorithm: grpo',
        `agents: [{ name: a, checkpoint: ${JSON.stringify(checkpoint)} }]`,
        "data: { train: 'easy:train:20', validation: ['easy:test:2'], template: '{question}' }",
        'rollout: { promptsPerStep: 2, groupSize: 2, maxNewTokens: 6 }',
        'optim: { miniBatches: 2 }',
        'eval: { atStart: false, problems: 2 }',
        'steps: 1',
        `runDir: ${JSON.stringify(join(dir, `run-${name}`))}`,
      ].join('\n'),
    );
    return file;
  };
  const tiny = await config('tiny', agent);
  const big = await config('big', huge);

  test('hacrl plan prints every part and the verdict against the machine', () => {
    const r = hacrl(['plan', '--config', big]);
    assert.equal(r.status, 0, r.stderr);
    for (const want of ['agent a', 'weights', 'gradients', 'AdamW m and v', 'KV cache', 'training activations'])
      assert.match(r.stdout, new RegExp(want));
    assert.match(r.stdout, /memory plan: estimated peak \d+\.\d\d GiB against/);
    const json = JSON.parse(hacrl(['plan', '--config', big, '--json']).stdout) as {
      plan: { total: number };
      prompts: { tokens: number; source: string }[];
    };
    assert.equal(json.prompts[0]!.source, 'data.train');
    assert.ok(json.prompts[0]!.tokens > 5, 'the prompts were measured in the agent tokens');
    assert.ok(json.plan.total > 4 * 494e6 * 4, 'a 0.5B fine-tuning needs more than its weights, gradients and AdamW');
  });

  test('hacrl train refuses before any work, naming the biggest parts and what to change', () => {
    const r = hacrl(['train', '--config', big], { HACRL_MEMORY_LIMIT_BYTES: String(2 ** 30) });
    assert.notEqual(r.status, 0);
    assert.match(
      r.stderr,
      /needs an estimated \d+\.\d\d GiB at its peak and HACRL_MEMORY_LIMIT_BYTES allows 1\.00 GiB/,
    );
    assert.match(r.stderr, /AdamW m and v of a/);
    assert.match(r.stderr, /LoRA/);
    assert.match(r.stderr, /optim\.activationCheckpointing/);
    assert.match(r.stderr, /--skip-memory-check/);
    assert.equal(existsSync(join(dir, 'run-big')), false, 'nothing was started');
  });

  test('--skip-memory-check trains a run the limit refuses', () => {
    const small = hacrl(['train', '--config', tiny], { HACRL_MEMORY_LIMIT_BYTES: '1000' });
    assert.notEqual(small.status, 0);
    assert.match(small.stderr, /needs an estimated/);
    const r = hacrl(['train', '--config', tiny, '--skip-memory-check'], { HACRL_MEMORY_LIMIT_BYTES: '1000' });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(existsSync(join(dir, 'run-tiny', 'metrics.jsonl')));
  });

  test('a bf16 LoRA agent on a checkpoint storing BF16 tables is planned with them at 2 bytes a value', async () => {
    const stored = join(dir, 'stored-bf16');
    await saveTinyAgent(stored, 'qwen3');
    const model = await loadModel(stored);
    await writeCheckpoint(stored, tensorsForCheckpoint(model), { floatDtype: 'BF16' });
    assert.equal(await tablesStoredBf16(stored), true);
    assert.equal(await tablesStoredBf16(agent), false);
    const weights = async (checkpoint: string): Promise<number> => {
      const cfg = parseRunConfig({
        agents: [{ name: 'a', checkpoint, lora: { rank: 2 }, precision: 'bf16' }],
        data: { train: 'easy:train:20', template: '{question}' },
      });
      const { plan } = await planRun(resolveRun(cfg));
      return plan.agents[0]!.parts.find((p) => p.name === 'weights')!.bytes;
    };
    // The untied qwen3 tiny model has one lookup table (its head is a product's weight: bf16 either way).
    assert.equal((await weights(agent)) - (await weights(stored)), 2 * model.cfg.vocabSize * model.cfg.hidden);
  });

  test("hacrl agent's plan: the other agents cost their weights only, and shared rollouts are trained on by all", async () => {
    const cfg = parseRunConfig({
      algorithm: 'hacpo',
      agents: [
        { name: 'a', checkpoint: agent },
        { name: 'b', checkpoint: huge, groupSize: 4 },
      ],
      data: { train: 'easy:train:20', template: '{question}' },
      rollout: { promptsPerStep: 2, groupSize: 2 },
      optim: { klCoef: 0.1 },
    });
    const { plan, prompts } = await planRun(resolveRun(cfg), { local: (name) => name === 'a' });
    const [a, b] = plan.agents as [ReturnType<typeof agentMemory>, ReturnType<typeof agentMemory>];
    assert.deepEqual(b.parts, [], 'b is trained by another process: none of its memory is here');
    assert.ok(a.parts.some((p) => p.name === 'KL reference'));
    assert.equal(prompts[1]!.tokens, prompts[0]!.tokens, 'the two agents share a tokenizer here');
    // a trains on its 2 × 2 sequences and b's 2 × 4, in the recipe's mini-batches.
    const alone = agentMemory({
      name: 'a',
      cfg: await readHfConfig(agent),
      reference: true,
      sequences: 4,
      generationBatch: 64,
      promptTokens: prompts[0]!.tokens,
      maxNewTokens: cfg.rollout.maxNewTokens,
      trainSequences: 12,
      miniBatches: cfg.optim.miniBatches,
      checkpointing: false,
    });
    assert.deepEqual(a.parts, alone.parts);
  });

  test('old log-probs from the sampler leave the scoring pass out of the plan unless a KL penalty scores', async () => {
    const scoring = async (optim: Record<string, unknown>): Promise<boolean> => {
      const cfg = parseRunConfig({
        agents: [{ name: 'a', checkpoint: agent }],
        data: { train: 'easy:train:20', template: '{question}' },
        rollout: { promptsPerStep: 2, groupSize: 2 },
        optim,
      });
      return (await planRun(resolveRun(cfg))).plan.agents[0]!.parts.some((p) => p.held === 'scoring');
    };
    assert.deepEqual(
      await Promise.all([
        scoring({}),
        scoring({ oldLogProbs: 'sampler' }),
        scoring({ oldLogProbs: 'sampler', klCoef: 0.1 }),
      ]),
      [true, false, true],
    );
  });

  test('LoRA agents: gradients and AdamW for the adapters only, no KL copy, one base counted once', async () => {
    const lora = { rank: 8, alpha: 16, dropout: 0.1, targets: ['all-linear'] };
    const cfg = parseRunConfig({
      algorithm: 'hacpo',
      agents: [
        { name: 'a', checkpoint: huge, lora },
        { name: 'b', checkpoint: huge, lora },
      ],
      data: { train: 'easy:train:20', template: '{question}' },
      rollout: { promptsPerStep: 2, groupSize: 2 },
      optim: { klCoef: 0.1 },
    });
    const { plan } = await planRun(resolveRun(cfg));
    const [a, b] = plan.agents as [ReturnType<typeof agentMemory>, ReturnType<typeof agentMemory>];
    const part = (p: typeof a, name: string): number => p.parts.find((x) => x.name === name)?.bytes ?? NaN;
    const shape = shapeConfig('qwen2.5-0.5b');
    // rank × (in + out) over q, k, v, o, gate, up and down of every layer.
    const { hidden: d, kvHeads, headDim, intermediate: f, layers } = shape;
    const kv = kvHeads * headDim;
    const perLayer = 8 * (d + d + (d + kv) * 2 + (d + d) + (d + f) * 2 + (f + d));
    assert.equal(part(a, 'LoRA adapters'), 4 * perLayer * layers);
    assert.equal(part(a, 'gradients'), 4 * perLayer * layers);
    assert.equal(part(a, 'AdamW m and v'), 8 * perLayer * layers);
    assert.ok(!a.parts.some((p) => p.name === 'KL reference'), 'the reference is the base without adapters');
    assert.ok(part(a, 'weights') > 494e6 * 4 * 0.99);
    assert.equal(part(b, 'weights (shared with a)'), 0);
    // Under an exchange that trains only b here, b holds the base itself: a's process loads its own copy.
    const onlyB = (await planRun(resolveRun(cfg), { local: (name) => name === 'b' })).plan.agents[1]!;
    assert.equal(part(onlyB, 'weights'), part(a, 'weights'));
    const full = agentMemory({
      name: 'a',
      cfg: shape,
      reference: true,
      sequences: 4,
      generationBatch: 64,
      promptTokens: 8,
      maxNewTokens: 16,
      trainSequences: 8,
      miniBatches: 1,
      checkpointing: false,
    });
    assert.ok(a.resident < full.resident / 2.5, `${a.resident} against full fine-tuning's ${full.resident}`);
  });

  test('the longest prompt is measured on a bounded number of the longest questions, exact when few', async () => {
    const tok = await loadTokenizer(agent);
    let calls = 0;
    const counting = {
      chatTemplate: tok.chatTemplate,
      applyChatTemplate: tok.applyChatTemplate.bind(tok),
      encode: (text: string, o?: { addSpecialTokens?: boolean }): number[] => {
        calls++;
        return tok.encode(text, o);
      },
    };
    const prompt = { template: 'Q: {question}' };
    const tokens = (q: string): number => tok.encode(renderPrompt(tok, q, prompt)).length;
    // A data set twice the bound, lengths in random order, the longest last: only the bound is tokenized.
    const rng = mulberry32(3);
    const words = (n: number): string =>
      Array.from({ length: n }, (_, i) => ['the', 'answer', 'is', '42.'][i % 4]).join(' ');
    const questions = Array.from(
      { length: 2 * MEASURED_QUESTIONS },
      (_, i) => `${i}: ${words(1 + Math.floor(rng() * 40))}`,
    );
    questions.push(`last: ${words(60)}`);
    assert.equal(longestPrompt(counting, questions, prompt), Math.max(...questions.map(tokens)));
    assert.equal(calls, MEASURED_QUESTIONS);
    // Few questions are all measured (duplicates once): the most tokens wins even when it is not the longest text.
    const few = ['the answer is the answer is', 'zqxjvkzqxjvk', 'the answer is the answer is', 'hello'];
    assert.ok(tokens(few[1]!) > tokens(few[0]!), 'the shorter text has more tokens');
    calls = 0;
    assert.equal(longestPrompt(counting, few, prompt), tokens(few[1]!));
    assert.equal(calls, 3);
    // With a bound of 1, only the longest text is measured: what the bound gives up.
    assert.equal(longestPrompt(counting, few, prompt, 1), tokens(few[0]!));
  });

  test('hacrl config resolve adds the verdict on stderr and keeps stdout one JSON document', () => {
    const r = hacrl(['config', 'resolve', big]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(
      (JSON.parse(r.stdout) as { optim: { activationCheckpointing: boolean } }).optim.activationCheckpointing,
      false,
    );
    assert.match(r.stderr, /^memory plan: estimated peak \d+\.\d\d GiB against .* (fits|does NOT fit)$/m);
  });

  test('the machine figures: HACRL_MEMORY_LIMIT_BYTES replaces the available memory, and must be whole bytes', () => {
    assert.equal(machineMemory({ HACRL_MEMORY_LIMIT_BYTES: '12345' }).available, 12345);
    const m = machineMemory({});
    assert.ok(m.available > 0 && m.available <= m.total);
    for (const bad of [
      '1.5GB',
      '0x10',
      '0o20',
      '0b10000',
      '1e9',
      ' 16',
      '16 ',
      '+16',
      '-16',
      '0',
      '16.0',
      '9'.repeat(20),
    ])
      assert.throws(
        () => machineMemory({ HACRL_MEMORY_LIMIT_BYTES: bad }),
        /HACRL_MEMORY_LIMIT_BYTES must be a whole number of bytes in decimal digits/,
        JSON.stringify(bad),
      );
  });
});
