// The RL loop end to end on a very small agent: reproducibility, a SIGKILL'd run resumed bit for bit, refusals, and
// the stop after repeated non-finite steps.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { spawn } from 'node:child_process';
import { hacrl, hacrlKilledAt, hacrlSignalledAt, TINY_AGENT_FLAGS } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-rl-'));
after(() => rm(root, { recursive: true, force: true }));
const agentDir = join(root, 'agent');
const rewardPath = join(root, 'digits.mjs');

/** Overrides of a small, fast run in `runDir` (a reward with variance even for an untrained agent). */
function runArgs(runDir: string, extra: string[] = []): string[] {
  return [
    'train',
    '--set',
    `agents.0.name=a`,
    `agents.0.checkpoint=${agentDir}`,
    `runDir=${runDir}`,
    'data.train=easy:train:64',
    'data.validation=[easy:test:8]',
    'data.template={question}',
    'rollout.promptsPerStep=2',
    'rollout.groupSize=4',
    'rollout.maxNewTokens=16',
    'optim.miniBatches=2',
    'optim.lr=0.003',
    'reward.math=0',
    `reward.custom=[{path: ${rewardPath}, weight: 1, name: digits}]`,
    'steps=5',
    'eval.every=2',
    'eval.problems=8',
    'checkpoint.every=1',
    'checkpoint.keepLast=10',
    ...extra,
  ];
}

/** metrics.jsonl rows without the wall-clock fields (which legitimately differ between runs). */
async function metrics(runDir: string): Promise<Record<string, unknown>[]> {
  const text = await readFile(join(runDir, 'metrics.jsonl'), 'utf8');
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .map((row) => Object.fromEntries(Object.entries(row).filter(([key]) => !/^time_|tokens_per_s/.test(key))));
}

const finalWeights = (runDir: string): Promise<Buffer> =>
  readFile(join(runDir, 'checkpoints', 'step-000005', 'agents', 'a', 'model.safetensors'));

