// The coding workflow: generated tasks (reference, hidden cases, mutants, the tester's suite, disjoint splits), the
// harness run in the sandbox against the in-process reading of canonical programs, the coder's and the tester's
// rewards on hand-made programs and suites (right, wrong, crashing, looping, hostile), rollouts, warm-start rows and
// the command line.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  type CodingState,
  type CodingTask,
  CASE_TIMEOUT_MS,
  MAX_TESTER_CASES,
  codingEnv,
  formatCases,
  knownOutputs,
  mutantProgram,
  mutantSuite,
  parseTestCases,
  passRate,
  programHarness,
  readHarness,
  scoreTester,
  stepCoding,
} from '../src/envs/coding.js';
import { runMasRollout } from '../src/cli/mas.js';
import { WarmStartSchema, workflowAgent } from '../src/agents/workflow-agent.js';
import { engine } from '../src/backend/engine.js';
import { AgentSpecSchema } from '../src/model/agent-spec.js';
import { runSandboxed } from '../src/sandbox/run-code.js';
import { WorkflowSource } from '../src/train/workflow-source.js';
import { HELD_OUT_SEED } from '../src/workflows/play.js';
import type { Policy } from '../src/workflows/policy.js';
import { buildWorkflow } from '../src/workflows/registry.js';
import { treeRollout } from '../src/workflows/tree-sampling.js';
import { type WarmStartRow, warmStartRows } from '../src/workflows/warm-start.js';
import { parseWorkflowConfig } from '../src/workflows/workflow-config.js';
import { type EpisodeState, type Workflow, startEpisode } from '../src/workflows/workflow.js';
import { hacrl } from './cli.js';

const close = (a: number, b: number, msg?: string): void =>
  assert.ok(Math.abs(a - b) < 1e-9, `${msg ?? ''} expected ${b}, got ${a}`);

/** f(a, b) = a·3 + b, four hidden cases worked by hand, three mutants. */
const HAND: CodingTask = {
  id: 'coding:hand',
  key: 'mulNAdd|3|a,b',
  op: 'mulNAdd',
  n: 3,
  params: ['a', 'b'],
  spec: 'Write a JavaScript function f(a, b) that returns a times 3 plus b.',
  reference: 'function f(a,b){return a*3+b}',
  hidden: [
    { args: [1, 2], expected: 5 },
    { args: [0, 4], expected: 4 },
    { args: [2, 0], expected: 6 },
    { args: [3, 3], expected: 12 },
  ],
  mutants: [
    { op: 'mulNAdd', n: 2 },
    { op: 'add', n: 0 },
    { op: 'mul', n: 0 },
  ],
  suite: [{ args: [1, 2], expected: 5 }],
};
const START: CodingState = { task: HAND, cases: [], code: null, passRate: 0, solved: false };

/** The coding workflow of `config` playing the hand task whatever the seed. */
function handWorkflow(config: Record<string, unknown> = {}): Workflow<unknown> {
  const wf = buildWorkflow({ name: 'coding', maxTurns: 1, ...config });
  return { ...wf, env: { ...wf.env, reset: () => START } };
}

const episode = (env: CodingState): EpisodeState<unknown> => ({
  env,
  history: [],
  turn: 0,
  done: false,
  success: false,
});

