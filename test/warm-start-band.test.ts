// Warm starts that stop inside a band of calibration success: the rule on fake learning curves (stops inside, reports a
// miss or an overshoot, sees only calibration seeds), its validation, and a real banded warm start whose reported
// calibration success is what the model does and which plays no held-out instance.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { engine } from '../src/backend/engine.js';
import {
  WarmStartBandSchema,
  bandMiss,
  trainIntoBand,
  trainIntoBandWithAttempts,
} from '../src/agents/warm-start-band.js';
import { WarmStartSchema, workflowAgent } from '../src/agents/workflow-agent.js';
import { AgentSpecSchema } from '../src/model/agent-spec.js';
import {
  CALIBRATION_SEED,
  calibrationSeeds,
  HELD_OUT_SEED,
  heldOutSeeds,
  playGreedy,
  successRate,
  trainingSeeds,
} from '../src/workflows/play.js';
import { Rng } from '../src/util/rng.js';
import { modelPolicy } from '../src/workflows/model-policy.js';
import { buildWorkflow } from '../src/workflows/registry.js';
import type { Workflow } from '../src/workflows/workflow.js';
import { hacrl } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-band-'));
after(() => rm(root, { recursive: true, force: true }));

/**
 * A fake learner: `train(n)` advances a step counter, `success(seeds)` reads the curve at it and records the seeds and
 * the step it was asked at.
 */
function fake(curve: (steps: number) => number) {
  let steps = 0;
  const chunks: (number | 'restart')[] = [];
  const asked: { steps: number; seeds: readonly number[] }[] = [];
  return {
    chunks,
    asked,
    restart: () => {
      chunks.push('restart');
      steps = 0;
      return Promise.resolve();
    },
    train: (n: number) => {
      chunks.push(n);
      steps += n;
      return Promise.resolve();
    },
    success: (seeds: readonly number[]) => {
      asked.push({ steps, seeds });
      return Promise.resolve(curve(steps));
    },
  };
}

/**
 * Plan-Path 4×4 in one turn whose calibration episodes end after one action with a scripted success: evaluation round r
 * (counted by resets of the first calibration instance) succeeds on the first `script[r]` of the calibration instances
 * (none past the script's end); training and warm-start episodes are the real ones.
 */
function scripted(script: number[]): Workflow<unknown> {
  const base = buildWorkflow({ name: 'plan-path', env: { height: 4, width: 4, maxShortest: 3 }, maxTurns: 1 });
  let round = -1;
  const seedOf = new Map<string, number>();
  return {
    ...base,
    env: {
      ...base.env,
      reset: (seed) => {
        if (seed === CALIBRATION_SEED) round++;
        const st = base.env.reset(seed);
        seedOf.set(base.env.instanceId(st), seed);
        return st;
      },
    },
    roles: base.roles.map((role) => ({
      ...role,
      act: async (state, response) => {
        const r = await role.act(state, response);
        const seed = seedOf.get(base.env.instanceId(state.env))!;
        if (seed < CALIBRATION_SEED) return r;
        return { ...r, done: true, success: seed - CALIBRATION_SEED < (script[round] ?? 0) };
      },
    })),
  };
}

const band = (o: object = {}) => WarmStartBandSchema.parse({ low: 0.2, high: 0.4, every: 100, instances: 50, ...o });

