// Multi-agent workflows with scripted fake policies: tree sampling (scoring, greedy continuation, ties, team terms),
// the no-tree and single-agent baselines with their group keys, the registry and the workflow config.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PlanPathState } from '../src/envs/plan-path.js';
import type { Policy, SamplingSettings } from '../src/workflows/policy.js';
import { buildWorkflow, registerWorkflow, workflowNames } from '../src/workflows/registry.js';
import { groupSamples } from '../src/workflows/groups.js';
import { playStep } from '../src/workflows/play.js';
import { independentRollout, rollout, treeRollout } from '../src/workflows/tree-sampling.js';
import { parseWorkflowConfig } from '../src/workflows/workflow-config.js';
import type { Workflow } from '../src/workflows/workflow.js';

const close = (a: number, b: number, msg?: string): void =>
  assert.ok(Math.abs(a - b) < 1e-9, `${msg ?? ''} expected ${b}, got ${a}`);

/** 3×3 grid, wall in the centre, start top-left, goal bottom-right (shortest 4) — the envs test's hand instance. */
const HAND: PlanPathState = {
  instance: { id: 'plan-path:hand', rows: ['...', '.#.', '...'], start: [0, 0], goal: [2, 2], shortest: 4 },
  pos: [0, 0],
  validMoves: 0,
  atGoal: false,
};

/** The Plan-Path workflow of `config` playing the hand instance whatever the seed. */
function handWorkflow(config: Record<string, unknown> = {}): Workflow<unknown> {
  const wf = buildWorkflow({ name: 'plan-path', ...config });
  return { ...wf, env: { ...wf.env, reset: () => HAND } };
}

/** A policy answering from a queue per role (the role is read from the prompt's "[role]" prefix); logs calls. */
function scripted(queues: Record<string, string[]>) {
  const calls: { role: string; prompts: string[]; settings: SamplingSettings }[] = [];
  const policy: Policy = {
    generate: async (prompts, settings) => {
      const role = /^\[(\w+)\]/.exec(prompts[0]!)![1]!;
      calls.push({ role, prompts: [...prompts], settings });
      return prompts.map(() => {
        const text = queues[role]!.shift();
        if (text === undefined) throw new Error(`script for ${role} ran out`);
        return { text, finishReason: 'stop' };
      });
    },
  };
  return { policy, calls };
}

