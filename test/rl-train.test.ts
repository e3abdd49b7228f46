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
import {
  hacrl,
  hacrlKilledAt,
  assertSameCheckpoint,
  hacrlSignalledAt,
  metricRows as metrics,
  rawMetricRows,
  tinySftArgs,
} from './cli.js';

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
    'reward.format=0.5',
    'steps=5',
    'eval.every=2',
    'eval.problems=8',
    'eval.samplesPerProblem=2',
    'checkpoint.every=1',
    'checkpoint.keepLast=10',
    ...extra,
  ];
}

const finalWeights = (runDir: string): Promise<Buffer> =>
  readFile(join(runDir, 'checkpoints', 'step-000005', 'agents', 'a', 'model.safetensors'));

/** The step of the first length blow-up warning of the reference run (Infinity: none), for the resume test. */
let firstBlowUp = Infinity;

describe('hacrl train', () => {
  before(async () => {
    await writeFile(
      rewardPath,
      'export default (s) => (s.response.match(/[0-9]/g) ?? []).length / Math.max(1, s.response.length);\n',
    );
    const r = hacrl(tinySftArgs(agentDir, ['--max-new-tokens', '16']));
    assert.equal(r.status, 0, r.stderr);
  });

  test('the same seed twice gives identical metrics and weights', async () => {
    const a = hacrl(runArgs(join(root, 'a')));
    assert.equal(a.status, 0, a.stderr);
    // Piped, not a terminal: one plain status line per step, no escape codes.
    assert.match(
      a.stdout,
      /^step 5\/5 {2}a reward \d\.\d{3} acc \d+\.\d% {2}gen \d+ tok\/s {2}train \d+ tok\/s {2}\d+ MiB {2}ETA 0s$/m,
    );
    assert.equal(a.stdout.match(/^step \d\/5 {2}a reward/gm)?.length, 5);
    assert.ok(!a.stdout.includes('\u001b'), 'no terminal escapes in piped output');
    assert.match(a.stdout, /^step 0 a {2}val easy:test \d+\.\d% \(avg@2 \d+\.\d%, pass@2 \d+\.\d%\)$/m);
    const b = hacrl(runArgs(join(root, 'b')));
    assert.equal(b.status, 0, b.stderr);
    const ma = await metrics(join(root, 'a'));
    assert.deepEqual(
      ma.map((row) => row.step),
      [0, 1, 2, 3, 4, 5],
      'the base model is validated at step 0',
    );
    assert.deepEqual(Object.keys(ma[0]!), [
      'step',
      'agent',
      'val/easy:test/greedy',
      'val/easy:test/avg@2',
      'val/easy:test/pass@2',
    ]);
    for (const step of [2, 4, 5]) {
      const row = ma[step]!;
      assert.ok(
        row['val/easy:test/greedy'] !== undefined && row['val/easy:test/pass@2'] !== undefined,
        `val at ${step}`,
      );
    }
    assert.ok(!('val/easy:test/greedy' in ma[3]!), 'no validation between eval.every steps');
    // Memory is the process's: run-level fields on every step's row, not namespaced per agent.
    for (const row of (await rawMetricRows(join(root, 'a'))).slice(1)) {
      const [rss, peak] = [row['mem/rss_mib'] as number, row['mem/peak_rss_mib'] as number];
      assert.ok(rss > 10 && peak >= rss, `step ${row.step}: rss ${rss} MiB, peak ${peak} MiB`);
    }
    // Health: the policy's entropy is logged; warn/length_blowup marks exactly the steps over the default thresholds
    // (90% of the 16-token limit, half the responses truncated), and the console says so once, at the first.
    const blownUp = ma
      .filter((row) => (row.length_mean as number) >= 0.9 * 16 || (row.truncated_frac as number) >= 0.5)
      .map((row) => row.step as number);
    assert.deepEqual(
      ma.filter((row) => row['warn/length_blowup'] === 1).map((row) => row.step),
      blownUp,
    );
    const printed = [...a.stdout.matchAll(/warning at step (\d+) \(a\): length blow-up/g)].map((m) => Number(m[1]));
    assert.deepEqual(printed, blownUp.slice(0, 1));
    assert.ok(ma.slice(1).every((row) => (row.entropy as number) > 0 && (row.entropy as number) < Math.log(64)));
    firstBlowUp = blownUp[0] ?? Infinity;
    for (const row of ma.slice(1)) {
      const parts = (row['reward/digits_mean'] as number) + 0.5 * (row['reward/format_mean'] as number);
      assert.ok(Math.abs(parts - (row.reward_mean as number)) < 1e-12, 'per-reward means add up to the total');
    }
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
    // The reloaded history tells the resumed run which warnings the first part already printed.
    const from = Number(/from step (\d+)/.exec(resumed.stdout)![1]);
    assert.equal(/length blow-up/.test(resumed.stdout), firstBlowUp > from && firstBlowUp <= 5);
    assert.ok(!/^step 0 /m.test(resumed.stdout), 'a resume does not validate the base model again');
    assert.ok((await finalWeights(dir)).equals(await finalWeights(join(root, 'a'))), 'final weights equal');
    await assertSameCheckpoint(dir, join(root, 'a'), 5, ['a']);
    assert.deepEqual(await metrics(dir), await metrics(join(root, 'a')));
  });

  test('an entropy bonus keeps the policy entropy higher than the same run without it', async () => {
    const entropy = async (coef: number): Promise<number[]> => {
      const dir = join(root, `entropy-${coef}`);
      const r = hacrl(
        runArgs(dir, [`optim.entropyCoef=${coef}`, 'optim.lr=0.01', 'eval.every=0', 'data.validation=[]']),
      );
      assert.equal(r.status, 0, r.stderr);
      return (await metrics(dir)).map((row) => row.entropy as number);
    };
    const [without, bonus] = [await entropy(0), await entropy(0.5)];
    assert.ok(
      bonus.at(-1)! > without.at(-1)!,
      `entropy without ${without.join(', ')}; with β_H 0.5 ${bonus.join(', ')}`,
    );
  });

  test('rollout correction logs the sampler/learner mismatch; a mask that drops nothing trains exactly like none', async () => {
    const dir = join(root, 'rollout-mask');
    const r = hacrl(runArgs(dir, ['optim.rolloutCorrection=mask']));
    assert.equal(r.status, 0, r.stderr);
    const rows = await metrics(dir);
    const rollout = /^rollout_/;
    for (const row of rows.slice(1)) {
      // fp32 decoding and the training forward pass agree to rounding: far inside the mask's band [0.5, 2].
      const [kl, max, dropped] = [row.rollout_kl, row.rollout_ratio_max, row.rollout_corrected_frac] as number[];
      assert.ok(kl! >= 0 && kl! < 1e-4 && max! >= 1 && max! < 1.01 && dropped === 0, JSON.stringify(row));
    }
    const without = (rs: Record<string, unknown>[]) =>
      rs.map((row) => Object.fromEntries(Object.entries(row).filter(([k]) => !rollout.test(k))));
    assert.deepEqual(without(rows), await metrics(join(root, 'a')));
    assert.ok((await finalWeights(dir)).equals(await finalWeights(join(root, 'a'))), 'final weights equal');
  });

  test('SIGINT stops the run, says what it kept and how to resume, and the resumed run ends identical', async () => {
    const dir = join(root, 'interrupted');
    const r = await hacrlSignalledAt(runArgs(dir), join(dir, 'checkpoints', 'step-000002', 'state.json'), ['SIGINT']);
    assert.equal(r.status, 130, r.stderr);
    assert.match(r.stderr, /SIGINT received: stopping at the next safe point/);
    // Steps last milliseconds here: the stop lands inside a step (dropped) or after its last safe point (kept).
    const stopped =
      /stopped by SIGINT (?:after step (\d+); checkpoint written to (\S+)|during step \d+ \([^)]+\), which was dropped; resuming continues from the newest checkpoint, (\S+) \(step (\d+)\))\. Resume with: hacrl train .* --resume/.exec(
        r.stderr,
      );
    assert.ok(stopped, r.stderr);
    const [kept, dir2] = [Number(stopped[1] ?? stopped[4]), stopped[2] ?? stopped[3]];
    assert.ok(kept >= 2 && kept < 5, 'stopped before the end');
    assert.ok(existsSync(join(dir2!, 'state.json')), 'the checkpoint resumed from is complete');
    const resumed = hacrl([...runArgs(dir), '--resume']);
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stdout, new RegExp(`resuming .* from step ${kept}`));
    assert.ok((await finalWeights(dir)).equals(await finalWeights(join(root, 'a'))), 'final weights equal');
    await assertSameCheckpoint(dir, join(root, 'a'), 5, ['a']);
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

  test('resuming a run saved before a config key existed: its current default fills in, a set value still differs', async () => {
    const dir = join(root, 'older');
    const short = ['steps=2', 'eval.every=0'];
    const r = hacrl(runArgs(dir, short));
    assert.equal(r.status, 0, r.stderr);
    // What a run started before optim.activationCheckpointing existed saved: the same config without that key.
    const file = join(dir, 'config.resolved.json');
    const saved = JSON.parse(await readFile(file, 'utf8')) as { optim: Record<string, unknown> };
    assert.equal(saved.optim.activationCheckpointing, false);
    delete saved.optim.activationCheckpointing;
    await writeFile(file, JSON.stringify(saved, null, 2));
    const resumed = hacrl([...runArgs(dir, short), '--resume']);
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.match(resumed.stdout, /older is already finished \(step 2 of 2\): nothing to resume/);
    assert.doesNotMatch(resumed.stdout, /resuming/);
    const other = hacrl([...runArgs(dir, [...short, 'optim.activationCheckpointing=true']), '--resume']);
    assert.equal(other.status, 1);
    assert.match(other.stderr, /the configuration differs/);
    // A saved value that differs from the current one is refused as before.
    await writeFile(file, JSON.stringify({ ...saved, optim: { ...saved.optim, activationCheckpointing: true } }));
    const changed = hacrl([...runArgs(dir, short), '--resume']);
    assert.equal(changed.status, 1);
    assert.match(changed.stderr, /the configuration differs/);
  });

  test('an update that leaves non-finite weights stops the run with a clear error and is never checkpointed', async () => {
    const dir = join(root, 'nan');
    const r = hacrl(
      runArgs(dir, ['optim.lr=1e38', 'optim.gradClip=0', 'steps=8', 'optim.weightDecay=0', 'eval.atStart=false']),
    );
    assert.notEqual(r.status, 0);
    assert.match(r.stderr, /saving .*step-000001.*: refusing to save non-finite weights/);
    assert.ok(!existsSync(join(dir, 'checkpoints', 'step-000001')));
    assert.ok(!(await metrics(dir)).some((row) => row.step === 0), 'eval.atStart=false: no step-0 validation');
  });
});