describe('warm starts stop inside a band of calibration success', () => {
  test('a rising curve: stops at the first chunk inside the band, having evaluated after every chunk', async () => {
    // 0, 0.1, 0.15, 0.3, … after 0, 100, 200, 300 steps: the first chunk at or above 20% is the third.
    const f = fake((s) => [0, 0.1, 0.15, 0.3, 0.5, 0.7][s / 100]!);
    const r = await trainIntoBand(band(), 3000, f.train, f.success, f.restart);
    assert.deepEqual(r, {
      steps: 300,
      calibration: 0.3,
      outcome: 'in-band',
      curve: [
        { steps: 100, success: 0.1 },
        { steps: 200, success: 0.15 },
        { steps: 300, success: 0.3 },
      ],
    });
    assert.deepEqual(f.chunks, [100, 100, 100]);
    assert.deepEqual(
      f.asked.map((a) => a.steps),
      [100, 200, 300],
    );
    // The same curve gives the same stop: it depends on the successes only.
    const g = fake((s) => [0, 0.1, 0.15, 0.3, 0.5, 0.7][s / 100]!);
    assert.deepEqual(await trainIntoBand(band(), 3000, g.train, g.success, g.restart), r);
  });

  test('a curve that never reaches the band is reported as a miss at the most steps (last chunk shorter)', async () => {
    const f = fake((s) => Math.min(0.1, s / 1000));
    const r = await trainIntoBand(band(), 350, f.train, f.success, f.restart);
    assert.equal(r.outcome, 'below');
    assert.equal(r.steps, 350);
    assert.equal(r.calibration, 0.1);
    assert.deepEqual(f.chunks, [100, 100, 100, 50]);
    assert.equal(r.curve.length, 4);
  });

  test('a chunk that jumps over the band is retraced from the start and checked in finer chunks', async () => {
    // 0.1 up to 150 steps, 0.3 at 175, 0.9 from 200: chunks of 100 jump from 0.1 to 0.9; chunks of 25 land inside.
    const curve = (s: number) => (s <= 150 ? 0.1 : s <= 175 ? 0.3 : 0.9);
    const f = fake(curve);
    const r = await trainIntoBand(band(), 3000, f.train, f.success, f.restart);
    assert.deepEqual(r, {
      steps: 175,
      calibration: 0.3,
      outcome: 'in-band',
      curve: [100, 200, 125, 150, 175].map((steps) => ({ steps, success: curve(steps) })),
    });
    assert.deepEqual(f.chunks, [100, 100, 'restart', 100, 25, 25, 25]);
    // refine 1: the overshoot is where it stops.
    const g = fake(curve);
    const off = await trainIntoBand(band({ refine: 1 }), 3000, g.train, g.success, g.restart);
    assert.deepEqual([off.outcome, off.steps, off.calibration], ['above', 200, 0.9]);
    assert.ok(!g.chunks.includes('restart'));
    // The overshooting chunk may be the shorter last one: the retrace ends at the most steps.
    const h = fake((s) => (s <= 250 ? 0.1 : 0.9));
    const last = await trainIntoBand(band(), 260, h.train, h.success, h.restart);
    assert.deepEqual([last.outcome, last.steps], ['above', 260]);
    assert.deepEqual(h.chunks, [100, 100, 60, 'restart', 200, 25, 25, 10]);
  });

  test('a retraced run that does not reach the band again is an error, not a silent stop', async () => {
    let calls = 0;
    const f = fake((s) => (s < 200 || calls > 0 ? 0.1 : 0.9));
    const restart = () => {
      calls++;
      return f.restart();
    };
    await assert.rejects(
      trainIntoBand(band(), 3000, f.train, f.success, restart),
      /retraced to step 200 scored 0\.1 on calibration, not the 0\.9 .*not deterministic/,
    );
  });

  test('a chunk that jumps over the band even in finer chunks stops there and says so; the band edges are inside', async () => {
    const f = fake((s) => (s < 200 ? 0.1 : 0.9));
    const r = await trainIntoBand(band(), 3000, f.train, f.success, f.restart);
    assert.deepEqual([r.outcome, r.steps, r.calibration], ['above', 200, 0.9]);
    assert.deepEqual(f.chunks, [100, 100, 'restart', 100, 25, 25, 25, 25]);
    for (const edge of [0.2, 0.4]) {
      const e = fake(() => edge);
      assert.equal((await trainIntoBand(band(), 3000, e.train, e.success, e.restart)).outcome, 'in-band', String(edge));
    }
  });

  test('it evaluates calibration seeds only: none held out, none a training or warm-start instance', async () => {
    const f = fake((s) => s / 1000);
    await trainIntoBand(band({ instances: 10_000 }), 1000, f.train, f.success, f.restart);
    const seen = new Set(f.asked.flatMap((a) => [...a.seeds]));
    assert.deepEqual([...seen].sort(), calibrationSeeds(10_000).sort());
    assert.equal(Math.min(...seen), CALIBRATION_SEED);
    // The most held-out instances a bench or config asks for, and every training seed of RL seeds below 100.
    for (const s of heldOutSeeds(10_000)) assert.equal(seen.has(s), false);
    assert.ok(Math.max(...trainingSeeds(99, 100_000, 4096)) < HELD_OUT_SEED);
    assert.ok(HELD_OUT_SEED + 10_000 < CALIBRATION_SEED);
  });

  test('bands and step counts are validated up front, with what to change', async () => {
    assert.throws(() => WarmStartBandSchema.parse({ low: 0, high: 0.4 }), /band\.low must be above 0/);
    assert.throws(() => WarmStartBandSchema.parse({ low: 0.5, high: 0.4 }), /band\.high must be at least band\.low/);
    assert.throws(
      () => WarmStartSchema.parse({ steps: 0, band: { low: 0.2, high: 0.4 } }),
      /a warm start with a band needs steps > 0/,
    );
    const f = fake(() => 0);
    await assert.rejects(trainIntoBand(band(), 0, f.train, f.success, f.restart), /needs at least 1 step/);
    assert.deepEqual(WarmStartBandSchema.parse({ low: 0.2, high: 0.4 }), {
      low: 0.2,
      high: 0.4,
      every: 100,
      refine: 4,
      instances: 100,
    });
  });

  test('a real banded warm start: its calibration success is what the model does, and it plays no held-out instance', async () => {
    const k = engine();
    const section = { name: 'plan-path', env: { height: 4, width: 4, wallProb: 0.1, maxShortest: 3 }, maxTurns: 2 };
    const played: number[] = [];
    const base = buildWorkflow(section);
    // Every instance the warm start builds (solver rows, detours, calibration) goes through env.reset.
    const wf: Workflow<unknown> = {
      ...base,
      env: {
        ...base.env,
        reset: (seed) => {
          played.push(seed);
          return base.env.reset(seed);
        },
      },
    };
    const spec = AgentSpecSchema.parse({ hidden: 32, layers: 1, heads: 2 });
    const warm = WarmStartSchema.parse({
      steps: 3,
      rows: 32,
      batchSize: 4,
      band: { low: 0.2, high: 0.4, every: 2, instances: 3 },
    });
    const a = await workflowAgent(wf, spec, warm, 0, k);
    assert.ok(a.band);
    // Chunks of 2 then the shorter last one; every chunk evaluated.
    assert.deepEqual(
      a.band.curve.map((p) => p.steps),
      a.band.outcome === 'below' ? [2, 3] : a.band.curve.map((_, i) => 2 * (i + 1)),
    );
    const replay = successRate(
      await playGreedy(
        base,
        Object.fromEntries(base.roles.map((r) => [r.policy, modelPolicy(a.model, a.tokenizer, k, new Rng(1))])),
        calibrationSeeds(3),
      ),
    );
    assert.equal(a.band.calibration, replay);
    for (const s of calibrationSeeds(3)) assert.ok(played.includes(s), `calibration instance ${s} played`);
    assert.equal(
      played.filter((s) => s >= HELD_OUT_SEED && s < HELD_OUT_SEED + 10_000).length,
      0,
      'no held-out instance',
    );
    // Deterministic: the same warm start again has the same weights and stop.
    const b = await workflowAgent(base, spec, warm, 0, k);
    assert.deepEqual(b.band, a.band);
    for (const [name, t] of a.model.params) assert.deepEqual(b.model.params.get(name)!.data, t.data, name);
  });

  test('a real warm start that overshoots is retraced: its weights are those of training straight to where it stopped', async () => {
    const k = engine();
    const spec = AgentSpecSchema.parse({ hidden: 32, layers: 1, heads: 2 });
    const warm = (every: number, refine: number) =>
      WarmStartSchema.parse({
        steps: 8,
        rows: 32,
        batchSize: 4,
        band: { low: 0.2, high: 0.4, every, instances: 4, refine },
      });
    // Chunks of 4: 0 of 4 at step 4, 4 of 4 at step 8 (over the band); retraced in chunks of 1: 0 at 5, 1 of 4 at 6.
    const refined = await workflowAgent(scripted([0, 4, 0, 1]), spec, warm(4, 4), 0, k);
    assert.deepEqual(refined.band, {
      steps: 6,
      calibration: 0.25,
      outcome: 'in-band',
      curve: [
        { steps: 4, success: 0 },
        { steps: 8, success: 1 },
        { steps: 5, success: 0 },
        { steps: 6, success: 0.25 },
      ],
      attempt: 1,
      attempts: [{ steps: 6, calibration: 0.25, outcome: 'in-band' }],
    });
    // Straight to step 6 under the same schedule (at most 8 steps), in one chunk.
    const straight = await workflowAgent(scripted([1]), spec, warm(6, 1), 0, k);
    assert.equal(straight.band!.steps, 6);
    for (const [name, t] of refined.model.params) assert.deepEqual(straight.model.params.get(name)!.data, t.data, name);
  });

  test('a missed band is tried again with the next batch order: the first try inside it stops, else the nearest is kept', async () => {
    // Try a's curve; begin records which tries ran.
    const run = async (curves: ((s: number) => number)[], attempts?: number) => {
      const begun: number[] = [];
      const r = await trainIntoBandWithAttempts(band(attempts === undefined ? {} : { attempts }), 300, (a) => {
        begun.push(a);
        return { ...fake(curves[a]!), result: () => `try ${a}` };
      });
      return { ...r, begun };
    };
    const below = () => 0.1;
    const inside = (s: number) => (s < 200 ? 0.1 : 0.3);
    // Absent attempts: one try, as trainIntoBand alone.
    const one = await run([below, inside]);
    assert.deepEqual(one.begun, [0]);
    assert.deepEqual([one.result, one.band.outcome, one.band.attempt], ['try 0', 'below', 1]);
    const f = fake(below);
    const { attempt, attempts, ...alone } = one.band;
    assert.deepEqual(alone, await trainIntoBand(band(), 300, f.train, f.success, f.restart));
    assert.deepEqual([attempt, attempts], [1, [{ steps: 300, calibration: 0.1, outcome: 'below' }]]);
    // The second try lands: the third never runs.
    const two = await run([below, inside, inside], 3);
    assert.deepEqual(two.begun, [0, 1]);
    assert.equal(two.result, 'try 1');
    assert.deepEqual(
      [two.band.outcome, two.band.steps, two.band.calibration, two.band.attempt],
      ['in-band', 200, 0.3, 2],
    );
    assert.deepEqual(two.band.curve, [
      { steps: 100, success: 0.1 },
      { steps: 200, success: 0.3 },
    ]);
    assert.deepEqual(
      two.band.attempts.map((a) => a.outcome),
      ['below', 'in-band'],
    );
    // None lands: the nearest to the band is kept (0.45 is 0.05 above it; 0.1 and 0.05 are 0.1 and 0.15 below).
    const over = (s: number) => (s < 200 ? 0.1 : 0.45);
    const none = await run([below, () => 0.05, over], 3);
    assert.deepEqual(
      [none.result, none.band.outcome, none.band.calibration, none.band.attempt],
      ['try 2', 'above', 0.45, 3],
    );
    // On a tie the earliest is kept.
    const tie = await run([below, below], 2);
    assert.deepEqual([tie.result, tie.band.attempt, tie.begun], ['try 0', 1, [0, 1]]);
    assert.deepEqual(
      [0.1, 0.2, 0.3, 0.4, 0.45].map((c) => +bandMiss(band(), c).toFixed(6)),
      [0.1, 0, 0, 0, 0.05],
    );
    assert.throws(() => band({ attempts: 0 }), /band\.attempts is at least 1/);
    assert.throws(() => band({ attempts: 11 }), /band\.attempts is at most 10/);
  });

  test('a real warm start that misses the band tries the next batch order: its weights are those of that seed alone', async () => {
    const k = engine();
    const spec = AgentSpecSchema.parse({ hidden: 32, layers: 1, heads: 2 });
    const warm = (every: number, attempts?: number) =>
      WarmStartSchema.parse({
        steps: 8,
        rows: 32,
        batchSize: 4,
        band: { low: 0.2, high: 0.4, every, instances: 4, refine: 1, ...(attempts ? { attempts } : {}) },
      });
    // Try 1 (batch order 0): 0 of 4 at steps 4 and 8, below. Try 2 (batch order 1): 0 at 4, 1 of 4 at 8, inside.
    const lines: string[] = [];
    const tried = await workflowAgent(scripted([0, 0, 0, 1]), spec, warm(4, 3), 0, k, (l) => lines.push(l));
    assert.deepEqual(tried.band!.attempts, [
      { steps: 8, calibration: 0, outcome: 'below' },
      { steps: 8, calibration: 0.25, outcome: 'in-band' },
    ]);
    assert.equal(tried.band!.attempt, 2);
    assert.ok(lines.includes('warm start: attempt 2 of 3, batch order 1 (no earlier attempt stopped in the band)'));
    // Batch order 1 alone, straight to step 8: the same weights; batch order 0's differ.
    const straight = await workflowAgent(scripted([1]), spec, warm(8), 1, k);
    assert.equal(straight.band!.outcome, 'in-band');
    for (const [name, t] of tried.model.params) assert.deepEqual(straight.model.params.get(name)!.data, t.data, name);
    const first = await workflowAgent(scripted([1]), spec, warm(8), 0, k);
    assert.ok(
      [...first.model.params].some(([name, t]) => !t.data.every((x, i) => x === tried.model.params.get(name)!.data[i])),
    );
  });

  test('hacrl mas warmstart --band: says where it stopped; a malformed band is refused before training', () => {
    const tiny = ['--hidden', '32', '--layers', '1', '--heads', '2', '--rows', '32', '--batch-size', '4'];
    const out = join(root, 'cli');
    const flags = ['--steps', '2', '--band', '0.2,0.4', '--band-every', '1', '--band-instances', '2'];
    const r = hacrl(['mas', 'warmstart', '--out', out, ...tiny, ...flags]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /warm start calibration: \d+\.\d% greedy on 2 instances/);
    assert.match(
      r.stdout,
      /saved .* \(plan-path, vocabulary \d+, [12] warm-start steps, \d+\.\d% on calibration: (in-band|above|below)\)/,
    );
    assert.ok(existsSync(join(out, 'model.safetensors')));
    // A band no 2-step agent reaches, tried twice: both at 0%, so the first is kept, and the line says so.
    const twice = hacrl([
      'mas',
      'warmstart',
      '--out',
      join(root, 'twice'),
      ...tiny,
      ...flags,
      '--band',
      '0.99,1',
      '--band-attempts',
      '2',
    ]);
    assert.equal(twice.status, 0, twice.stderr);
    assert.equal(twice.stdout.match(/warm start calibration/g)!.length, 2 * 2);
    assert.match(twice.stdout, /attempt 2 of 2, batch order 1/);
    assert.match(twice.stdout, /2 warm-start steps, 0\.0% on calibration: below \(attempt 1 of 2 tried\)\)/);
    const bad = hacrl(['mas', 'warmstart', '--out', join(root, 'bad'), ...tiny, '--steps', '2', '--band', '0.2']);
    assert.notEqual(bad.status, 0);
    assert.match(bad.stderr, /--band takes two fractions, low and high, e\.g\. 0\.2,0\.4; got 0\.2/);
    const inverted = hacrl([
      'mas',
      'warmstart',
      '--out',
      join(root, 'inv'),
      ...tiny,
      '--steps',
      '2',
      '--band',
      '0.4,0.2',
    ]);
    assert.match(inverted.stderr, /band\.high must be at least band\.low/);
    assert.equal(existsSync(join(root, 'inv')), false, 'nothing written');
  });
});
