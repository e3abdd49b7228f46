// AT-GRPO trained through the one learner pipeline: a tiny per-role run end to end through the CLI (agents from
// `hacrl mas warmstart`, different model families), metrics per role and turn, episodes turn by turn, a SIGKILL'd
// per-role run resumed to byte-identical weights for every policy, and a run whose tool agent's programs loop or
// flood their output that keeps training.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import { AdamW } from '../src/optim/adamw.js';
import { buildReport } from '../src/report/build.js';
import { AgentSpecSchema } from '../src/model/agent-spec.js';
import { parseRunConfig } from '../src/config/load-config.js';
import { learnerStep } from '../src/train/learner-step.js';
import { resolveRun } from '../src/train/resolved-run.js';
import { WarmStartSchema, workflowAgent } from '../src/agents/workflow-agent.js';
import { WorkflowSource } from '../src/train/workflow-source.js';
import type { BenchMasResult } from '../src/experiments/mas.js';
import { learnerView, type SampleRecord } from '../src/train/sample-table.js';
import { Rng } from '../src/util/rng.js';
import { modelPolicy } from '../src/workflows/model-policy.js';
import type { Policy } from '../src/workflows/policy.js';
import { buildWorkflow } from '../src/workflows/registry.js';
import { parseWorkflowConfig } from '../src/workflows/workflow-config.js';
import { assertSameCheckpoint, hacrl, hacrlKilledAt, metricRows } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-atgrpo-'));
after(() => rm(root, { recursive: true, force: true }));

const WORKFLOW = {
  name: 'plan-path',
  env: { height: 4, width: 4, wallProb: 0.1, maxShortest: 3 },
  maxTurns: 2,
  groupSize: 2,
  roles: { tool: { policy: 'tool', maxNewTokens: 12 }, planner: { policy: 'planner', maxNewTokens: 12 } },
};
const TINY = ['--hidden', '32', '--layers', '1', '--heads', '2'];
const agentDir = (name: string): string => join(root, 'agents', name);

/** Overrides of a per-role AT-GRPO run in `runDir`. */
function runArgs(runDir: string, extra: string[] = []): string[] {
  return [
    'train',
    '--set',
    'algorithm=at-grpo',
    `agents.0.name=tool`,
    `agents.0.checkpoint=${agentDir('tool')}`,
    `agents.1.name=planner`,
    `agents.1.checkpoint=${agentDir('planner')}`,
    `workflow=${JSON.stringify(WORKFLOW)}`,
    'rollout.promptsPerStep=2',
    'optim.lr=0.002',
    'eval.every=0',
    'eval.problems=3',
    'samplesPerStep=1',
    `runDir=${runDir}`,
    ...extra,
  ];
}

const weights = (runDir: string, agent: string, step: number): Promise<Buffer> =>
  readFile(join(runDir, 'checkpoints', `step-${String(step).padStart(6, '0')}`, 'agents', agent, 'model.safetensors'));

