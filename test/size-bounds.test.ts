// Every size of a workflow section and of the `mas` commands has a bound, checked before any work, with an error that
// names the option and what to change; cross-field checks run only once the sizes they read are in bounds; duplicate
// roles are refused.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { buildWorkflow } from '../src/workflows/registry.js';
import { parseWorkflowConfig } from '../src/workflows/workflow-config.js';
import { hacrl } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-bounds-'));
after(() => rm(root, { recursive: true, force: true }));

/** Runs `hacrl ARGS`, expecting a failure within `seconds`; returns its stderr. */
function fails(args: string[], seconds = 20): string {
  const started = Date.now();
  const r = hacrl(args);
  assert.notEqual(r.status, 0, `${args.join(' ')} succeeded`);
  assert.ok(Date.now() - started < seconds * 1000, `${args.join(' ')} took ${(Date.now() - started) / 1000} s`);
  return r.stderr;
}

describe('size bounds', () => {
  test('workflow sizes are bounded, naming the field', () => {
    for (const [section, message] of [
      [{ groupSize: 1e6 }, /workflow\.groupSize: must be at most 64/],
      [{ maxTurns: 1e9 }, /workflow\.maxTurns: must be at most 64/],
      [{ history: 1e9 }, /workflow\.history: must be at most 64/],
      [{ roles: { planner: { maxNewTokens: 1e9 } } }, /workflow\.roles\.planner\.maxNewTokens: must be at most 4096/],
      [{ roles: { tool: { skipTurns: [1e9] } } }, /workflow\.roles\.tool\.skipTurns\.0: turns are numbered 0 to 63/],
      [{ sandbox: { timeoutMs: 2 ** 31 } }, /workflow\.sandbox\.timeoutMs: sandbox\.timeoutMs is at most 600000/],
      [{ agents: ['planner', 'planner'] }, /workflow\.agents: lists role "planner" twice: .* list it once/],
    ] as const)
      assert.throws(() => parseWorkflowConfig(section), message, JSON.stringify(section));
  });

  test("environment knobs are bounded, and their errors name the field's whole path, not zod's JSON", () => {
    for (const [env, message] of [
      [{ height: 1000 }, /invalid plan-path knobs:\n {2}workflow\.env\.height: /],
      [{ minShortest: 1e9 }, /invalid plan-path knobs:\n {2}workflow\.env\.minShortest: /],
    ] as const) {
      const error = (() => {
        try {
          buildWorkflow(parseWorkflowConfig({ name: 'plan-path', env }));
        } catch (e) {
          return (e as Error).message;
        }
        return 'no error';
      })();
      assert.match(error, message);
      assert.doesNotMatch(error, /"code":/);
    }
    assert.throws(
      () => buildWorkflow(parseWorkflowConfig({ name: 'sokoban', env: { maxSteps: 1e9 } })),
      /invalid sokoban knobs:\n {2}workflow\.env\.maxSteps: /,
    );
    assert.throws(
      () => buildWorkflow(parseWorkflowConfig({ name: 'coding', env: { families: ['regex'] } })),
      /invalid coding knobs:\n {2}workflow\.env\.families\.0: /,
    );
  });

  test('`config resolve` refuses out-of-bound sizes at once, without the cross-field checks that read them', async () => {
    const stderr = fails([
      'config',
      'resolve',
      'examples/grpo-easy.yaml',
      'rollout.promptsPerStep=1000000000',
      'rollout.groupSize=1000000000',
      'optim.miniBatches=7',
    ]);
    assert.match(stderr, /rollout\.promptsPerStep/);
    assert.doesNotMatch(stderr, /divisor/);
    const config = join(root, 'at-grpo.yaml');
    await writeFile(
      config,
      'algorithm: at-grpo\nagents: [{ name: shared, checkpoint: x }]\nworkflow: { name: plan-path, groupSize: 1000000 }\n',
    );
    assert.match(fails(['config', 'resolve', config]), /must be at most 64[\s\S]*workflow\.groupSize/);
  });

  test('`mas` options: sizes bounded, --workflow and --out named, all before any work', async () => {
    assert.match(fails(['mas', 'rollout', '--instances', '1000000000']), /--instances is at most 4096/);
    assert.match(
      fails(['mas', 'rollout', '--workflow', '{"groupSize": 1000000}']),
      /workflow\.groupSize: must be at most 64/,
    );
    const out = join(root, 'agent');
    assert.match(
      fails(['mas', 'warmstart', '--out', out, '--rows', '1000000000']),
      /warm-start rows are at most 100000 \(--rows\)/,
    );
    assert.match(fails(['mas', 'warmstart', '--out', out, '--workflow', '{bad']), /--workflow must be JSON, e\.g\./);
    const file = join(root, 'a-file');
    await writeFile(file, 'x');
    assert.match(
      fails(['mas', 'warmstart', '--out', file, '--steps', '100000']),
      /--out .*a-file: a file with that name is in the way/,
    );
    assert.match(fails(['mas', 'rollout', '--out', root]), /--out .*: .*\(EISDIR\)/);
  });
});
