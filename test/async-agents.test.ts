// Agents that do not wait for each other (exchange.mode async) as separate processes over a real nats-server: a fast
// and a slow agent (a test hook slows one), lockstep against async; SIGKILLed agents that resume from their manifests;
// every run replayed in one process from its manifests to byte-identical weights; an agent that joins a run under
// way and one that leaves it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { hacrl, rawMetricRows, TINY_AGENT_FLAGS } from './cli.js';
import { NatsServer } from '../src/distributed/nats-server.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-async-agents-'));
let broker: NatsServer | null = null;
after(async () => {
  await broker?.stop();
  await rm(root, { recursive: true, force: true });
});
const agentDir = (name: string): string => join(root, 'agents', name);
const STEPS = 6;

/** A HACPO run of `agents` as a YAML file with `exchange` settings; checkpoints every step, all kept. */
async function runConfig(name: string, agents: string[], exchange: string, steps = STEPS): Promise<string> {
  const file = join(root, `${name}.yaml`);
  const yaml = [
    'preset: hacpo',
    'agents:',
    ...agents.flatMap((a) => [`  - name: ${a}`, `    checkpoint: ${agentDir(a)}`]),
    "data: { train: 'easy:train:64', template: '{question}' }",
    'rollout: { promptsPerStep: 2, groupSize: 4, maxNewTokens: 12 }',
    'optim: { lr: 0.003 }',
    `reward: { math: 0, custom: [{ path: ${join(root, 'digits.mjs')}, weight: 1, name: digits }] }`,
    `steps: ${steps}`,
    'eval: { every: 0, atStart: false }',
    `checkpoint: { every: 1, keepLast: ${steps} }`,
    `exchange: { runId: ${name}, ${exchange} }`,
  ];
  await writeFile(file, `${yaml.join('\n')}\n`);
  return file;
}

interface Exit {
  status: number | null;
  stderr: string;
}

