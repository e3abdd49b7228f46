/**
 * `--precision fp32|bf16` of `hacrl eval`, `hacrl score`, `hacrl serve` and `hacrl mas rollout`: at bf16 each
 * command's output is what the library computes with the folder loaded at precision bf16 (loadPretrained(dir,
 * new Map(), { precision: 'bf16' }), as `hacrl train` loads a bf16 agent) on the TypeScript backend, value for value,
 * and differs from the library's fp32 output (the other tests of these commands run them at the default, fp32). The
 * native backend refuses bf16 before anything is read on a CPU without AMX-BF16/AVX512_BF16 (flags injected, and on
 * this CPU through the CLI when it lacks them).
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { WarmStartSchema, workflowAgent } from '../src/agents/workflow-agent.js';
import { BF16_CPU_FLAGS, cpuFlags } from '../src/backend/cpu-features.js';
import { Engine } from '../src/backend/engine.js';
import { availableBackends } from '../src/backend/select.js';
import { typescriptKernels } from '../src/backend/typescript.js';
import { checkPrecisionRuns } from '../src/cli/precision.js';
import { evaluate } from '../src/eval/evaluate.js';
import { AgentSpecSchema } from '../src/model/agent-spec.js';
import { loadPretrained, savePretrained, type Pretrained } from '../src/model/pretrained.js';
import { scoreResponses } from '../src/model/response-log-probs.js';
import { HacrlServer } from '../src/serve/server.js';
import type { Precision } from '../src/tensor/bf16.js';
import { loadDataSpec } from '../src/tasks/data-spec.js';
import { Rng } from '../src/util/rng.js';
import { modelPolicy } from '../src/workflows/model-policy.js';
import { workflowOf } from '../src/workflows/registry.js';
import type { MasSample } from '../src/workflows/samples.js';
import { playStep } from '../src/workflows/play.js';
import { parseWorkflowConfig } from '../src/workflows/workflow-config.js';
import { hacrl, startHacrlServe } from './cli.js';
import { saveTinyAdapter, saveTinyAgent } from './tiny-agents.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-precision-'));
const dir = join(root, 'agent');
const adapterDir = join(root, 'adapter');
const typescript = { HACRL_BACKEND: 'typescript' };
const k = new Engine(typescriptKernels);
/** The folder as `hacrl train` loads an agent of `precision`. */
const load = (d: string, precision: Precision): Promise<Pretrained> => loadPretrained(d, new Map(), { precision });

before(async () => {
  await saveTinyAgent(dir, 'qwen3', 7);
  await saveTinyAdapter(adapterDir, dir, 4);
});
after(() => rm(root, { recursive: true, force: true }));