describe('AT-GRPO training', () => {
  before(() => {
    // The tool agent: qwen3, 3 warm-start steps on its own solver rows; the planner: GPT-2, untrained.
    const wf = JSON.stringify(WORKFLOW);
    for (const [name, flags] of [
      ['tool', ['--steps', '3', '--role', 'tool', '--batch-size', '4']],
      ['planner', ['--arch', 'gpt2']],
    ] as const) {
      const r = hacrl(['mas', 'warmstart', '--out', agentDir(name), '--workflow', wf, ...TINY, ...flags]);
      assert.equal(r.status, 0, r.stderr);
    }
  });

  test('a tiny per-role run through the CLI: metrics per policy, role and turn, episodes turn by turn, weights move', async () => {
    const runDir = join(root, 'e2e');
    const r = hacrl(runArgs(runDir, ['steps=2']));
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /step 2 workflow {2}val plan-path [0-9.]+%/);
    const all = await metricRows(runDir);
    assert.deepEqual(
      all.map((x) => `${x.step as number}:${x.agent as string}`),
      ['0:tool', '0:planner', '1:tool', '1:planner', '2:tool', '2:planner'],
    );
    // Step 0 is the base policies' team success on held-out instances, the same for both policies.
    assert.equal(all[0]!['val/plan-path/greedy'], all[1]!['val/plan-path/greedy']);
    const rows = all.filter((x) => x.step !== 0);
    for (const row of rows) {
      const role = row.agent as string; // per-role: each policy plays the role of its name
      assert.equal(row.group_size_min, 2, 'groups of K = 2');
      assert.equal(row.groups_dropped_low_mean, Math.floor((row.groups as number) / 2), 'default filter: half');
      assert.equal(row.samples_trained, 2 * (row.groups_kept as number));
      assert.equal(row[`role/${role}/samples`], row.samples, 'a per-role policy only sees its role');
      assert.ok(typeof row[`role/${role}/t0/reward_mean`] === 'number', 'turn 0 metrics');
      assert.ok(typeof row[`role/${role}/parse_failures`] === 'number');
      assert.ok(Number.isFinite(row.loss), `loss of ${role}`);
    }
    const samples = (await readFile(join(runDir, 'samples.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const first = samples.filter((s) => s.step === 1);
    assert.equal(new Set(first.map((s) => s.episode)).size, 1, 'samplesPerStep episodes');
    assert.deepEqual(
      first.slice(0, 2).map((s) => [s.role, s.turn, s.agent]),
      [
        ['tool', 0, 'tool'],
        ['planner', 0, 'planner'],
      ],
    );
    for (const a of ['tool', 'planner'])
      assert.ok(!(await weights(runDir, a, 2)).equals(await readFile(join(agentDir(a), 'model.safetensors'))), a);
    // The report: per-role panels and the episode turn by turn.
    const html = await buildReport([runDir]);
    for (const title of ['Success rate per role', 'Reward per role and turn', 'Groups and the group filter'])
      assert.ok(html.includes(title), title);
    assert.match(html, /Workflow episodes, turn by turn/);
    assert.match(html, /plan-path:\d+#0 turn 0/);
    assert.match(html, /tool → tool/);
  });

  test('a per-role run killed with SIGKILL and resumed ends with byte-identical weights for every policy', async () => {
    const args = (d: string): string[] => runArgs(d, ['steps=4', 'checkpoint.every=1', 'checkpoint.keepLast=10']);
    const whole = join(root, 'whole');
    assert.equal(hacrl(args(whole)).status, 0);
    const killed = join(root, 'killed');
    await hacrlKilledAt(args(killed), join(killed, 'checkpoints', 'step-000002', 'state.json'));
    assert.ok(!existsSync(join(killed, 'checkpoints', 'step-000004')), 'killed before the end');
    const resumed = hacrl([...args(killed), '--resume']);
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stdout, /resuming .* from step [2-3]/);
    for (const a of ['tool', 'planner'])
      assert.ok((await weights(killed, a, 4)).equals(await weights(whole, a, 4)), `${a}: final weights`);
    await assertSameCheckpoint(killed, whole, 4, ['tool', 'planner']);
    assert.deepEqual(await metricRows(killed), await metricRows(whole));
    assert.equal(
      await readFile(join(killed, 'samples.jsonl'), 'utf8'),
      await readFile(join(whole, 'samples.jsonl'), 'utf8'),
    );
  });

  test('hacrl bench mas --tiny --ablations: five arms and four ablations on held-out instances, warm starts beside them (plan-path, math-tool)', async () => {
    // A folder an earlier bench made: the bench clears only the uncached warm-start folders of older versions; seed
    // folders stay (each arm reads or replaces its own result).
    const made = join(root, 'bench', 'plan-path');
    await mkdir(join(made, 'seed-7'), { recursive: true });
    await mkdir(join(made, 'warm-workflow'), { recursive: true });
    await writeFile(join(made, '.hacrl-bench-mas'), '');
    await writeFile(join(made, 'notes.txt'), 'kept');
    // The tiny bench on one work folder, its results also written to `json`.
    const benchTiny = (args: string[], json: string) =>
      hacrl(['bench', 'mas', '--tiny', ...args, '--work-dir', join(root, 'bench'), '--json', json]);
    const json = join(root, 'bench.json');
    const r = benchTiny(['--seeds', '1', '--ablations'], json);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(existsSync(join(made, 'warm-workflow')), false);
    assert.equal(existsSync(join(made, 'seed-7')), true);
    assert.equal(await readFile(join(made, 'notes.txt'), 'utf8'), 'kept');
    const all = r.stdout.split('\n').filter((l) => l.startsWith('| plan-path |'));
    const rows = all.slice(0, 9);
    const cells = rows.map((l) => l.split('|').map((c) => c.trim()));
    assert.deepEqual(
      cells.map((c) => c[2]),
      [
        'single-untrained',
        'single-grpo',
        'workflow-untrained',
        'at-grpo-shared',
        'at-grpo-per-role',
        'grouping-agent',
        'grouping-turn',
        'no-tree',
        'group-filter-flipped',
      ],
    );
    for (const l of rows)
      assert.match(l, /\| \d+\.\d \| \d+\.\d–\d+\.\d \| \d+\.\d \|/, 'success, interval, warm start');
    // Every arm shows the held-out success of the warm start it began from: its own untrained arm's.
    for (const c of cells) assert.equal(c[5], c[2]!.startsWith('single-') ? cells[0]![3] : cells[2]![3], c[2]);
    const budget = cells.map((c) => c[7]!);
    assert.equal(budget[0], '—');
    assert.equal(budget[2], '—');
    assert.ok(
      [1, 3, 4, 5, 6, 7, 8].every((i) => Number(budget[i]) > 0),
      budget.join(','),
    );
    // Paired differences of each trained arm against both untrained starts and the trained single agent.
    const paired = all.slice(9, 12).map((l) => l.split('|').map((c) => c.trim()));
    assert.deepEqual(
      paired.map((c) => c[2]),
      ['single-grpo', 'at-grpo-shared', 'at-grpo-per-role'],
    );
    const diff = /^[+−]\d+\.\d \[[+−]\d+\.\d, [+−]\d+\.\d\]$/;
    for (const c of paired) [3, 4].forEach((i) => assert.match(c[i]!, diff));
    assert.equal(paired[0]![5], '—');
    for (const c of paired.slice(1)) assert.match(c[5]!, diff);
    // Where each warm start stopped: the tiny band is 20–40% checked every step, at most 2 steps.
    const warm = all.slice(12, 14).map((l) => l.split('|').map((c) => c.trim()));
    assert.deepEqual(
      warm.map((c) => [c[2], c[4]]),
      [
        ['workflow', '20.0–40.0'],
        ['single', '20.0–40.0'],
      ],
    );
    // Held-out success of each warm start beside its calibration success: the untrained arms' numbers.
    assert.deepEqual(
      warm.map((c) => c[7]),
      [cells[2]![3], cells[0]![3]],
    );
    // Each ablation against at-grpo-shared; the tiny size's filter is the spec's, so the flipped one is off.
    const ablations = all.slice(16).map((l) => l.split('|').map((c) => c.trim()));
    assert.deepEqual(
      ablations.map((c) => [c[2], c[4]]),
      [
        ['grouping-agent', '1'],
        ['grouping-turn', '1'],
        ['no-tree', '1'],
        ['group-filter-flipped (lowMeanRatio 0)', '1'],
      ],
    );
    for (const c of ablations) assert.match(c[3]!, diff);
    const results = JSON.parse(await readFile(json, 'utf8')) as BenchMasResult[];
    const result = results[0]!;
    assert.equal(result.arms['at-grpo-shared']!.warmStart, result.arms['workflow-untrained'].pooled.value);
    // The verdict of each AT-GRPO arm, read from its paired intervals and per-seed successes.
    const verdicts = all.slice(14, 16).map((l) => l.split('|').map((c) => c.trim()));
    const verdictOf = (arm: 'at-grpo-shared' | 'at-grpo-per-role'): string[] => {
      const d = result.paired[arm]!;
      const gain = Math.min(...result.arms[arm]!.perSeed) - result.arms[arm]!.warmStart;
      const points = `${gain >= 0 ? '+' : '−'}${Math.abs(100 * gain).toFixed(1)}`;
      return [arm, d['workflow-untrained']!.low > 0 ? 'yes' : 'no', d['single-grpo']!.low > 0 ? 'yes' : 'no', points];
    };
    assert.deepEqual(
      verdicts.map((c) => c.slice(2, 6)),
      [verdictOf('at-grpo-shared'), verdictOf('at-grpo-per-role')],
    );
    // The math-tool family has its rows: five arms, four ablations, two warm starts, two verdicts, in table and JSON.
    const math = r.stdout.split('\n').filter((l) => l.startsWith('| math-tool |'));
    assert.equal(math.length, 9 + 3 + 2 + 2 + 4, math.join('\n'));
    assert.deepEqual(
      results.map((x) => x.workflow),
      ['plan-path', 'math-tool'],
    );
    assert.deepEqual(Object.keys(results[1]!.arms), [...Object.keys(result.arms)]);
    // Each warm start: steps where the rule stopped, its calibration success on the right side of the band.
    for (const x of results)
      for (const w of [x.warmStarts.workflow, x.warmStarts.single]) {
        assert.deepEqual(w.band, { low: 0.2, high: 0.4 });
        assert.equal(w.cached, false);
        assert.deepEqual(
          w.curve.map((p) => p.steps),
          Array.from({ length: w.curve.length }, (_, i) => i + 1),
          'one evaluation per 1-step chunk',
        );
        assert.equal(w.steps, w.curve.at(-1)!.steps);
        assert.equal(w.calibration, w.curve.at(-1)!.success);
        const inside = w.calibration! >= 0.2 && w.calibration! <= 0.4;
        assert.equal(w.outcome, inside ? 'in-band' : w.calibration! > 0.4 ? 'above' : 'below');
        if (w.outcome === 'below') assert.equal(w.steps, 2, 'a miss trains to the most steps');
        // --tiny tries twice when the first try misses; the kept try is one of them, as listed.
        assert.equal(w.attempts!.length, w.attempts![0]!.outcome === 'in-band' ? 1 : 2);
        assert.deepEqual(w.attempts![w.attempt! - 1], {
          steps: w.steps,
          calibration: w.calibration,
          outcome: w.outcome,
        });
      }
    assert.equal(result.warmStarts.workflow.heldOut, result.arms['workflow-untrained'].pooled.value);
    assert.equal(result.warmStarts.single.heldOut, result.arms['single-untrained'].pooled.value);
    assert.deepEqual(Object.keys(result.ablations), [
      'grouping-agent',
      'grouping-turn',
      'no-tree',
      'group-filter-flipped',
    ]);
    // The ablations' runs trained with the knob they name.
    const resolved = async (arm: string) =>
      JSON.parse(await readFile(join(root, 'bench', 'plan-path', 'seed-0', arm, 'config.resolved.json'), 'utf8')) as {
        workflow: { grouping: string; sampling: string; groupFilter: { lowMeanRatio: number } };
      };
    assert.equal((await resolved('grouping-agent')).workflow.grouping, 'agent');
    assert.equal((await resolved('grouping-turn')).workflow.grouping, 'turn');
    assert.equal((await resolved('no-tree')).workflow.sampling, 'no-tree');
    assert.equal((await resolved('group-filter-flipped')).workflow.groupFilter.lowMeanRatio, 0);
    assert.equal((await resolved('at-grpo-shared')).workflow.groupFilter.lowMeanRatio, 0.5);
    // Each run's metrics stay in the working folder; its checkpoints and the warm starts do not.
    const seedDir = join(root, 'bench', 'plan-path', 'seed-0');
    for (const arm of ['single-grpo', 'at-grpo-shared', 'at-grpo-per-role']) {
      assert.ok(
        (await metricRows(join(seedDir, arm))).some((r) => r['step'] === 1),
        arm,
      );
      assert.equal(existsSync(join(seedDir, arm, 'checkpoints')), false, arm);
    }
    assert.equal(existsSync(join(root, 'bench', 'plan-path', 'warm-workflow')), false);
    // The warm starts stay in the cache: a second bench on the same folder reads them instead of training, and
    // lands where the first did.
    const json2 = join(root, 'bench2.json');
    const again = benchTiny(
      ['--seeds', '1', '--only', 'math-tool', '--ablations', 'grouping-turn,grouping-agent'],
      json2,
    );
    assert.equal(again.status, 0, again.stderr);
    assert.match(
      again.stdout,
      /\| math-tool \| workflow \| \d+ \| 20\.0–40\.0 \| \d+\.\d \| \w[\w-]*( \(attempt \d of 2: [^)]*\))? \(cached\) \|/,
    );
    const cached = (JSON.parse(await readFile(json2, 'utf8')) as BenchMasResult[])[0]!;
    for (const which of ['workflow', 'single'] as const)
      assert.deepEqual(cached.warmStarts[which], { ...results[1]!.warmStarts[which], cached: true }, which);
    // Listed ablations only, in the bench's order whatever the list's, read back with the first run's values.
    assert.deepEqual(cached.ablations, {
      'grouping-agent': results[1]!.ablations['grouping-agent'],
      'grouping-turn': results[1]!.ablations['grouping-turn'],
    });
    assert.equal(cached.flippedLowMeanRatio, undefined);
    assert.deepEqual(
      again.stdout
        .split('\n')
        .filter((l) => /^\| math-tool \| grouping-/.test(l))
        .map((l) => l.split('|')[2]!.trim()),
      ['grouping-agent', 'grouping-turn', 'grouping-agent', 'grouping-turn'],
      'each listed ablation in the arms table and the ablation table',
    );
    // --seeds 0: the warm starts only (read back here), played on the held-out instances; no RL, nothing paired.
    const json3 = join(root, 'bench3.json');
    const warmOnly = benchTiny(['--seeds', '0', '--only', 'math-tool'], json3);
    assert.equal(warmOnly.status, 0, warmOnly.stderr);
    const only = (JSON.parse(await readFile(json3, 'utf8')) as BenchMasResult[])[0]!;
    assert.deepEqual(only.seeds, []);
    assert.deepEqual(Object.keys(only.arms), ['single-untrained', 'workflow-untrained']);
    assert.deepEqual(only.arms['workflow-untrained'], { ...results[1]!.arms['workflow-untrained'], perSeed: [] });
    assert.deepEqual(only.warmStarts, cached.warmStarts);
    assert.deepEqual([only.paired, only.ablations], [{}, {}]);
    assert.doesNotMatch(warmOnly.stdout, /Paired differences|Does AT-GRPO lift|seed \d/);
    assert.match(warmOnly.stdout, /\| math-tool \| single \| \d+ \| 20\.0–40\.0 \|/);
  });

  test('workflow.teamBranches reaches training: later roles act in every branch, so the samples change', async () => {
    const run = async (teamBranches: boolean, name: string) => {
      const runDir = join(root, `team-branches-${name}`);
      const workflow = `workflow=${JSON.stringify({ ...WORKFLOW, teamBranches })}`;
      const args = runArgs(runDir, ['steps=1', 'samplesPerStep=2']).map((a) =>
        a.startsWith('workflow=') ? workflow : a,
      );
      const r = hacrl(args);
      assert.equal(r.status, 0, r.stderr);
      return (await readFile(join(runDir, 'samples.jsonl'), 'utf8')).trim().split('\n');
    };
    const off = await run(false, 'off');
    // The same run twice gives the same samples; with branches the planner also answers in every non-chosen tool
    // branch (scoring the tool's team terms there), so what it samples afterwards differs.
    assert.deepEqual(await run(false, 'off-again'), off);
    assert.notDeepEqual(await run(true, 'on'), off);
  });

  test('steps whose every group the filter drops make no update and do not stop the run as non-finite', async () => {
    // The untrained GPT-2 agent plays both roles: no response parses, so every group's rewards are equal and the
    // learner's zero-variance filter drops them all; more such steps than maxNonFiniteSteps (3) must still finish.
    const runDir = join(root, 'all-filtered');
    const wf = { ...WORKFLOW, groupFilter: { lowMeanRatio: 0 }, roles: {} };
    const r = hacrl([
      'train',
      '--set',
      'algorithm=at-grpo',
      'agents.0.name=shared',
      `agents.0.checkpoint=${agentDir('planner')}`,
      `workflow=${JSON.stringify(wf)}`,
      'rollout.promptsPerStep=2',
      'optim.filterZeroVariance=true',
      'steps=4',
      'eval.every=0',
      'eval.problems=2',
      `runDir=${runDir}`,
    ]);
    assert.equal(r.status, 0, r.stderr);
    const rows = (await metricRows(runDir)).filter((x) => x.step !== 0);
    assert.deepEqual(
      rows.map((x) => [x.step, x.zero_var_groups_frac, x.samples_trained === x.samples, 'loss' in x]),
      [1, 2, 3, 4].map((s) => [s, 1, true, false]),
    );
  });

  test('config errors name what to change', async () => {
    const noWorkflow = hacrl(['train', '--set', 'algorithm=at-grpo', 'agents.0.name=a', 'agents.0.checkpoint=x']);
    assert.notEqual(noWorkflow.status, 0);
    assert.match(noWorkflow.stderr, /add a workflow section/);
    const runDir = join(root, 'bad-policy');
    const r = hacrl(runArgs(runDir, ['steps=1', 'agents.1.name=reasoner']));
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /role "planner" is played by policy "planner", which is not an agent of the run/);
  });

  test('a shared-policy run whose tool programs loop and flood their output keeps training', async () => {
    const k = engine();
    const config = parseWorkflowConfig({
      name: 'math-tool',
      env: {},
      maxTurns: 1,
      groupSize: 2,
      sandbox: { timeoutMs: 1500, maxOutputBytes: 4096 },
      groupFilter: { lowMeanRatio: 0 },
      roles: { reasoner: { maxNewTokens: 8 } },
    });
    const wf = buildWorkflow(config);
    const spec = AgentSpecSchema.parse({ hidden: 32, layers: 1, heads: 2 });
    const { model, tokenizer } = await workflowAgent(wf, spec, WarmStartSchema.parse({}), 0, k);
    const agent = { name: 'shared', model, tokenizer };
    const real = modelPolicy(model, tokenizer, k, new Rng(1));
    // The tool agent's "model" writes a loop, a flood of output, and a correct-looking program in turn.
    const programs = ['while (true) {}', 'for (;;) console.log("x".repeat(1000))', 'console.log(1 + 1)'];
    let call = 0;
    const scripted: Policy = {
      generate: (prompts, s) =>
        prompts[0]!.startsWith('[tool]')
          ? Promise.resolve(prompts.map(() => ({ text: programs[call++ % programs.length]!, finishReason: 'stop' })))
          : real.generate(prompts, s),
    };
    const source = new WorkflowSource(wf, config, new Map([['shared', { agent, policy: scripted }]]), {
      instancesPerStep: 2,
      seed: 0,
      episodesLogged: 1,
    });
    const optimizer = new AdamW(model.params, { lr: 1e-3, weightDecay: 0 });
    const recipe = resolveRun(
      parseRunConfig({ algorithm: 'at-grpo', agents: [{ name: 'shared', checkpoint: 'x' }], workflow: {} }),
    ).recipe;
    // The spec's update: PPO clip ε 0.2 both ways, token-mean, (r − mean)/(std + 1e-6) per group, no KL, 1 epoch.
    assert.deepEqual(
      [recipe.clip, recipe.aggregation, recipe.advantage, recipe.kl, recipe.epochs, recipe.miniBatches, recipe.sharing],
      [{ low: 0.2, high: 0.2 }, 'token-mean', 'group-std', null, 1, 4, 'none'],
    );
    const learner = {
      policy: agent,
      local: true,
      optimizer,
      reference: null,
      lr: 1e-3,
      alpha: 0,
      stepwise: { delta: 0.2, deltaStep: 0 },
      order: 'shuffled' as const,
    };
    const outcomes: Record<string, number> = {};
    for (let step = 0; step < 2; step++) {
      const table: SampleRecord[] = [];
      const m = (await source.collect({ k, step }, table)).get('shared')!;
      for (const [key, v] of Object.entries(m))
        if (/^role\/tool\/sandbox_/.test(key)) outcomes[key] = (outcomes[key] ?? 0) + v;
      const view = learnerView(table, agent, new Map([[agent.name, agent]]), false);
      const r = learnerStep(table, view, learner, [learner.policy.name], recipe, [NaN], k, new Rng(step));
      assert.equal(r.skippedUpdates, 0);
      assert.ok(Number.isFinite(r.metrics.loss), 'a finite update after sandbox failures');
    }
    assert.ok(outcomes['role/tool/sandbox_timeout']! >= 1, JSON.stringify(outcomes));
    assert.ok(outcomes['role/tool/sandbox_output-limit']! >= 1, JSON.stringify(outcomes));
    assert.ok(outcomes['role/tool/sandbox_ok']! >= 1, JSON.stringify(outcomes));
  });
});
