// One process per run folder: a second trainer on a live run's runDir fails at once naming the first's PID and
// touches nothing; the lock of a dead process (killed, or its PID reused) is taken over, and the first run then
// resumes to the weights and metrics of an uninterrupted run.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import { lockRunDir, RUN_LOCK_FILE } from '../src/run/run-lock.js';
import { hacrl, metricRows, tinySftArgs } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-lock-'));
after(() => rm(root, { recursive: true, force: true }));

/** Polls every 20 ms until `path` exists; throws after `ms`. */
async function waitForFile(path: string, ms: number): Promise<void> {
  for (const end = Date.now() + ms; !existsSync(path); await sleep(20))
    if (Date.now() > end) throw new Error(`${path} did not appear in ${ms} ms`);
}

describe('run folder lock', () => {
  test('a second lock fails naming the holder; a released lock can be taken again', async () => {
    const dir = join(root, 'unit');
    const lock = await lockRunDir(dir);
    await assert.rejects(lockRunDir(dir), new RegExp(`runDir ${dir} is in use by this process ${process.pid} on `));
    await lock.release();
    assert.ok(!existsSync(join(dir, RUN_LOCK_FILE)));
    await (await lockRunDir(dir)).release();
  });

  test('stale locks are taken over: a dead PID, a PID reused by a later process, a damaged lock file', async () => {
    const dead = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
    const deadPid = Number(dead.stdout.trim());
    const since = new Date().toISOString();
    for (const [name, content] of [
      ['dead', JSON.stringify({ pid: deadPid, host: hostname(), started: '1', since })],
      ['reused', JSON.stringify({ pid: process.pid, host: hostname(), started: 'another', since })],
      ['damaged', '{"pid": 12'],
    ] as const) {
      const dir = join(root, name);
      await (await lockRunDir(dir)).release();
      await writeFile(join(dir, RUN_LOCK_FILE), content);
      const lock = await lockRunDir(dir);
      const holder = JSON.parse(await readFile(join(dir, RUN_LOCK_FILE), 'utf8')) as { pid: number };
      assert.equal(holder.pid, process.pid, name);
      await lock.release();
    }
  });

  test('two trainers on one runDir: the second fails at once naming the first; the first resumes byte-exactly', async () => {
    const agent = join(root, 'agent');
    const sft = hacrl(tinySftArgs(agent));
    assert.equal(sft.status, 0, sft.stderr);
    const args = (runDir: string): string[] => [
      'train',
      '--set',
      'agents.0.name=a',
      `agents.0.checkpoint=${agent}`,
      `runDir=${runDir}`,
      'data.train=easy:train:64',
      'data.validation=[easy:test:8]',
      'data.template={question}',
      'rollout.promptsPerStep=2',
      'rollout.groupSize=4',
      'rollout.maxNewTokens=16',
      'steps=4',
      'eval.every=2',
      'eval.problems=8',
      'checkpoint.every=1',
    ];
    const reference = join(root, 'reference');
    const ref = hacrl(args(reference));
    assert.equal(ref.status, 0, ref.stderr);

    const dir = join(root, 'shared');
    const first = spawn(process.execPath, ['dist/src/cli/main.js', ...args(dir)], { stdio: 'ignore' });
    const exited = new Promise((ok) => first.once('close', ok));
    try {
      await waitForFile(join(dir, 'checkpoints', 'step-000001', 'state.json'), 120_000);
      // Paused, the first run is alive and holds the lock for as long as the second one needs.
      first.kill('SIGSTOP');
      const metricsBefore = await readFile(join(dir, 'metrics.jsonl'), 'utf8');
      for (const extra of [[], ['--resume']]) {
        const second = hacrl([...args(dir), ...extra]);
        assert.notEqual(second.status, 0);
        assert.match(second.stderr, new RegExp(`runDir ${dir} is in use by process ${first.pid} on `));
      }
      assert.equal(await readFile(join(dir, 'metrics.jsonl'), 'utf8'), metricsBefore, 'the second touched nothing');
    } finally {
      first.kill('SIGKILL');
      await exited;
    }
    // The first run died holding its lock: the resume takes the stale lock over and ends as if never interrupted.
    const resumed = hacrl([...args(dir), '--resume']);
    assert.equal(resumed.status, 0, resumed.stderr);
    const weights = (run: string): Promise<Buffer> =>
      readFile(join(run, 'checkpoints', 'step-000004', 'agents', 'a', 'model.safetensors'));
    assert.ok((await weights(dir)).equals(await weights(reference)), 'final weights equal');
    assert.deepEqual(await metricRows(dir), await metricRows(reference));
    assert.ok(!existsSync(join(dir, RUN_LOCK_FILE)), 'the lock is released at the end');
  });
});