describe('hacrl score --precision', () => {
  const rows = [
    { prompt: 'what is 12 + 30?', response: ' the answer is 42.' },
    { prompt: 'hello agents', response: ' hello world, 7 * 6 = 42' },
  ];
  type Scored = { token_logprobs: number[]; response_ids: number[]; sum_logprob: number };
  /** `hacrl score --precision bf16` of the rows on the TypeScript backend. */
  const scoreCli = async (model: string): Promise<Scored[]> => {
    const input = join(root, 'rows.jsonl');
    await writeFile(input, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const output = join(root, 'scores.jsonl');
    const r = hacrl(
      ['score', '--model', model, '--input', input, '--output', output, '--precision', 'bf16'],
      typescript,
    );
    assert.equal(r.status, 0, r.stderr);
    return (await readFile(output, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Scored);
  };
  /** The library's log-probs of the rows, tokenized as `hacrl score` tokenizes text rows. */
  const scoreLib = async (model: string, precision: Precision): Promise<number[][]> => {
    const p = await load(model, precision);
    assert.equal(p.model.precision, precision);
    const items = rows.map((r) => ({ prompt: p.tokenizer.encode(r.prompt), response: p.tokenizer.encode(r.response) }));
    return scoreResponses(p.model, k, items, 16);
  };

  for (const [what, model] of [
    ['a whole model', () => dir],
    ['an adapter folder', () => adapterDir],
  ] as const)
    test(`${what}: bf16 log-probs are the library's bf16 ones exactly, and differ from fp32`, async () => {
      const bf16 = (await scoreCli(model())).map((s) => s.token_logprobs);
      assert.deepEqual(bf16, await scoreLib(model(), 'bf16'));
      const fp32 = (await scoreLib(model(), 'fp32')).flat();
      assert.ok(fp32.length > 10, 'tokens to compare');
      const diff = Math.max(...bf16.flat().map((x, i) => Math.abs(x - fp32[i]!)));
      assert.ok(diff > 1e-5, `bf16 and fp32 log-probs differ (max |Δ| ${diff})`);
    });
});

describe('hacrl eval --precision', () => {
  const data = 'easy:test:8';
  const maxNewTokens = 12;
  /** The full report (--output) of `hacrl eval --precision bf16` on the TypeScript backend. */
  const evalCli = async (): Promise<unknown> => {
    const output = join(root, 'eval.json');
    const r = hacrl(
      [
        'eval',
        '--model',
        dir,
        '--data',
        data,
        '--template',
        '{question}',
        '--max-new-tokens',
        String(maxNewTokens),
        '--output',
        output,
        '--precision',
        'bf16',
      ],
      typescript,
    );
    assert.equal(r.status, 0, r.stderr);
    const rows = JSON.parse(await readFile(output, 'utf8')) as unknown[];
    assert.equal(rows.length, 1);
    return rows[0];
  };
  /** The library's evaluation of the folder loaded at `precision`, with `hacrl eval`'s settings, as --output writes it. */
  const evalLib = async (precision: Precision): Promise<unknown> => {
    const { model, tokenizer } = await load(dir, precision);
    const { name, problems } = await loadDataSpec(data);
    const report = await evaluate(model, k, tokenizer, problems, {
      k: 0,
      temperature: 1,
      topP: 1,
      maxNewTokens,
      seed: 0,
      name: dir,
      prompt: { template: '{question}' },
    });
    return JSON.parse(JSON.stringify({ model: dir, data: name, ...report })) as unknown;
  };

  test("the bf16 report is the library's bf16 evaluation, and greedy answers differ from fp32", async () => {
    const bf16 = await evalCli();
    assert.deepEqual(bf16, await evalLib('bf16'));
    const fp32 = await evalLib('fp32');
    type Report = { problems: { greedy: { response: string } }[] };
    const responses = (r: unknown): string[] => (r as Report).problems.map((p) => p.greedy.response);
    assert.equal(responses(bf16).length, 8);
    assert.notDeepEqual(responses(bf16), responses(fp32));
  });
});

describe('hacrl serve --precision', () => {
  type Completion = { choices: { text: string; logprobs: { tokens: string[]; token_logprobs: number[] } }[] };
  const body = { model: 'tiny', prompt: 'the answer is', max_tokens: 12, temperature: 0.9, seed: 11, logprobs: 1 };
  const complete = async (baseURL: string): Promise<Completion> => {
    const r = await fetch(`${baseURL}/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.equal(r.status, 200);
    return (await r.json()) as Completion;
  };
  /** The completion of the library's server over the folder loaded at `precision`. */
  const served = async (precision: Precision): Promise<Completion> => {
    const server = await HacrlServer.start(new Map([['tiny', await load(dir, precision)]]), k, { port: 0 });
    try {
      return await complete(server.url);
    } finally {
      await server.stop(1000);
    }
  };
  /** The completion of `hacrl serve --precision bf16` on the TypeScript backend. */
  const servedCli = async (): Promise<Completion> => {
    const args = ['--model', `tiny=${dir}`, '--port', '0', '--precision', 'bf16'];
    const server = await startHacrlServe(args, typescript);
    try {
      return await complete(server.baseURL);
    } finally {
      await server.stop();
    }
  };

  test("a bf16 completion has the library's bf16 tokens and log-probs exactly, not fp32's", async () => {
    const bf16 = await servedCli();
    assert.deepEqual(bf16.choices, (await served('bf16')).choices);
    const lp = (c: Completion): number[] => c.choices[0]!.logprobs.token_logprobs;
    assert.equal(lp(bf16).length, body.max_tokens);
    assert.notDeepEqual(lp(bf16), lp(await served('fp32')));
  });
});

describe('hacrl mas rollout --precision', () => {
  const workflow = { name: 'plan-path', env: { height: 3, width: 3 }, groupSize: 2, maxTurns: 1 };
  const [instances, seed] = [2, 3];
  const config = parseWorkflowConfig(workflow);
  const wf = workflowOf(config);
  /** A fresh agent for the workflow (its prompts need 2048 positions and their characters), saved as a checkpoint. */
  const masDir = join(root, 'mas-agent');
  before(async () => {
    const spec = AgentSpecSchema.parse({ arch: 'qwen3', hidden: 32, layers: 1, heads: 2 });
    const agent = await workflowAgent(wf, spec, WarmStartSchema.parse({}), 0, k);
    await savePretrained(masDir, { ...agent, generation: null });
  });
  /** The samples `hacrl mas rollout --model DIR --precision bf16 --out FILE` writes, on the TypeScript backend. */
  const rolloutCli = async (): Promise<MasSample[]> => {
    const out = join(root, 'samples.jsonl');
    const args = ['--workflow', JSON.stringify(workflow), '--instances', String(instances), '--seed', String(seed)];
    const r = hacrl(['mas', 'rollout', ...args, '--model', masDir, '--out', out, '--precision', 'bf16'], typescript);
    assert.equal(r.status, 0, r.stderr);
    return (await readFile(out, 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as MasSample);
  };
  /** The batch the library plays with the folder loaded at `precision` as the shared policy, sampling from the seed. */
  const rolloutLib = async (precision: Precision): Promise<MasSample[]> => {
    const { model, tokenizer } = await load(masDir, precision);
    assert.equal(model.precision, precision);
    const policies = { shared: modelPolicy(model, tokenizer, k, new Rng(seed)) };
    const seeds = Array.from({ length: instances }, (_, i) => seed + i);
    const { batch } = await playStep(wf, config, policies, seeds);
    return JSON.parse(JSON.stringify(batch.samples)) as MasSample[];
  };

  test("the bf16 samples are the library's bf16 rollout's exactly, and differ from fp32's", async () => {
    const bf16 = await rolloutCli();
    assert.ok(bf16.length >= instances * 2 * 2, 'both roles, K candidates each, per instance');
    assert.deepEqual(bf16, await rolloutLib('bf16'));
    const ids = (samples: MasSample[]): (number[] | undefined)[] => samples.map((s) => s.responseIds);
    assert.notDeepEqual(ids(bf16), ids(await rolloutLib('fp32')));
  });

  test('bf16 without a checkpoint is refused: the fresh agent runs at fp32', () => {
    const r = hacrl(['mas', 'rollout', '--precision', 'bf16'], typescript);
    assert.equal(r.status, 1, r.stderr);
    assert.match(r.stderr, /--precision bf16 applies to checkpoints: pass --model DIR/);
  });
});

describe('where --precision bf16 runs', () => {
  const cpuinfo = (flags: string): string => `processor\t: 0\nflags\t\t: fpu sse2 avx2 fma ${flags}\n`;

  test('the native backend refuses bf16 without AMX-BF16 or AVX512_BF16; fp32 and the TypeScript backend pass', () => {
    const none = cpuFlags(cpuinfo('avx512f'));
    assert.throws(
      () => checkPrecisionRuns('bf16', 'native', none),
      /^Error: --precision bf16: the native backend .*AMX-BF16 or AVX512_BF16.*use precision fp32, or HACRL_BACKEND=typescript/,
    );
    checkPrecisionRuns('bf16', 'native', cpuFlags(cpuinfo('avx512_bf16')));
    checkPrecisionRuns('bf16', 'native', cpuFlags(cpuinfo('amx_bf16 amx_tile')));
    checkPrecisionRuns('bf16', 'typescript', none);
    checkPrecisionRuns('fp32', 'native', none);
  });

  const nativeHere = availableBackends().some((b) => b.name === 'native');
  const bf16Cpu = BF16_CPU_FLAGS.some((f) => cpuFlags().has(f));
  test(
    'on this CPU without AMX-BF16/AVX512_BF16, eval, score, serve and mas rollout refuse bf16 on native before reading anything',
    {
      skip: !nativeHere
        ? 'the native addon is not loaded'
        : bf16Cpu
          ? 'this CPU has AMX-BF16 or AVX512_BF16: the native backend runs bf16 here'
          : false,
    },
    () => {
      // Folders and files that do not exist: refused for the CPU before anything tries to read them.
      const missing = join(root, 'nonexistent');
      for (const args of [
        ['eval', '--model', missing, '--data', `${missing}.jsonl`],
        ['score', '--model', missing, '--input', `${missing}.jsonl`],
        ['serve', '--model', missing, '--port', '0'],
        ['mas', 'rollout', '--model', missing, '--out', join(missing, 'samples.jsonl')],
      ]) {
        const r = hacrl([...args, '--precision', 'bf16'], { HACRL_BACKEND: 'native' });
        assert.equal(r.status, 1, `${args.join(' ')}: ${r.stderr}`);
        assert.match(r.stderr, /^hacrl: --precision bf16: the native backend .* AMX-BF16 or AVX512_BF16/);
        assert.doesNotMatch(r.stderr, /nonexistent/);
      }
    },
  );
});
