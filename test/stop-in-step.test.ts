// SIGTERM in the middle of a step, at a shape whose phases last seconds (a 3M-parameter agent sampling 32 responses of
// up to 128 tokens): the notice comes at once, the process exits within seconds having dropped the step (no new
// checkpoint), and --resume from the newest checkpoint ends with the weights of an uninterrupted run.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { hacrl, hacrlSignalledAt } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-stop-'));
after(() => rm(root, { recursive: true, force: true }));
const agentDir = join(root, 'agent');
const rewardPath = join(root, 'digits.mjs');
/** The same reward after a 3-second wait: a step that awaits and reaches no safe point meanwhile. */
const slowRewardPath = join(root, 'slow-digits.mjs');
/** One thread as on a busy machine; every phase line printed (the first of each phase at once), so the test sees
 * each phase begin however short it is. */
const env = { HACRL_THREADS: '1', HACRL_PROGRESS_SECONDS: '0' };

/** A 2-step run in `runDir`, checkpointed every step, scored by the reward at `reward`. */
function runArgs(runDir: string, reward = rewardPath): string[] {
  return [
    'train',
    '--set',
    'agents.0.name=a',
    `agents.0.checkpoint=${agentDir}`,
    `runDir=${runDir}`,
    'data.train=easy:train:64',
    'data.validation=[]',
    'data.template={question}',
    'rollout.promptsPerStep=4',
    'rollout.groupSize=8',
    'rollout.maxNewTokens=128',
    'optim.miniBatches=4',
    'optim.lr=0.003',
    'reward.math=0',
    `reward.custom=[{path: ${reward}, weight: 1, name: digits}]`,
    'steps=2',
    'checkpoint.every=1',
  ];
}

const weights = (runDir: string, step: number): Promise<Buffer> =>
  readFile(join(runDir, 'checkpoints', `step-00000${step}`, 'agents', 'a', 'model.safetensors'));

describe('a stop inside a step', () => {
  before(async () => {
    const digits = '(s.response.match(/[0-9]/g) ?? []).length / Math.max(1, s.response.length)';
    await writeFile(rewardPath, `export default (s) => ${digits};\n`);
    await writeFile(
      slowRewardPath,
      `export default async (s) => (await new Promise((r) => setTimeout(r, 3000)), ${digits});\n`,
    );
    // One SFT step: nearly the random initialisation, so responses run to the length limit and phases last.
    const sft = ['sft', '--out', agentDir, '--steps', '1', '--warmup-steps', '1', '--eval-n', '1', '--train-n', '50'];
    const r = hacrl([...sft, '--hidden', '256', '--layers', '4', '--heads', '4'], env);
    assert.equal(r.status, 0, r.stderr);
    const full = hacrl(runArgs(join(root, 'full')), env);
    assert.equal(full.status, 0, full.stderr);
  });

  for (const phase of ['sampling', 'training'])
    test(`SIGTERM while ${phase}: noticed at once, exits within 10 s dropping the step, resumes to the same weights`, async (t) => {
      const dir = join(root, phase);
      const r = await hacrlSignalledAt(runArgs(dir), new RegExp(`^step 2/2  ${phase} a`, 'm'), ['SIGTERM'], env);
      assert.equal(r.status, 143, r.stderr);
      assert.ok(r.noticeMs < 1000, `notice after ${r.noticeMs} ms`);
      assert.ok(r.exitMs < 10_000, `exit after ${r.exitMs} ms`);
      t.diagnostic(`notice after ${Math.round(r.noticeMs)} ms, exit after ${Math.round(r.exitMs)} ms`);
      assert.match(r.stderr, /hacrl: SIGTERM received: stopping at the next safe point/);
      const newest = join(dir, 'checkpoints', 'step-000001');
      assert.ok(
        r.stderr.includes(
          `stopped by SIGTERM during step 2 (${phase} a), which was dropped; resuming continues from the newest ` +
            `checkpoint, ${newest} (step 1). Resume with: hacrl train`,
        ),
        r.stderr,
      );
      assert.ok(!existsSync(join(dir, 'checkpoints', 'step-000002')), 'the dropped step wrote no checkpoint');
      const resumed = hacrl([...runArgs(dir), '--resume'], env);
      assert.equal(resumed.status, 0, resumed.stderr);
      assert.match(resumed.stdout, /resuming .* from step 1/);
      assert.ok((await weights(dir, 2)).equals(await weights(join(root, 'full'), 2)), 'final weights equal');
    });

  test('a second SIGINT ends the process at once, even while the step awaits', async () => {
    const dir = join(root, 'twice');
    const r = await hacrlSignalledAt(runArgs(dir, slowRewardPath), /^step 1\/2 {2}scoring a/m, ['SIGINT', 'SIGINT'], {
      ...env,
      HACRL_PROGRESS_SECONDS: '0',
    });
    assert.equal(r.status, 130, r.stderr);
    assert.match(r.stderr, /SIGINT received: stopping at the next safe point.*\n.*SIGINT received again: stopping now/);
    assert.doesNotMatch(r.stderr, /stopped by SIGINT/);
    assert.ok(r.exitMs < 2000, `exit after ${r.exitMs} ms, within the reward's 3 s wait`);
  });
});