describe('tree sampling', () => {
  test('hand-worked: K candidates per role from one state, own rewards, best continues, team term equal in the group', async () => {
    const wf = handWorkflow();
    const { policy, calls } = scripted({
      tool: ['["R","R"]', 'no idea', '["D","D","R","R"]'],
      planner: ['["R"]', '["R"]', '["D","D","R","R"]'],
    });
    const { samples, episodes } = await treeRollout(wf, { seeds: [0], groupSize: 3, policies: { shared: policy } });
    assert.equal(samples.length, 6);
    assert.equal(calls.length, 2, 'one batch of K per role and turn');
    assert.equal(new Set(calls[0]!.prompts).size, 1, 'all K candidates see the same state');
    const tool = samples.filter((s) => s.role === 'tool');
    const planner = samples.filter((s) => s.role === 'planner');
    // Tool own = r_env(proposal on a copy): RR −0.02 + 1.03 + 1.02 = 2.03; unparsed −2; DDRR 5.52 (goal, optimal).
    close(tool[0]!.own, 2.03);
    close(tool[1]!.own, -2);
    assert.equal(tool[1]!.parsed, false);
    close(tool[2]!.own, 5.52);
    assert.deepEqual(
      tool.map((s) => s.chosen),
      [false, false, true],
    );
    // The planner saw the chosen proposal, and the state had not moved (a proposal is only simulated).
    assert.match(planner[0]!.prompt, /The tool says: \["D","D","R","R"\] \(simulated: reached the goal/);
    assert.match(planner[0]!.prompt, /You are at \(row 0, col 0\)/);
    // Planner own = 2·r_env: R 2·1.02; DDRR 2·5.52.
    close(planner[0]!.own, 2.04);
    close(planner[2]!.own, 11.04);
    // Team term of the tool: r_env of the planner's chosen action (5.52), the same for all 3: it cancels.
    for (const s of tool) close(s.team, 5.52);
    close(tool[1]!.reward, -2 + 5.52);
    for (const s of planner) assert.equal(s.team, 0);
    assert.deepEqual(
      [...new Set(samples.map((s) => s.group))],
      ['plan-path:hand|tool|t0', 'plan-path:hand|planner|t0'],
    );
    const { returns, ...episode } = episodes[0]!;
    assert.deepEqual(episode, { instance: 'plan-path:hand', seed: 0, episode: 0, turns: 1, success: true });
    close(returns['tool']!, 5.52 + 5.52);
    close(returns['planner']!, 11.04);
  });

  test('an unreadable tool proposal logs r_env(no action) = −1, as the planner, and trains on its parseFailure', async () => {
    const wf = handWorkflow({ maxTurns: 1 });
    const { policy } = scripted({ tool: ['no idea', '["R"]'], planner: ['pass', 'pass'] });
    const { samples } = await treeRollout(wf, { seeds: [0], groupSize: 2, policies: { shared: policy } });
    const [unread, read] = samples.filter((s) => s.role === 'tool');
    const planner = samples.filter((s) => s.role === 'planner');
    assert.deepEqual([unread!.parsed, unread!.envReward, unread!.own], [false, -1, -2]);
    close(read!.envReward, -0.01 + 1.03);
    for (const s of planner) assert.deepEqual([s.parsed, s.envReward, s.own], [false, -1, -3]);
  });

  test("teamBranches: the planner also acts in the other branches, so the tool's team terms differ", async () => {
    const wf = handWorkflow();
    const { policy, calls } = scripted({
      tool: ['["R","R"]', 'no idea', '["D","D","R","R"]'],
      // First the two non-chosen branches (one response each), then the chosen branch's K candidates.
      planner: ['["D","D"]', '["R"]', '["R"]', '["R"]', '["D","D","R","R"]'],
    });
    const { samples } = await treeRollout(wf, {
      seeds: [0],
      groupSize: 3,
      policies: { shared: policy },
      teamBranches: true,
    });
    assert.deepEqual(
      calls.map((c) => [c.role, c.prompts.length]),
      [
        ['tool', 3],
        ['planner', 2],
        ['planner', 3],
      ],
    );
    assert.match(calls[1]!.prompts[1]!, /The tool says: no action could be read/);
    const tool = samples.filter((s) => s.role === 'tool');
    // Branch 0: D, D from (0,0): 2·−0.01 + 1.03 + 1.02; branch 1: R: −0.01 + 1.03; chosen branch: DDRR 5.52.
    close(tool[0]!.team, 2.03);
    close(tool[1]!.team, 1.02);
    close(tool[2]!.team, 5.52);
    assert.equal(samples.length, 6, 'branch responses only score team terms; they are not samples');
  });

  test('ties go to the first candidate; the position carries over; a cut-off at maxTurns is not a success', async () => {
    const wf = handWorkflow({ maxTurns: 2, agents: ['planner'] });
    const { policy } = scripted({ planner: ['["R"]', '["R"]', '["L","L"]', '["L","L"]'] });
    const { samples, episodes } = await treeRollout(wf, { seeds: [0], groupSize: 2, policies: { shared: policy } });
    assert.deepEqual(
      samples.map((s) => s.chosen),
      [true, false, true, false],
    );
    assert.match(samples[2]!.prompt, /You are at \(row 0, col 1\)/, 'turn 2 starts where turn 1 ended');
    assert.match(samples[2]!.prompt, /turn 1 planner: \["R"\] -> now at \(0, 1\)/);
    assert.equal(episodes[0]!.turns, 2);
    assert.equal(episodes[0]!.success, false);
    // L from (0,1) to (0,0) valid, then off the grid: 2·(−0.01 − 0.97 − 0.10 + 0.04).
    close(samples[2]!.own, 2 * (-0.01 + (0.99 * -4 + 3) - 0.1 + 0.04));
  });

  test('per-role policies and sampling settings route each role to its policy; a missing policy is named', async () => {
    const wf = handWorkflow({ roles: { tool: { policy: 'coder', temperature: 0.7, stopStrings: ['END'] } } });
    const tool = scripted({ tool: ['["D","D","R","R"]', '[]'] });
    const planner = scripted({ planner: ['["D","D","R","R"]', '[]'] });
    const { samples } = await treeRollout(wf, {
      seeds: [0],
      groupSize: 2,
      policies: { coder: tool.policy, shared: planner.policy },
    });
    assert.deepEqual(
      samples.map((s) => s.policy),
      ['coder', 'coder', 'shared', 'shared'],
    );
    assert.deepEqual(tool.calls[0]!.settings, { temperature: 0.7, topP: 0.95, maxNewTokens: 48, stopStrings: ['END'] });
    await assert.rejects(
      treeRollout(wf, { seeds: [0], groupSize: 2, policies: { shared: planner.policy } }),
      /policy "coder"/,
    );
  });

  test('a role skips the turns the config names: no samples, no prompt', async () => {
    const wf = handWorkflow({ maxTurns: 2, roles: { tool: { skipTurns: [1] } } });
    const { policy, calls } = scripted({ tool: ['[]', '[]'], planner: ['["R"]', '["R"]', '["U"]', '["U"]'] });
    const { samples } = await treeRollout(wf, { seeds: [0], groupSize: 2, policies: { shared: policy } });
    assert.deepEqual(
      calls.map((c) => c.role),
      ['tool', 'planner', 'planner'],
    );
    assert.equal(samples.filter((s) => s.role === 'tool' && s.turn === 1).length, 0);
  });
});

describe('no-tree and single-agent baselines', () => {
  test('K independent episodes; common turns keyed by turn, the last common turn and later ones grouped together', async () => {
    const wf = handWorkflow({ maxTurns: 3 });
    const { policy } = scripted({
      tool: Array<string>(8).fill('[]'),
      planner: ['["R"]', '["D"]', '["L"]', '["R","D","D"]', '["D","R","R"]', '["U"]', '["R"]'],
    });
    const { samples, episodes } = await independentRollout(wf, {
      seeds: [0],
      groupSize: 3,
      policies: { shared: policy },
    });
    assert.deepEqual(
      episodes.map((e) => [e.turns, e.success]),
      [
        [2, true],
        [2, true],
        [3, false],
      ],
    );
    const planner = samples.filter((s) => s.role === 'planner');
    assert.deepEqual(
      planner.map((s) => [s.episode, s.turn, s.group]),
      [
        [0, 0, 'plan-path:hand|planner|t0'],
        [1, 0, 'plan-path:hand|planner|t0'],
        [2, 0, 'plan-path:hand|planner|t0'],
        [0, 1, 'plan-path:hand|planner|t>=1'],
        [1, 1, 'plan-path:hand|planner|t>=1'],
        [2, 1, 'plan-path:hand|planner|t>=1'],
        [2, 2, 'plan-path:hand|planner|t>=1'],
      ],
    );
    const groups = groupSamples(samples, 3);
    assert.deepEqual(
      groups.map((g) => [g.key, g.members.length]),
      [
        ['plan-path:hand|tool|t0', 3],
        ['plan-path:hand|planner|t0', 3],
        ['plan-path:hand|tool|t>=1', 4],
        ['plan-path:hand|planner|t>=1', 4],
      ],
    );
    // Team terms follow each episode's own planner: episode 0's tool at turn 1 gets r_env(["R","D","D"]).
    const tool01 = samples.find((s) => s.role === 'tool' && s.episode === 0 && s.turn === 1)!;
    close(tool01.team, -0.03 + (0.99 * -2 + 3) + (0.99 * -1 + 2) + 1 + 1 + 0.5);
  });

  test('single agent: the planner alone, K responses per instance in one group (ordinary GRPO at one turn)', async () => {
    const config = parseWorkflowConfig({ sampling: 'single', maxTurns: 1, groupSize: 4 });
    const wf = handWorkflow(config);
    assert.deepEqual(
      wf.roles.map((r) => r.name),
      ['planner'],
    );
    const { policy } = scripted({ planner: ['["R"]', '["D"]', 'x', '["D","D","R","R"]'] });
    const { samples } = await rollout(wf, config.sampling, { seeds: [0], groupSize: 4, policies: { shared: policy } });
    assert.deepEqual(
      samples.map((s) => s.group),
      Array(4).fill('plan-path:hand|planner|t>=0'),
    );
    assert.deepEqual(
      samples.map((s) => s.episode),
      [0, 1, 2, 3],
    );
    close(samples[2]!.reward, -3, 'unparsed: −2 + r_env(no action) = −2 − 1');
  });

  test('tree sampling continues from a walk, never from [] (no action costs −1: 2·(−1) for the planner)', async () => {
    const wf = handWorkflow({ agents: ['planner'], maxTurns: 1 });
    const { policy } = scripted({ planner: ['[]', '["U"]', 'pass'] });
    const { samples } = await treeRollout(wf, { seeds: [0], groupSize: 3, policies: { shared: policy } });
    // ["U"] bumps into the edge: 2·(−0.10 + (0.99·(−4) + 4)) = −0.12, still above [] (−2) and nothing parsed (−3).
    assert.deepEqual(
      samples.map((s) => Math.round(s.reward * 100) / 100),
      [-2, -0.12, -3],
    );
    assert.equal(samples.find((s) => s.chosen)!.response, '["U"]');
  });
});

describe('group validation', () => {
  test("a key merging instances (the reference's instance // K) is refused, naming the key", async () => {
    const wf = buildWorkflow({ name: 'plan-path', agents: ['planner'], maxTurns: 1, env: { height: 4, width: 4 } });
    const { policy, calls } = scripted({ planner: Array<string>(4).fill('["R"]') });
    const { samples } = await treeRollout(wf, { seeds: [1, 2], groupSize: 2, policies: { shared: policy } });
    assert.deepEqual(
      calls.map((c) => c.prompts.length),
      [4],
      'both instances in one generate call',
    );
    assert.equal(groupSamples(samples, 2).length, 2);
    // The reference's key: sample index // K over a batch laid out instance-major with K = 4 per "prompt".
    assert.throws(
      () => groupSamples(samples, 2, 'agent-turn', (s, i) => `${Math.floor(i / 4)}|${s.role}|t${s.turn}`),
      /group "0\|planner\|t0" mixes instances plan-path:1, plan-path:2/,
    );
  });

  test('a group of one when K > 1 is refused, naming the key; K = 1 is allowed', async () => {
    const wf = handWorkflow({ agents: ['planner'], maxTurns: 1 });
    const { policy } = scripted({ planner: ['["R"]', '["D"]'] });
    const { samples } = await treeRollout(wf, { seeds: [0], groupSize: 2, policies: { shared: policy } });
    assert.throws(
      () => groupSamples(samples.slice(1), 2),
      /group "plan-path:hand\|planner\|t0" has 1 sample but K = 2/,
    );
    assert.equal(groupSamples(samples.slice(1), 1).length, 1);
  });
});

describe('workflow.grouping', () => {
  /** Two turns of tree sampling on the hand instance, K = 2, neither turn reaching the goal; groups per `grouping`. */
  async function handGroups(grouping: string, roles: Record<string, unknown> = {}) {
    const config = parseWorkflowConfig({ maxTurns: 2, groupSize: 2, grouping, roles });
    const { policy } = scripted({
      tool: ['["R"]', '["D"]', '["U"]', '["L"]'],
      planner: ['["R"]', '["D"]', '["U"]', '["L"]'],
    });
    const policies = { shared: policy, tool: policy, planner: policy };
    const { batch, groups } = await playStep(handWorkflow(config), config, policies, [0]);
    // Samples in order: tool t0 (0, 1), planner t0 (2, 3), tool t1 (4, 5), planner t1 (6, 7).
    assert.deepEqual(
      batch.samples.map((s) => `${s.role}${s.turn}`),
      ['tool0', 'tool0', 'planner0', 'planner0', 'tool1', 'tool1', 'planner1', 'planner1'],
    );
    return groups.map((g) => [g.key, g.members]);
  }

  test("'agent-turn' (the default): one group per role and turn", async () => {
    assert.equal(parseWorkflowConfig({}).grouping, 'agent-turn');
    assert.deepEqual(await handGroups('agent-turn'), [
      ['plan-path:hand|tool|t0', [0, 1]],
      ['plan-path:hand|planner|t0', [2, 3]],
      ['plan-path:hand|tool|t1', [4, 5]],
      ['plan-path:hand|planner|t1', [6, 7]],
    ]);
  });

  test("'agent': one group per role, both turns pooled", async () => {
    assert.deepEqual(await handGroups('agent'), [
      ['plan-path:hand|tool|t*', [0, 1, 4, 5]],
      ['plan-path:hand|planner|t*', [2, 3, 6, 7]],
    ]);
  });

  test("'turn': one group per turn, both roles pooled; refused when the roles' policies differ", async () => {
    assert.deepEqual(await handGroups('turn'), [
      ['plan-path:hand|*|t0', [0, 1, 2, 3]],
      ['plan-path:hand|*|t1', [4, 5, 6, 7]],
    ]);
    await assert.rejects(
      handGroups('turn', { tool: { policy: 'tool' }, planner: { policy: 'planner' } }),
      /group "plan-path:hand\|\*\|t0" mixes policies tool, planner: .*'agent-turn' or 'agent'/,
    );
    assert.throws(() => parseWorkflowConfig({ grouping: 'role' }), /workflow\.grouping/);
  });

  test("no-tree keys pool the same way: 'agent' merges the turns of each role", async () => {
    const wf = handWorkflow({ maxTurns: 3 });
    const { policy } = scripted({
      tool: Array<string>(8).fill('[]'),
      planner: ['["R"]', '["D"]', '["L"]', '["R","D","D"]', '["D","R","R"]', '["U"]', '["R"]'],
    });
    const { samples } = await independentRollout(wf, {
      seeds: [0],
      groupSize: 3,
      policies: { shared: policy },
      grouping: 'agent',
    });
    assert.deepEqual(
      groupSamples(samples, 3, 'agent').map((g) => [g.key, g.members.length]),
      [
        ['plan-path:hand|tool|t*', 7],
        ['plan-path:hand|planner|t*', 7],
      ],
    );
  });
});

describe('registry and config', () => {
  test('built-ins are registered; an unknown name lists them; a user workflow is added without the trainer', async () => {
    assert.deepEqual(workflowNames().slice(0, 4), ['plan-path', 'sokoban', 'sudoku', 'math-tool']);
    assert.throws(() => buildWorkflow({ name: 'chess' }), /no workflow "chess"; registered: plan-path, sokoban/);
    registerWorkflow('tiny-path', (c) => buildWorkflow({ ...c, name: 'plan-path', env: { height: 3, width: 3 } }));
    const wf = buildWorkflow({ name: 'tiny-path', agents: ['planner'] });
    assert.equal((wf.env.reset(0) as PlanPathState).instance.rows.length, 3);
    assert.throws(() => registerWorkflow('tiny-path', () => wf), /already registered/);
  });

  test('bad config is refused naming the field; unknown roles are named', () => {
    assert.throws(() => parseWorkflowConfig({ groupSize: 0 }), /workflow\.groupSize/);
    assert.throws(() => parseWorkflowConfig({ roles: { planner: { temprature: 1 } } }), /workflow\.roles\.planner/);
    assert.throws(() => buildWorkflow({ agents: ['coder'] }), /no role "coder" \(workflow\.agents\)/);
    assert.throws(() => buildWorkflow({ name: 'sudoku', env: { blanks: 20 } }), /blanks/);
    const c = parseWorkflowConfig({});
    assert.deepEqual(
      [c.name, c.sampling, c.groupSize, c.maxTurns, c.teamBranches, c.groupFilter],
      ['plan-path', 'tree', 4, 5, false, { lowMeanRatio: 0.5 }],
    );
  });
});

describe('math with a tool agent in the sandbox', () => {
  test('tool programs run in the sandbox: right 1, failing −1 (outcome counted); the rollout continues', async () => {
    const wf = buildWorkflow({ name: 'math-tool', maxTurns: 1, sandbox: { timeoutMs: 60000 } });
    const answer = (wf.env.reset(3) as { answer: string }).answer;
    const { policy } = scripted({
      tool: [`\`\`\`js\nconsole.log(${answer})\n\`\`\``, 'const x = require("fs").readFileSync("/etc/passwd")'],
      reasoner: [`\\boxed{${answer}}`, 'not sure'],
    });
    const { samples, episodes } = await treeRollout(wf, { seeds: [3], groupSize: 2, policies: { shared: policy } });
    const [right, denied, good, none] = samples;
    assert.deepEqual([right!.sandbox, denied!.sandbox], ['ok', 'denied']);
    assert.deepEqual([right!.own, denied!.own], [1, -1]);
    assert.match(good!.prompt, new RegExp(`The tool says: the program printed ${answer}`));
    assert.deepEqual([good!.own, none!.own], [2, 0]);
    assert.deepEqual([right!.team, denied!.team], [1, 1], 'team: [reasoner correct] in the chosen branch');
    assert.equal(episodes[0]!.success, true);
  });

  test('a grid tool agent in code mode: the program prints the move list', async () => {
    const wf = handWorkflow({ toolMode: 'code', agents: ['tool'], maxTurns: 1, sandbox: { timeoutMs: 60000 } });
    const { policy } = scripted({
      tool: ['console.log(JSON.stringify(["D","D","R","R"]))', 'require("fs").readdirSync("/")'],
    });
    const { samples } = await treeRollout(wf, { seeds: [0], groupSize: 2, policies: { shared: policy } });
    close(samples[0]!.own, 5.52);
    assert.deepEqual([samples[1]!.own, samples[1]!.sandbox], [-2, 'denied']);
    assert.equal(samples[1]!.envReward, -1, 'a failed program proposes no action');
  });
});
