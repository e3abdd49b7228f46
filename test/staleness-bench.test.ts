// `hacrl bench staleness`: a pair trained in one process with partners k steps stale. At k = 0 it is the lockstep
// exchange and ends byte-equal to the single-process run of the same config; at k = 2 steps 1–2 train on own records
// only, step t ≥ 3 takes the partner's step t − 2 with the P̂ its history gave at that step; the test-sized bench runs
// and a second start skips every finished run.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { RANDOM_REWARD_MODULE } from '../src/experiments/paper-matrix.js';
import { zooRunConfig } from '../src/experiments/run-config.js';
import { staleRuns, stalenessPlan } from '../src/experiments/staleness-bench.js';
import { trainStalePair } from '../src/experiments/staleness-pair.js';
import { trainRl } from '../src/train/rl-trainer.js';
import { mean } from '../src/util/stats.js';
import { ensurePair } from '../src/zoo/build.js';
import { pairRecipe, ZOO } from '../src/zoo/recipes.js';
import { hacrl } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-staleness-'));
after(() => rm(root, { recursive: true, force: true }));
const zooDir = join(root, 'zoo');
const agents = await ensurePair(ZOO.tiny, zooDir, () => undefined);

/** The tiny pair's HACPO run of `steps` steps in `runDir`, rewarded at random (so P̂ is not 0) with 2 × 2 samples. */
const config = (runDir: string, steps: number) =>
  zooRunConfig({
    agents,
    data: pairRecipe('tiny').data,
    steps,
    prompts: 2,
    groupSize: 2,
    lr: 1e-3,
    seed: 3,
    runDir,
    method: {
      algorithm: 'hacpo',
      reward: { math: 0, custom: [{ name: 'random', path: RANDOM_REWARD_MODULE, weight: 1 }] },
    },
  });

/** The tensors of a safetensors file (its header without the metadata, then the data). */
async function tensors(path: string): Promise<Buffer> {
  const bytes = await readFile(path);
  const n = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8')) as Record<string, unknown>;
  delete header.__metadata__;
  return Buffer.concat([Buffer.from(JSON.stringify(header)), bytes.subarray(8 + n)]);
}

/** Agent `agent`'s metric `name` per step, from the metrics.jsonl in `dir`. */
async function metric(dir: string, agent: string, name: string): Promise<unknown[]> {
  const rows = (await readFile(join(dir, 'metrics.jsonl'), 'utf8'))
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return rows.map((r) => r[`agent/${agent}/${name}`]);
}

describe('a pair with stale partners', () => {
  test('k = 0 ends byte-equal to the lockstep run of the same config in one process', async () => {
    const steps = 3;
    await trainRl(config(join(root, 'lockstep'), steps), { resume: false, progress: () => undefined });
    await trainStalePair(config(join(root, 'k0'), steps), 0, () => undefined);
    const step = `step-${String(steps).padStart(6, '0')}`;
    for (const a of agents) {
      const one = join(root, 'lockstep', 'checkpoints', step, 'agents', a.name, 'model.safetensors');
      const pair = join(root, 'k0', a.name, 'checkpoints', step, 'agents', a.name, 'model.safetensors');
      assert.ok((await tensors(one)).equals(await tensors(pair)), `agent ${a.name}'s weights differ`);
    }
    // Not trivially equal: a run whose partners are stale ends elsewhere.
    await trainStalePair(config(join(root, 'k1'), steps), 1, () => undefined);
    const small = (dir: string) => join(root, dir, 'checkpoints', step, 'agents', 'small', 'model.safetensors');
    assert.ok(!(await tensors(small('lockstep'))).equals(await tensors(small('k1/small'))));
  });

  test("k = 2: steps 1–2 own records only; step t takes the partner's step t − 2 with its P̂ of that step", async () => {
    const dir = join(root, 'k2');
    await trainStalePair(config(dir, 5), 2, () => undefined);
    const small = join(dir, 'small');
    const large = join(dir, 'large');
    const manifest = (await readFile(join(small, 'manifest.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { step: number; consumed?: { agent: string; step: number }[] });
    assert.deepEqual(
      manifest.slice(1).map((e) => e.consumed!.map((c) => `${c.agent}@${c.step}`)),
      [[], [], ['large@1'], ['large@2'], ['large@3']],
    );
    // B·G = 4 foreign samples from step 3 on, none before.
    assert.deepEqual(await metric(small, 'small', 'foreign_samples'), [0, 0, 4, 4, 4]);
    // The partner's P̂ (Eq. 9 over its window, K = 5 here) as it stood when it sampled that step: the mean of its
    // rewards up to then — not its latest.
    const p = (await metric(large, 'large', 'reward_mean')) as number[];
    const took = (await metric(small, 'small', 'partner_large_p_hat')) as (number | undefined)[];
    assert.deepEqual(took.slice(0, 2), [undefined, undefined], 'no partner version taken');
    for (const t of [3, 4, 5]) {
      const then = mean(p.slice(0, t - 2));
      assert.ok(Math.abs(took[t - 1]! - then) < 1e-12, `step ${t}: P̂ ${took[t - 1]} of large@${t - 2}, want ${then}`);
    }
    assert.notEqual(mean(p.slice(0, 1)), mean(p.slice(0, 3)), 'the seed gives a P̂ that moves (the check bites)');
  });
});

describe('bench staleness --test', () => {
  test('runs the matrix (tiny pair, 1 seed, 2 steps), writes its tables, and a second start skips every run', () => {
    const out = join(root, 'bench');
    const first = hacrl(['bench', 'staleness', '--test', '--out', out, '--zoo-dir', zooDir]);
    assert.equal(first.status, 0, first.stderr);
    const n = staleRuns(stalenessPlan('test')).length;
    assert.equal(n, 6, 'hacpo and naive × k 0, 2, 4 × 1 seed');
    assert.match(first.stdout, new RegExp(`\\[${n}/${n}\\] naive-k4-s1 done in \\d+ s; ETA 0 s`));
    const second = hacrl(['bench', 'staleness', '--test', '--out', out, '--zoo-dir', zooDir]);
    assert.equal(second.status, 0, second.stderr);
    assert.match(second.stdout, new RegExp(`${n} runs, ${n} already finished`));
  });

  test('the tables pair by seed: hacpo − naive at each k, and each k against k = 0', async () => {
    const md = await readFile(join(root, 'bench', 'results.md'), 'utf8');
    assert.match(
      md,
      /\| agent \| hacpo − naive, k=0 \| hacpo − naive, k=2 \| hacpo − naive, k=4 \| hacpo k=2 − k=0 \|/,
    );
    const json = JSON.parse(await readFile(join(root, 'bench', 'results.json'), 'utf8')) as {
      runs: { id: string; lag: number }[];
      differences: { agent: string; what: string; lag: number; n: number }[];
    };
    assert.equal(json.runs.length, 6);
    assert.equal(json.differences.filter((d) => d.agent === 'small').length, 3 + 2 * 2);
    assert.ok(json.differences.every((d) => d.n === stalenessPlan('test').testN));
  });
});