/** `hacrl agent --agent NAME` in the background, `slowMs` slower per step (the test hook), with more flags. */
function startAgent(config: string, runDir: string, name: string, slowMs = 0, flags: string[] = []) {
  const args = ['agent', '--agent', name, '--broker', broker!.url, '--config', config, '--set', `runDir=${runDir}`];
  const env = {
    ...process.env,
    HACRL_THREADS: '1',
    ...(slowMs > 0 ? { HACRL_TEST_STEP_DELAY_MS: String(slowMs) } : {}),
  };
  const child = spawn(process.execPath, ['dist/src/cli/main.js', ...args, ...flags], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env,
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<Exit>((r) => child.once('close', (status) => r({ status, stderr })));
  return { child, done };
}

const ok = async (name: string, e: Promise<Exit>): Promise<void> => {
  const x = await e;
  assert.equal(x.status, 0, `${name}: ${x.stderr}`);
};

/** Resolves once `ready()` holds; fails when `process` ends first. */
async function when(what: string, ready: () => boolean, process: Promise<Exit>): Promise<void> {
  let ended: Exit | null = null;
  void process.then((e) => (ended = e));
  while (!ready()) {
    if (ended) assert.fail(`the agent ended before ${what}: ${(ended as Exit).stderr}`);
    await sleep(5);
  }
}

const checkpoint = (runDir: string, step: number): string =>
  join(runDir, 'checkpoints', `step-${String(step).padStart(6, '0')}`);
const finalWeights = (runDir: string, agent: string, step = STEPS): Promise<Buffer> =>
  readFile(join(checkpoint(join(runDir, agent), step), 'agents', agent, 'model.safetensors'));

interface ManifestLine {
  step: number;
  joinedAfter?: number;
  consumed?: { agent: string; step: number }[];
}
const manifest = async (dir: string): Promise<ManifestLine[]> =>
  (await readFile(join(dir, 'manifest.jsonl'), 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as ManifestLine);
/** How many complete lines the manifest in `dir` has (0 while there is none). */
const manifestLines = (dir: string): number => {
  const file = join(dir, 'manifest.jsonl');
  return existsSync(file) ? readFileSync(file, 'utf8').split('\n').length - 1 : 0;
};

/** Every agent of the async run in `dist` replayed in one process: byte-identical final weights and moments. */
async function assertReplaysByteEqual(config: string, dist: string, agents: string[], steps: Record<string, number>) {
  const replay = `${dist}-replay`;
  const r = hacrl([
    'train',
    '--config',
    config,
    '--set',
    `runDir=${replay}`,
    `exchange.broker=${broker!.url}`,
    '--replay',
    dist,
  ]);
  assert.equal(r.status, 0, r.stderr);
  for (const a of agents) {
    assert.ok((await finalWeights(replay, a, steps[a])).equals(await finalWeights(dist, a, steps[a])), `${a}: weights`);
    const moments = (run: string) =>
      readFile(join(checkpoint(join(run, a), steps[a]!), 'optimizer', `${a}.safetensors`));
    assert.ok((await moments(replay)).equals(await moments(dist)), `${a}: AdamW moments`);
  }
}

describe('hacrl agent with exchange.mode async over a real nats-server', () => {
  before(async () => {
    await writeFile(
      join(root, 'digits.mjs'),
      'export default (s) => (s.response.match(/[0-9]/g) ?? []).length / Math.max(1, s.response.length);\n',
    );
    for (const [name, seed] of [
      ['fast', '0'],
      ['slow', '1'],
      ['late', '2'],
    ] as const) {
      const args = ['sft', '--out', agentDir(name), '--eval-every', '0', '--eval-n', '4', '--train-n', '200'];
      const r = hacrl([...args, ...TINY_AGENT_FLAGS, '--steps', '10', '--model-seed', seed]);
      assert.equal(r.status, 0, r.stderr);
    }
    broker = await NatsServer.start();
  });

  test('a fast and a slow agent: async does ≥ 1.6× the fast steps of lockstep per wall time, waits < 10%, replays byte-equal', async (t) => {
    const pair = ['fast', 'slow'];
    // Seconds between the fast agent's first and last checkpoint: its pace once both run.
    const pace = async (dist: string): Promise<number> =>
      ((await stat(checkpoint(join(dist, 'fast'), STEPS))).mtimeMs -
        (await stat(checkpoint(join(dist, 'fast'), 1))).mtimeMs) /
      1e3;
    const lockConfig = await runConfig('lock', pair, 'waitSeconds: 60');
    const lock = join(root, 'lock');
    await Promise.all([
      ok('fast', startAgent(lockConfig, lock, 'fast').done),
      ok('slow', startAgent(lockConfig, lock, 'slow', 900).done),
    ]);
    // maxAhead 5: the fast agent's step 6 needs the slow agent's step 1.
    const asyncConfig = await runConfig('async', pair, 'waitSeconds: 60, mode: async, maxAhead: 5, maxStaleness: 6');
    const dist = join(root, 'async');
    // The slow agent first, up to its step 1: process start-up times differ, paces are what is compared.
    const slow = startAgent(asyncConfig, dist, 'slow', 900, ['--leave-after', '3']);
    await when('the slow agent decided step 1', () => manifestLines(join(dist, 'slow')) >= 2, slow.done);
    await Promise.all([ok('fast', startAgent(asyncConfig, dist, 'fast').done), ok('slow', slow.done)]);
    const [lockSeconds, asyncSeconds] = [await pace(lock), await pace(dist)];
    t.diagnostic(
      `fast agent, steps 1→${STEPS}: lockstep ${lockSeconds.toFixed(2)} s, async ${asyncSeconds.toFixed(2)} s`,
    );
    assert.ok(
      lockSeconds >= 1.6 * asyncSeconds,
      `the fast agent's ${STEPS - 1} steps took ${lockSeconds.toFixed(2)} s in lockstep, ${asyncSeconds.toFixed(2)} s async`,
    );
    const rows = (await rawMetricRows(join(dist, 'fast'))).filter((r) => (r.step as number) >= 2);
    const waited = rows.reduce((s, r) => s + (r['agent/fast/time_exchange_wait_s'] as number), 0);
    t.diagnostic(`fast agent waited ${waited.toFixed(3)} s in async`);
    assert.ok(waited < 0.1 * asyncSeconds, `waited ${waited.toFixed(3)} s of ${asyncSeconds.toFixed(2)} s`);
    for (const r of await rawMetricRows(join(dist, 'fast')))
      if (r.step !== 0)
        assert.ok(
          (r.step as number) - (r['agent/fast/partner_slow_last_step'] as number) <= 5,
          `maxAhead at step ${r.step}`,
        );
    // The fast agent used every slow step published while it ran, none expired.
    const consumed = (await manifest(join(dist, 'fast'))).flatMap((l) => l.consumed ?? []);
    assert.ok(consumed.length >= 1 && consumed.every((c) => c.agent === 'slow'));
    await assertReplaysByteEqual(asyncConfig, dist, pair, { fast: STEPS, slow: 3 });
  });

  test('either agent SIGKILLed and started again resumes from its manifest: the run replays byte-equal', async () => {
    const pair = ['fast', 'slow'];
    const config = await runConfig('killed', pair, 'waitSeconds: 60, mode: async, maxAhead: 2, maxStaleness: 4');
    const dist = join(root, 'killed');
    const lines = (agent: string): number => manifestLines(join(dist, agent));
    const fast = startAgent(config, dist, 'fast', 150);
    const slow = startAgent(config, dist, 'slow', 400);
    await when('fast wrote step 3 of its manifest', () => lines('fast') >= 4, fast.done);
    fast.child.kill('SIGKILL');
    assert.equal((await fast.done).status, null);
    const fastAgain = startAgent(config, dist, 'fast', 150);
    await when('slow wrote step 4 of its manifest', () => lines('slow') >= 5, slow.done);
    slow.child.kill('SIGKILL');
    assert.equal((await slow.done).status, null);
    assert.ok(!existsSync(checkpoint(join(dist, 'slow'), STEPS)), 'killed before the end');
    await Promise.all([ok('fast', fastAgain.done), ok('slow', startAgent(config, dist, 'slow', 400).done)]);
    await assertReplaysByteEqual(config, dist, pair, { fast: STEPS, slow: STEPS });
  });

  test('a third agent joins after step 3 and another leaves at step 5: no hang, the manifests show both', async () => {
    const trio = ['fast', 'slow', 'late'];
    const config = await runConfig('trio', trio, 'waitSeconds: 20, mode: async, maxAhead: 2, maxStaleness: 4', 8);
    const dist = join(root, 'trio');
    const t0 = Date.now();
    // Slowed so that the third agent, started after step 3, is up before they finish.
    const fast = startAgent(config, dist, 'fast', 600);
    const leaving = startAgent(config, dist, 'slow', 600, ['--leave-after', '5']);
    await when('fast trained step 3', () => existsSync(checkpoint(join(dist, 'fast'), 3)), fast.done);
    const late = startAgent(config, dist, 'late', 0, ['--join']);
    await Promise.all([ok('fast', fast.done), ok('slow', leaving.done), ok('late', late.done)]);
    assert.ok(Date.now() - t0 < 60_000, 'no wait beyond the configured ones');
    const joined = (await manifest(join(dist, 'late')))[0]!.joinedAfter!;
    assert.ok(joined >= 3 && joined < 8, `late joined after step ${joined}`);
    assert.ok(!existsSync(checkpoint(join(dist, 'late'), joined)), 'it trained no step before it joined');
    assert.ok(existsSync(checkpoint(join(dist, 'late'), 8)));
    assert.ok(existsSync(checkpoint(join(dist, 'slow'), 5)) && !existsSync(checkpoint(join(dist, 'slow'), 6)));
    const taken = (await manifest(join(dist, 'fast'))).flatMap((l) => l.consumed ?? []);
    const of = (agent: string) => taken.filter((c) => c.agent === agent).map((c) => c.step);
    assert.ok(of('late').length > 0 && of('late').every((s) => s > joined), `fast used late's steps ${of('late')}`);
    assert.ok(of('slow').length > 0 && of('slow').every((s) => s <= 5), `fast used slow's steps ${of('slow')}`);
    const rows = await rawMetricRows(join(dist, 'fast'));
    assert.equal(rows.at(-1)!['agent/fast/partner_slow_last_step'], 5);
    await assertReplaysByteEqual(config, dist, trio, { fast: 8, slow: 5, late: 8 });
  });
});