describe('coding tasks', () => {
  const env = codingEnv();

  test('300 tasks: the reference passes every hidden case, each mutant fails one, the suite is valid and fails all', () => {
    const ops = new Set<string>();
    for (let seed = 0; seed < 300; seed++) {
      const { task } = env.reset(seed);
      ops.add(task.op);
      const inputs = task.hidden.map((c) => c.args);
      assert.equal(passRate(task.hidden, knownOutputs(task.reference, inputs)!), 1, task.reference);
      assert.ok(task.mutants.length >= 1 && task.mutants.length <= 3, `seed ${seed}`);
      const suite = scoreTester(task, task.suite);
      assert.deepEqual(
        [suite.validity, suite.killRate, suite.reward],
        [1, 1, 1],
        `seed ${seed}: ${formatCases(task.suite)}`,
      );
      // The hidden cases alone also fail every mutant (they score the coder; a mutant must not pass them).
      assert.equal(scoreTester(task, task.hidden).killRate, 1, `seed ${seed}`);
      assert.match(task.spec, /^Write a JavaScript function f\(/);
    }
    assert.equal(ops.size, 23, 'every operation is drawn');
    assert.deepEqual(env.reset(7), env.reset(7), 'same seed, same task');
  });

  test('train and test tasks are disjoint: held-out seeds draw only test-side keys', () => {
    assert.equal(HELD_OUT_SEED, 1_500_000_000, "the knob's default is the trainer's first held-out seed");
    const train = new Set(Array.from({ length: 1500 }, (_, s) => env.reset(s).task.key));
    const test = new Set(Array.from({ length: 300 }, (_, s) => env.reset(HELD_OUT_SEED + s).task.key));
    assert.ok(train.size > 150 && test.size > 30, `${train.size} train keys, ${test.size} test keys`);
    assert.deepEqual(
      [...test].filter((k) => train.has(k)),
      [],
    );
    assert.throws(() => codingEnv({ families: [] }), /families/);
  });

  test('canonical programs run in the sandbox print what knownOutputs works out, for every operation', async () => {
    const byOp = new Map<string, CodingTask>();
    for (let seed = 0; byOp.size < 23; seed++) {
      const { task } = env.reset(seed);
      if (!byOp.has(task.op)) byOp.set(task.op, task);
    }
    // Each reference on its own cases and on another task's of the same kinds (a warm-start detour's program).
    await Promise.all(
      [...byOp.values()].map(async (task) => {
        const inputs = [...task.hidden, ...task.suite].map((c) => c.args);
        const run = await runSandboxed(programHarness(task.reference, inputs), { timeoutMs: 60_000 });
        assert.equal(run.outcome, 'ok', run.stderr);
        assert.deepEqual(readHarness(run.stdout, inputs.length, true), knownOutputs(task.reference, inputs));
      }),
    );
    assert.equal(knownOutputs('function f(a,b){return b+a*3}', [[1, 2]]), null, 'other text: run it');
    assert.equal(knownOutputs(HAND.reference, [['x', 2]]), null, 'arguments outside the domain: run it');
  });
});

describe('coder rewards: hand-made programs in the sandbox', () => {
  const inputs = HAND.hidden.map((c) => c.args);
  const judge = async (code: string) => {
    const run = await runSandboxed(programHarness(code, inputs), { timeoutMs: 10_000, maxOutputBytes: 4096 });
    const outputs = readHarness(run.stdout, inputs.length, run.outcome === 'ok', run.outcome);
    return { outcome: run.outcome, outputs, step: stepCoding(START, { code, outputs }) };
  };

  test('right (not the canonical text), arrow and const forms: every hidden case, solved', async () => {
    for (const code of ['function f(a, b) {\n  return b + 3 * a;\n}', 'const f = (a, b) => a * 3 + b;']) {
      const { step } = await judge(code);
      assert.deepEqual([step.reward, step.done, step.success], [1, true, true], code);
    }
  });

  test('wrong: a·2 + b passes only f(0,4) = 4 (1 of 4); a crash and a non-value pass nothing', async () => {
    const wrong = await judge('function f(a,b){return a*2+b}');
    close(wrong.step.reward, 0.25);
    assert.equal(wrong.step.success, false);
    assert.equal(wrong.step.feedback, 'passes 1 of 4 hidden tests');
    const crash = await judge('function f(a,b){return a.b.c}');
    assert.deepEqual([crash.outcome, crash.step.reward], ['ok', 0]);
    assert.deepEqual(crash.outputs[0], { error: 'error' });
    assert.equal((await judge('function f(a,b){}')).step.reward, 0, 'undefined is no JSON value');
    assert.deepEqual((await judge('function g(a,b){return a*3+b}')).outputs[0], { error: 'no function f' });
  });

  test(`looping: in f or at the top level, a case over ${CASE_TIMEOUT_MS} ms fails and the rest are not run`, async () => {
    for (const code of ['function f(a,b){while(true){}}', 'while(true){} function f(a,b){return a*3+b}']) {
      const { outcome, outputs, step } = await judge(code);
      assert.equal(outcome, 'ok');
      assert.deepEqual(
        outputs,
        inputs.map(() => ({ error: 'timeout' })),
      );
      assert.equal(step.reward, 0);
    }
    // A loop only on some inputs: the cases before it count.
    const some = await judge('function f(a,b){ if (a === 2) for(;;){} return a*3+b }');
    close(some.step.reward, 0.5);
  });

  test('hostile: reading a file, exiting the process, flooding the output, forging result lines pass nothing', async () => {
    const escape = 'this.constructor.constructor("return process")()';
    const read = await judge(
      `function f(){ return ${escape}.mainModule.require("fs").readFileSync("/etc/passwd", "utf8") }`,
    );
    assert.equal(read.step.reward, 0);
    const exit = await judge(`function f(){ ${escape}.exit(0) }`);
    assert.deepEqual([exit.outcome, exit.outputs[0]], ['ok', { error: 'missing' }]);
    assert.equal(exit.step.reward, 0);
    const flood = await judge(`function f(){ const p = ${escape}; for (;;) p.stdout.write("x".repeat(1000)) }`);
    assert.deepEqual([flood.outcome, flood.step.reward], ['output-limit', 0]);
    assert.deepEqual(flood.outputs[0], { error: 'output-limit' });
    // Lines claiming a result must still carry the right value: a forged "5" for every case passes only f(1,2).
    const forge = await judge(
      `function f(){ const p = ${escape}; for (let i = 0; i < 4; i++) p.stdout.write("@case " + i + ' {"value":"5"}\\n'); p.exit(0) }`,
    );
    close(forge.step.reward, 0.25);
  });

  test('a finished episode ignores further programs; no f read gives r_env 0', () => {
    const solved = stepCoding(START, { code: HAND.reference }).state;
    assert.deepEqual(stepCoding(solved, { code: 'function f(){return 0}' }).reward, 0);
    assert.deepEqual([stepCoding(START, null).reward, stepCoding(START, null).done], [0, false]);
    assert.throws(() => stepCoding(START, { code: 'function f(a,b){return b+a*3}' }), /sandbox/);
  });
});

describe('tester rewards: hand-made suites', () => {
  test('½·validity + ½·(mutants failed): full, wrong, mixed, out of the domain', () => {
    // f(1,2) == 5: right; a·2+b gives 4, a+b 3, a·b 2: all three mutants fail it.
    assert.deepEqual(scoreTester(HAND, parseTestCases('f(1,2) == 5')!), {
      valid: [true],
      validity: 1,
      killRate: 1,
      reward: 1,
    });
    assert.equal(scoreTester(HAND, parseTestCases('f(1,2) == 3')!).reward, 0, 'a wrong expectation fails nothing');
    // f(0,4) == 4 is right but only a·b (0) fails it; f(1,1) == 5 is wrong (4).
    const mixed = scoreTester(HAND, parseTestCases('f(0,4) == 4\nf(1,1) == 5')!);
    assert.deepEqual(mixed.valid, [true, false]);
    close(mixed.reward, 0.5 * 0.5 + 0.5 / 3);
    const outside = scoreTester(HAND, parseTestCases('f("x",1) == 1\nf(1e9,2) == 3000000002\nf(1) == 3')!);
    assert.deepEqual(outside.valid, [false, false, false], 'wrong kinds, too large, wrong arity: never evaluated');
  });

  test('hostile or malformed suites: code is never a case; at most 8 cases are read', () => {
    for (const text of [
      'require("fs").readFileSync("/etc/passwd")',
      'while (true) {}',
      'process.exit(0)',
      'f(1,2) == five',
      'I think f adds things',
    ])
      assert.equal(parseTestCases(text), null, text);
    assert.equal(parseTestCases('f(1,2)===5;\nnoise\nf(0,4) == 4')!.length, 2);
    const flood = Array.from({ length: 5000 }, () => 'f(1,2) == 5').join('\n');
    assert.equal(parseTestCases(flood)!.length, MAX_TESTER_CASES);
  });
});

describe('the coding workflow', () => {
  /** A policy answering from a queue per role (the role is read from the prompt's "[role]" prefix). */
  function scripted(queues: Record<string, string[]>) {
    const prompts: string[] = [];
    const policy: Policy = {
      generate: async (ps) => {
        prompts.push(...ps);
        const role = /^\[(\w+)\]/.exec(ps[0]!)![1]!;
        return ps.map(() => ({ text: queues[role]!.shift()!, finishReason: 'stop' }));
      },
    };
    return { policy, prompts };
  }

  test('registered: tester then coder; the single-agent baseline is the coder alone', () => {
    assert.deepEqual(
      buildWorkflow({ name: 'coding' }).roles.map((r) => r.name),
      ['tester', 'coder'],
    );
    assert.deepEqual(
      buildWorkflow({ name: 'coding', sampling: 'single' }).roles.map((r) => r.name),
      ['coder'],
    );
  });

  test('hand-worked tree step: tester rewards and team term, the coder sees the chosen cases, runs in the sandbox', async () => {
    const { policy, prompts } = scripted({
      tester: ['f(1,2) == 3', 'f(1,2) == 5', 'no tests'],
      // Not a canonical program's text, so it runs in the sandbox.
      coder: ['function f(a, b) { return 2 * a + b }', HAND.reference, 'return a*3+b'],
    });
    const { samples, episodes } = await treeRollout(handWorkflow(), {
      seeds: [0],
      groupSize: 3,
      policies: { shared: policy },
    });
    const tester = samples.filter((s) => s.role === 'tester');
    const coder = samples.filter((s) => s.role === 'coder');
    // Tester own: 0 (wrong), 1 (right, fails all mutants), −1 (nothing parsed); team: the chosen coder's pass rate 1.
    assert.deepEqual(
      tester.map((s) => [s.own, s.team, s.chosen]),
      [
        [0, 1, false],
        [1, 1, true],
        [-1, 1, false],
      ],
    );
    // Coder own 2·pass rate: 2·a+b 1 of 4; the reference 4 of 4; no f defined: −1.
    assert.deepEqual(
      coder.map((s) => [s.own, s.parsed, s.sandbox]),
      [
        [0.5, true, 'ok'],
        [2, true, 'ok'],
        [-1, false, null],
      ],
    );
    const coderPrompt = prompts.find((p) => p.startsWith('[coder]'))!;
    assert.match(coderPrompt, /The tester's cases:\nf\(1,2\) == 5\n/);
    assert.match(coderPrompt, /a times 3 plus b/);
    assert.equal(episodes[0]!.success, true);
  });

  test('validation counts sandbox outcomes per role: a right, a looping and a flooding program on held-out instances', async () => {
    const config = parseWorkflowConfig({ name: 'coding', maxTurns: 1, sandbox: { timeoutMs: 1000 } });
    const wf = { ...buildWorkflow(config), env: { ...buildWorkflow(config).env, reset: () => START } };
    const { policy } = scripted({
      tester: Array<string>(3).fill('f(1,2) == 5'),
      coder: [
        'function f(a, b) { return 3 * a + b }',
        'function f(){for(;;){}}',
        'function f(){ const p = this.constructor.constructor("return process")(); for (;;) p.stdout.write("x") }',
      ],
    });
    const spec = AgentSpecSchema.parse({ hidden: 32, layers: 1, heads: 2 });
    const { model, tokenizer } = await workflowAgent(wf, spec, WarmStartSchema.parse({}), 0, engine());
    const source = new WorkflowSource(
      wf,
      config,
      new Map([['shared', { agent: { name: 'shared', model, tokenizer }, policy }]]),
      {
        instancesPerStep: 1,
        seed: 0,
        episodesLogged: 0,
      },
    );
    const [v] = await source.validate({ problems: 3, samplesPerProblem: 0, seed: 0 });
    assert.equal(v!.metrics['val/coding/greedy'], 1 / 3);
    const coder = Object.fromEntries(
      Object.entries(v!.counts!).filter(([k]) => k.startsWith('heldout/coding/role/coder/')),
    );
    // The flooding program is stopped by whichever limit it reaches first: the output cap, (its buffered output
    // growing) the memory limit, or on a loaded machine the 1 s timeout — which one depends on scheduling, so the
    // test accepts any one of them, never two.
    const limits = ['output-limit', 'memory', 'timeout'].map((o) => `heldout/coding/role/coder/sandbox_${o}`);
    assert.equal(
      limits.reduce((n, k) => n + coder[k]!, 0),
      1,
      JSON.stringify(coder),
    );
    assert.deepEqual(
      { ...coder, ...Object.fromEntries(limits.map((k) => [k, 0])) },
      {
        // A loop inside f is the harness's per-case timeout: the program itself ends 'ok' (see the looping test).
        'heldout/coding/role/coder/sandbox_ok': 2,
        'heldout/coding/role/coder/sandbox_error': 0,
        'heldout/coding/role/coder/sandbox_timeout': 0,
        'heldout/coding/role/coder/sandbox_memory': 0,
        'heldout/coding/role/coder/sandbox_output-limit': 0,
        'heldout/coding/role/coder/sandbox_denied': 0,
      },
    );
  });

  test("the coder's feedback counts the tester's cases it passes and says nothing of the hidden ones", async () => {
    const wf = handWorkflow();
    const coder = wf.roles.find((r) => r.name === 'coder')!;
    const withCases = { ...START, cases: parseTestCases('f(0,4) == 4\nf(1,1) == 9')! };
    const act = await coder.act(episode(withCases), 'function f(a,b){return a*2+b}');
    assert.equal(act.feedback, "passes 1 of 2 of the tester's cases");
    assert.equal(act.envReward, 0.25, 'its reward is still the hidden pass rate (1 of 4)');
    const loop = await coder.act(episode(withCases), 'function f(){for(;;){}}');
    assert.equal(loop.own, 0);
  });

  test('warm-start rows: a policy replaying them solves every instance; detours reach a second turn', async () => {
    const wf = buildWorkflow({ name: 'coding', maxTurns: 2 });
    const rows = await warmStartRows(wf, { count: 12, seed: 100 });
    assert.deepEqual(
      rows.map((r) => r.role),
      Array.from({ length: 12 }, (_, i) => (i % 2 ? 'coder' : 'tester')),
    );
    assert.match(rows[1]!.response, /^function f\(/);
    assert.match(rows[0]!.response, /^f\(.*\) == /);
    const answer = new Map(rows.map((r) => [r.prompt, r.response]));
    const teacher: Policy = {
      generate: async (prompts) => prompts.map((p) => ({ text: answer.get(p) ?? 'missing row' })),
    };
    const seeds = [100, 101, 102, 103, 104, 105];
    const { episodes } = await treeRollout(wf, { seeds, groupSize: 1, policies: { shared: teacher } });
    assert.deepEqual(
      episodes.map((e) => e.success),
      seeds.map(() => true),
    );
    const detoured = await warmStartRows(wf, { count: 8, seed: 200, detour: 1 });
    assert.ok(
      detoured.some((r) => r.turn === 1),
      'detours reach a second turn',
    );
  });

  test('coder first (agents coder, tester): a detoured first program is a mutant worked out without a run, revised in turn 2', async () => {
    const wf = buildWorkflow({ name: 'coding', maxTurns: 2, agents: ['coder', 'tester'] });
    assert.deepEqual(
      wf.roles.map((r) => r.name),
      ['coder', 'tester'],
    );
    const coder = wf.roles.find((r) => r.name === 'coder')!;
    const st = startEpisode(wf, 400);
    const task = (st.env as CodingState).task;
    const wrong = coder.detour!(st, 7)!;
    assert.equal(wrong, mutantProgram(task, 7));
    const outputs = knownOutputs(
      wrong,
      task.hidden.map((c) => c.args),
    );
    assert.ok(outputs !== null, 'a canonical program: no sandbox run');
    assert.ok(passRate(task.hidden, outputs) < 1, 'the mutant fails a hidden case');
    const act = await coder.act(st, wrong);
    assert.equal(act.success, false);
    assert.equal(act.feedback, 'no tester cases', 'acting first, the coder has seen no case');
    const rows = await warmStartRows(wf, { count: 30, seed: 400, detour: 1 });
    // Detour 1: every first program is a mutant and every first suite a mutant's, so each episode is coder, tester,
    // coder, and the second program (the solver's) is taught after the wrong ones.
    assert.deepEqual(
      rows.slice(0, 3).map((r) => [r.role, r.turn]),
      [
        ['coder', 0],
        ['tester', 0],
        ['coder', 1],
      ],
    );
    for (const row of rows.filter((r) => r.role === 'coder' && r.turn === 1)) {
      const seed = Number(row.instance.split(':')[1]);
      const t = (startEpisode(wf, seed).env as CodingState).task;
      assert.equal(row.response, t.reference);
      assert.ok(row.prompt.includes(`turn 1 coder: ${mutantProgram(t, seed)}`), row.prompt);
    }
  });

  test("detourLastTurn: in one turn the coder's rows see another task's cases and still teach this task's f", async () => {
    const wf = buildWorkflow({ name: 'coding', maxTurns: 1 });
    const tester = wf.roles.find((r) => r.name === 'tester')!;
    const plain = await warmStartRows(wf, { count: 40, seed: 300, detour: 1 });
    const detoured = await warmStartRows(wf, { count: 40, seed: 300, detour: 1, detourLastTurn: true });
    assert.deepEqual(plain, await warmStartRows(wf, { count: 40, seed: 300 }), 'one turn: no detour without it');
    assert.deepEqual(
      detoured.map((r) => [r.role, r.instance, r.response]),
      plain.map((r) => [r.role, r.instance, r.response]),
      'the same instances and the same solver answers are taught',
    );
    const coderRows = detoured.filter((r) => r.role === 'coder');
    const own = (row: WarmStartRow): string => {
      const st = startEpisode(wf, Number(row.instance.split(':')[1]));
      return tester.expert(st)!;
    };
    // With detour 1 every applied tester answer is a mutant's cases (wrong about f); without it, the task's own.
    assert.ok(coderRows.length >= 15);
    for (const row of coderRows) {
      const seed = Number(row.instance.split(':')[1]);
      const task = (startEpisode(wf, seed).env as CodingState).task;
      const wrong = mutantSuite(task, seed);
      assert.ok(row.prompt.includes(formatCases(wrong)) && !row.prompt.includes(own(row)), row.prompt);
      assert.ok(scoreTester(task, wrong).validity < 1, 'some case fails the reference');
    }
    for (const row of plain.filter((r) => r.role === 'coder')) assert.ok(row.prompt.includes(own(row)), row.prompt);
  });
});

const root = await mkdtemp(join(tmpdir(), 'hacrl-coding-'));
after(() => rm(root, { recursive: true, force: true }));

describe('the command line', () => {
  const workflow = JSON.stringify({ name: 'coding', maxTurns: 1, groupSize: 2 });

  test('mas warmstart, mas rollout and an at-grpo training step accept the coding workflow', async () => {
    const agent = join(root, 'agent');
    const tiny = ['--hidden', '32', '--layers', '1', '--heads', '2'];
    const warm = hacrl([
      'mas',
      'warmstart',
      '--out',
      agent,
      '--workflow',
      workflow,
      '--steps',
      '2',
      '--rows',
      '16',
      '--batch-size',
      '4',
      ...tiny,
    ]);
    assert.equal(warm.status, 0, warm.stderr);
    const { summary } = await runMasRollout({
      workflow: JSON.parse(workflow),
      instances: 2,
      models: { shared: agent },
    });
    assert.equal(summary.workflow, 'coding');
    assert.deepEqual(Object.keys(summary.roles), ['tester', 'coder']);
    const run = join(root, 'run');
    const train = hacrl([
      'train',
      '--set',
      'algorithm=at-grpo',
      'agents.0.name=shared',
      `agents.0.checkpoint=${agent}`,
      `workflow=${workflow}`,
      'rollout.promptsPerStep=2',
      'steps=1',
      'eval.every=0',
      'eval.problems=2',
      `runDir=${run}`,
    ]);
    assert.equal(train.status, 0, train.stderr);
    assert.match(train.stdout, /coding/);
  });
});
