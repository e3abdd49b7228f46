/** `hacrl mas eval` and roles answered by their solver (src/workflows/expert-roles.ts). */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { runMasEval } from '../src/cli/mas-eval.js';
import { heldOutSeeds, playGreedy, successRate, trainingSeeds, trainProbeSeeds } from '../src/workflows/play.js';
import { isTestKey } from '../src/tasks/splits.js';
import { CodingOptionsSchema } from '../src/envs/coding.js';
import { EXPERT_POLICY, withExpertRoles } from '../src/workflows/expert-roles.js';
import type { Policy } from '../src/workflows/policy.js';
import { buildWorkflow } from '../src/workflows/registry.js';
import { startEpisode } from '../src/workflows/workflow.js';

const CODING = { name: 'coding', maxTurns: 1, roles: { tester: { policy: 'tester' }, coder: { policy: 'coder' } } };

describe('roles answered by their solver', () => {
  test('every role by its solver solves every instance (one turn and two turns)', async () => {
    for (const workflow of [CODING, { name: 'plan-path', maxTurns: 2 }]) {
      const wf = buildWorkflow(workflow);
      const all = await runMasEval({ workflow, models: {}, expert: wf.roles.map((r) => r.name), instances: 12 });
      assert.equal(all.successRate, 1, workflow.name);
      for (const r of Object.values(all.roles)) assert.deepEqual([r.policy, r.parsed], [EXPERT_POLICY, 1]);
    }
  });

  test("a later role sees the expert's answer: a coder that is right only given the reference's cases", async () => {
    const wf = buildWorkflow(CODING);
    const seeds = heldOutSeeds(10);
    const [tester, coder] = [wf.roles[0]!, wf.roles[1]!];
    // The coder's correct answer for each task, given only when its prompt holds that task's reference cases.
    const rightWhenShown = new Map(
      seeds.map((s) => {
        const st = startEpisode(wf, s);
        return [tester.expert(st)!, coder.expert(st)!] as const;
      }),
    );
    const coderPolicy: Policy = {
      generate: async (prompts) =>
        prompts.map((p) => ({ text: [...rightWhenShown].find(([cases]) => p.includes(cases))?.[1] ?? 'no f' })),
    };
    const { workflow, expert } = withExpertRoles(wf, ['tester']);
    const shown = await playGreedy(workflow, { [EXPERT_POLICY]: expert, coder: coderPolicy }, seeds);
    assert.equal(successRate(shown), 1);
    const silent: Policy = { generate: async (prompts) => prompts.map(() => ({ text: 'f(1) == 1' })) };
    const unshown = await playGreedy(wf, { tester: silent, coder: coderPolicy }, seeds);
    assert.equal(successRate(unshown), 0);
  });

  test('the train split: train-side coding keys never played in training; held-out and calibration test-side', async () => {
    const wf = buildWorkflow(CODING);
    const keys = (seeds: number[]) => seeds.map((s) => (startEpisode(wf, s).env as { task: { key: string } }).task.key);
    const testShare = CodingOptionsSchema.parse({}).testShare;
    assert.ok(keys(trainProbeSeeds(30)).every((k) => !isTestKey(k, testShare)));
    assert.ok(keys(heldOutSeeds(30)).every((k) => isTestKey(k, testShare)));
    // Past the last training seed of RL seed 99 at 10⁴ steps of 100 instances, below the held-out seeds.
    assert.ok(trainProbeSeeds(1)[0]! > trainingSeeds(99, 9_999, 100).at(-1)!);
    assert.ok(trainProbeSeeds(100_000).at(-1)! < heldOutSeeds(1)[0]!);
    const r = await runMasEval({
      workflow: CODING,
      models: {},
      expert: ['tester', 'coder'],
      split: 'train',
      instances: 4,
    });
    assert.deepEqual([r.split, r.instances, r.successRate], ['train', 4, 1]);
  });

  test('errors name what to change', async () => {
    assert.throws(() => withExpertRoles(buildWorkflow(CODING), ['planner']), /no role "planner".*roles: tester, coder/);
    await assert.rejects(
      runMasEval({ workflow: CODING, models: {}, expert: ['tester'], instances: 2 }),
      /no checkpoint for policy "coder": pass --model coder=DIR/,
    );
  });
});