describe('hacrl train', () => {
  before(async () => {
    await writeFile(
      rewardPath,
      'export default (s) => (s.response.match(/[0-9]/g) ?? []).length / Math.max(1, s.response.length);\n',
    );
    const r = hacrl([
      'sft',
      '--out',
      agentDir,
      '--steps',
      '10',
      '--eval-every',
      '0',
      '--eval-n',
      '8',
      '--train-n',
      '200',
      ...TINY_AGENT_FLAGS,
      '--max-new-tokens',
      '16',
    ]);
    assert.equal(r.status, 0, r.stderr);
  });

  test('the same seed twice gives identical metrics and weights', async () => {
    const a = hacrl(runArgs(join(root, 'a')));
    assert.equal(a.status, 0, a.stderr);
    assert.match(a.stdout, /step 5\/5 a {2}reward /);
    const b = hacrl(runArgs(join(root, 'b')));
    assert.equal(b.status, 0, b.stderr);
    const ma = await metrics(join(root, 'a'));
    assert.equal(ma.length, 5);
    assert.ok(
      ma.some((row) => row.val_accuracy !== undefined),
      'validation ran',
    );
    assert.deepEqual(await metrics(join(root, 'b')), ma);
    assert.ok((await finalWeights(join(root, 'a'))).equals(await finalWeights(join(root, 'b'))));
    const first = await readFile(join(agentDir, 'model.safetensors'));
    assert.ok(!first.equals(await finalWeights(join(root, 'a'))), 'training changed the weights');
  });

  test('a run killed with SIGKILL and resumed ends with the weights and metrics of an uninterrupted run', async () => {
    const dir = join(root, 'killed');
    await hacrlKilledAt(runArgs(dir), join(dir, 'checkpoints', 'step-000002', 'state.json'));
    assert.ok(!existsSync(join(dir, 'checkpoints', 'step-000005')), 'killed before the end');
    const resumed = hacrl([...runArgs(dir), '--resume']);
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stdout, /resuming .* from step [2-4]/);
    assert.ok((await finalWeights(dir)).equals(await finalWeights(join(root, 'a'))), 'final weights equal');
    assert.deepEqual(await metrics(dir), await metrics(join(root, 'a')));
  });

  test('SIGINT finishes the step, writes a checkpoint, says how to resume, and the resumed run ends identical', async () => {
    const dir = join(root, 'interrupted');
    const r = await hacrlSignalledAt(runArgs(dir), join(dir, 'checkpoints', 'step-000002', 'state.json'), ['SIGINT']);
    assert.equal(r.status, 130, r.stderr);
    assert.match(r.stderr, /SIGINT received: finishing the current step, then writing a checkpoint/);
    const stopped =
      /stopped by SIGINT after step (\d+); checkpoint written to (\S+)\. Resume with: hacrl train .* --resume/.exec(
        r.stderr,
      );
    assert.ok(stopped, r.stderr);
    assert.ok(Number(stopped[1]) >= 2 && Number(stopped[1]) < 5, 'stopped before the end');
    assert.ok(existsSync(join(stopped[2]!, 'state.json')), 'the checkpoint of the stop is complete');
    const resumed = hacrl([...runArgs(dir), '--resume']);
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stdout, new RegExp(`resuming .* from step ${stopped[1]}`));
    assert.ok((await finalWeights(dir)).equals(await finalWeights(join(root, 'a'))), 'final weights equal');
    assert.deepEqual(await metrics(dir), await metrics(join(root, 'a')));

    // The newest checkpoints damaged after the fact: resume falls back to the newest one that loads, and says so.
    await writeFile(join(dir, 'checkpoints', 'step-000005', 'agents', 'a', 'model.safetensors'), 'garbage');
    const state4 = join(dir, 'checkpoints', 'step-000004', 'state.json');
    await writeFile(state4, (await readFile(state4, 'utf8')).replace(/"step": ?4/, '"step": 3'));
    const fallback = hacrl([...runArgs(dir), '--resume']);
    assert.equal(fallback.status, 0, fallback.stderr);
    assert.match(
      fallback.stdout,
      /resuming from step-000003 instead, the newest checkpoint that loads \(skipped: step-000005: .*; step-000004: .*state\.json says step 3, but its folder is step-000004\)/,
    );
    assert.ok((await finalWeights(dir)).equals(await finalWeights(join(root, 'a'))), 'final weights equal again');
  });

  test('a second SIGINT stops at once', async () => {
    const dir = join(root, 'twice');
    const start = performance.now();
    const r = await hacrlSignalledAt(runArgs(dir), join(dir, 'checkpoints', 'step-000001', 'state.json'), [
      'SIGINT',
      'SIGINT',
    ]);
    assert.equal(r.status, 130, r.stderr);
    assert.match(r.stderr, /SIGINT received again: stopping now/);
    assert.doesNotMatch(r.stderr, /stopped by SIGINT after step/);
    assert.ok(performance.now() - start < 60_000);
  });

  test('a closed standard output (| head -1) does not stop training', async () => {
    const dir = join(root, 'piped');
    const child = spawn(process.execPath, ['dist/src/cli/main.js', ...runArgs(dir)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('close', r));
    // Like `head -1`: read the first line, then close the pipe.
    await new Promise<void>((r) => child.stdout.once('data', () => r()));
    child.stdout.destroy();
    await sleep(10);
    assert.equal(await exited, 0, stderr);
    assert.match(stderr, /standard output was closed; going on without it/);
    assert.doesNotMatch(stderr, /EPIPE|at /);
    assert.ok((await finalWeights(dir)).equals(await finalWeights(join(root, 'a'))), 'the run finished as usual');
  });

  test('resume with nothing to resume, a second start in a used folder, and a changed config are refused', () => {
    const none = hacrl([...runArgs(join(root, 'empty')), '--resume']);
    assert.notEqual(none.status, 0);
    assert.match(none.stderr, /--resume: no complete checkpoint in/);
    const again = hacrl(runArgs(join(root, 'a')));
    assert.match(again.stderr, /already holds a run; pass --resume/);
    const changed = hacrl([...runArgs(join(root, 'a'), ['optim.lr=0.01']), '--resume']);
    assert.match(changed.stderr, /the configuration differs/);
  });

  test('repeated non-finite steps stop the run with a clear error, the last good checkpoint intact', () => {
    const dir = join(root, 'nan');
    const r = hacrl(runArgs(dir, ['optim.lr=1e38', 'optim.gradClip=0', 'steps=8', 'optim.weightDecay=0']));
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /stopping: 3 consecutive steps had a non-finite loss or gradient/);
    assert.ok(existsSync(join(dir, 'checkpoints', 'step-000001', 'state.json')));
  });
});
