// Rollouts with real transformer policies (no training): a fresh tiny agent plays a tree-sampled Plan-Path batch and
// a no-tree one; samples come back grouped, validated and summarised; the same seed gives the same batch. With two
// policies, the groups `mas rollout` reports as kept are those a training step on the same instances trains.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { WarmStartSchema, workflowAgent } from '../src/agents/workflow-agent.js';
import { engine } from '../src/backend/engine.js';
import { masCommand, parseModelArgs, playRollout, runMasRollout } from '../src/cli/mas.js';
import { AgentSpecSchema } from '../src/model/agent-spec.js';
import type { SampleRecord } from '../src/train/sample-table.js';
import { WorkflowSource } from '../src/train/workflow-source.js';
import { filterGroups } from '../src/workflows/group-filter.js';
import { groupSamples } from '../src/workflows/groups.js';
import { trainingSeeds } from '../src/workflows/play.js';
import type { Policy } from '../src/workflows/policy.js';
import { buildWorkflow } from '../src/workflows/registry.js';
import { parseWorkflowConfig } from '../src/workflows/workflow-config.js';

// Workflow prompts (grid, history, format) run past 512 characters; a char agent needs positions for them.
const tiny = { arch: 'qwen3', hidden: 32, layers: 1, heads: 2, maxPositions: 2048 } as const;

describe('mas rollout with real models', () => {
  test('tree sampling: K candidates per role and turn from a real model, groups of K, summary per role', async () => {
    const workflow = { name: 'plan-path', env: { height: 4, width: 4 }, groupSize: 3, maxTurns: 2, roles: {} };
    const opts = { workflow, instances: 2, seed: 5, agent: tiny };
    const { summary, batch } = await runMasRollout(opts);
    assert.equal(summary.samples % 3, 0);
    assert.ok(summary.samples >= 2 * 2 * 3, 'at least one turn of both roles per instance');
    assert.deepEqual(Object.keys(summary.roles), ['tool', 'planner']);
    assert.equal(summary.groups, summary.samples / 3);
    assert.equal(summary.filter.kept + summary.filter.droppedLowMean, summary.groups);
    assert.equal(summary.filter.droppedLowMean, Math.floor(summary.groups / 2), 'the default filter drops half');
    for (const s of batch.samples) {
      assert.ok(s.response.length <= 48 * 4, 'bounded by maxNewTokens');
      assert.ok(!s.response.includes('\n'), 'the stop string ends one-line answers');
      assert.ok(Number.isFinite(s.reward));
    }
    const again = await runMasRollout(opts);
    assert.deepEqual(again.batch, batch, 'same seed, same rollouts');
  });

  test('single-agent baseline with a real, briefly warm-started model: the planner alone, K episodes', async () => {
    const workflow = { name: 'sudoku', env: { blanks: 4 }, groupSize: 2, maxTurns: 1, sampling: 'single' };
    const warmStart = { steps: 2, rows: 16, batchSize: 4 };
    const { summary } = await runMasRollout({ workflow, instances: 2, seed: 1, agent: tiny, warmStart });
    assert.deepEqual(Object.keys(summary.roles), ['planner']);
    assert.equal(summary.samples, 4);
    assert.equal(summary.episodes, 4);
  });

  test('two policies: the groups mas rollout keeps are the groups a training step appends, filtered per policy', async () => {
    // The tool never parses (own −10, no team term), so a filter over all groups would drop every tool group and no
    // planner group; per policy, each policy loses the lowest-mean half of its own.
    const config = parseWorkflowConfig({
      name: 'plan-path',
      env: { height: 4, width: 4 },
      maxTurns: 2,
      groupSize: 2,
      roles: { tool: { policy: 'tool', parseFailure: -10, teamWeight: 0 }, planner: { policy: 'planner' } },
    });
    const wf = buildWorkflow(config);
    const answering = (answers: string[]): Policy => ({
      generate: (prompts) =>
        Promise.resolve(prompts.map((_, i) => ({ text: answers[i % answers.length]!, finishReason: 'stop' }))),
    });
    const policies = { tool: answering(['?', 'no idea']), planner: answering(['["R"]', '["D"]', '["D","R"]']) };
    const seeds = trainingSeeds(0, 0, 3);
    const rollout = await playRollout(wf, config, policies, seeds);

    const k = engine();
    const spec = AgentSpecSchema.parse({ hidden: 16, layers: 1, heads: 2, maxPositions: 2048 });
    const { model, tokenizer } = await workflowAgent(wf, spec, WarmStartSchema.parse({}), 0, k);
    const learners = new Map(
      Object.entries(policies).map(([name, policy]) => [name, { agent: { name, model, tokenizer }, policy }]),
    );
    const source = new WorkflowSource(wf, config, learners, { instancesPerStep: 3, seed: 0, episodesLogged: 0 });
    const table: SampleRecord[] = [];
    await source.collect({ k, step: 0 }, table);
    const trained = [...new Set(table.map((r) => r.groupKey))];
    assert.deepEqual([...rollout.kept].sort(), [...trained].sort());

    const { kept, droppedLowMean, policies: perPolicy } = rollout.summary.filter;
    assert.equal(kept, rollout.kept.length);
    for (const name of ['tool', 'planner']) {
      const groups = rollout.batch.samples.filter((s) => s.policy === name).length / 2;
      assert.deepEqual(perPolicy[name], { kept: Math.ceil(groups / 2), droppedLowMean: Math.floor(groups / 2) });
    }
    assert.equal(kept + droppedLowMean, rollout.summary.groups);
    // The instance is discriminating: one filter over every group would have kept other groups.
    const all = groupSamples(rollout.batch.samples, 2).map((g) => ({
      key: g.key,
      rewards: g.members.map((i) => rollout.batch.samples[i]!.reward),
    }));
    assert.notDeepEqual(filterGroups(all).kept.sort(), [...rollout.kept].sort());
  });

  test('--model arguments: NAME=DIR per policy, DIR for the shared one; a missing checkpoint is named', async () => {
    assert.deepEqual(parseModelArgs(['a/b', 'tool=c/d']), { shared: 'a/b', tool: 'c/d' });
    assert.throws(() => parseModelArgs(['x', 'y']), /"shared" given twice/);
    const workflow = { roles: { tool: { policy: 'coder' } } };
    await assert.rejects(
      runMasRollout({ workflow, models: { coder: '/nonexistent' }, agent: tiny }),
      /nonexistent|no checkpoint/,
    );
  });

  test('the command line: `mas rollout` prints the summary as JSON; bad JSON is refused with an example', async () => {
    const lines: string[] = [];
    const cmd = masCommand((l) => lines.push(l));
    const workflow =
      '{"name":"plan-path","env":{"height":3,"width":3},"groupSize":2,"maxTurns":1,"agents":["planner"]}';
    const args = [
      'rollout',
      '--workflow',
      workflow,
      '--instances',
      '1',
      '--hidden',
      '32',
      '--layers',
      '1',
      '--heads',
      '2',
    ];
    await cmd.parseAsync(args, { from: 'user' });
    const summary = JSON.parse(lines[0]!) as { samples: number; groupSize: number };
    assert.deepEqual([summary.samples, summary.groupSize], [2, 2]);
    await assert.rejects(
      masCommand().parseAsync(['rollout', '--workflow', '{k:2}'], { from: 'user' }),
      /must be JSON, e\.g\./,
    );
  });
});
