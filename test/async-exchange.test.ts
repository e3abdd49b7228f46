// The asynchronous exchange in one process (InProcessTransport): what a step consumes (oldest first, a cap per
// partner, expired steps counted), admission control by maxAhead, the manifest deciding a replayed step, and HACPO
// over stale partner steps — a hand-worked example where P̂ and the advantages follow the generator's version.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ADVANTAGE_ESTIMATORS } from '../src/algorithms/advantages.js';
import { capabilityAwareBatchAdvantages, partnerOnlyBaseline } from '../src/algorithms/hacpo/index.js';
import { AsyncExchange, checkAsyncSettings, type AsyncExchangeOptions } from '../src/distributed/async-exchange.js';
import { Manifest } from '../src/distributed/manifest.js';
import { StopPoint } from '../src/run/interrupt.js';
import { decodeStep, encodeHello, encodeStep } from '../src/distributed/records.js';
import { InProcessTransport } from '../src/distributed/transport.js';
import { learnerMetrics } from '../src/train/learner-metrics.js';
import { generatorSlots, partnerSlots } from '../src/train/learner-step.js';
import type { SampleRecord } from '../src/train/sample-table.js';
import { near } from './helpers.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-async-'));
after(() => rm(root, { recursive: true, force: true }));

/** Agent `agent`'s answers to step `step`'s one prompt, one record per reward. */
function answers(agent: string, step: number, rewards: number[]): SampleRecord[] {
  return rewards.map((reward, i) => ({
    id: i,
    generator: agent,
    role: agent,
    episode: i,
    group: 0,
    prompt: `question of step ${step}`,
    gold: '4',
    text: `${agent} ${i}`,
    tokens: { prompt: [1, 2], response: [3, i] },
    generatorLogProbs: [-0.5, -0.25],
    reward,
    rewardParts: { digits: reward },
    truncated: false,
    stoppedByEos: true,
  }));
}

/** Publishes agent `agent`'s step `step` with `rewards` and capability history `history`, as its exchange would. */
async function publish(t: InProcessTransport, agent: string, step: number, rewards: number[], history: number[]) {
  const payload = encodeStep('unit', step, agent, answers(agent, step, rewards), { reward_mean: 0 }, history);
  await t.publish(step, agent, payload);
}

let folders = 0;
/** An exchange of agent a (partner b) on `t` with a fresh manifest folder, or `manifestDir`'s. */
async function exchangeOf(
  t: InProcessTransport,
  more: Partial<AsyncExchangeOptions> = {},
  manifestDir = join(root, `m${folders++}`),
): Promise<AsyncExchange> {
  const x = new AsyncExchange(t, {
    run: 'unit',
    agents: ['a', 'b'],
    self: 'a',
    limits: () => ({ groups: 1, groupSize: 2, vocabSize: 10 }),
    waitSeconds: 5,
    onLate: 'stop',
    maxStaleness: 4,
    maxAhead: 2,
    maxStepsPerPartner: 1,
    promptsPerStep: 1,
    capabilityWindow: 5,
    renderPrompt: (p) => [7, p.length],
    drawn: (step) => [{ group: 0, prompt: `question of step ${step}`, gold: '4' }],
    manifest: await Manifest.open(manifestDir),
    join: false,
    fingerprint: {},
    log: () => {},
    ...more,
  });
  await x.greet();
  return x;
}

const sampled = () => new Map([['a', { reward_mean: 1 }]]);

describe('HACPO over stale partner steps (hand-worked)', () => {
  test("a stale partner batch takes its generator's P̂ at that step, not the partner's latest", async () => {
    // Agent b published step 1 (rewards 1, 0: P_1 = 0.5, history [0.5], P̂_b@1 = 0.5) and step 2 (rewards 1, 1:
    // P_2 = 1, history [0.5, 1], P̂_b@2 = 0.75, its latest). Agent a at step 3 answered its own prompt with rewards
    // 1, 1 (P_3 = 1, P̂_a = 1) and, one partner step per step (maxStepsPerPartner 1, oldest first), takes b's step 1.
    // The prompt of step 1 has no answer of a: Eq. 7′, the partner-only baseline, over b@1's two responses —
    //   ω^(a, b@1) = P̂_a / P̂_b@1 = 1 / 0.5 = 2;  μ̂ = (2·1 + 2·0) / 2 = 1 (not above the largest reward 1: no fallback)
    //   σ = unbiased std(1, 0) = 0.70710678…, plus ε = 1e-6;  A = (1 − 1)/(σ + ε) = 0, (0 − 1)/(σ + ε) = −1.414211…
    //   discrepancy coefficient ω^(b@1, a) = 0.5 / 1 = 0.5.
    // With b's latest P̂ (0.75) instead: ω = 1.333…, μ̂ = 0.666…, A = 0.4714…, −0.9428…, coefficient 0.75.
    const t = new InProcessTransport();
    await t.publish(0, 'b', encodeHello('unit', 'b', {}));
    await publish(t, 'b', 1, [1, 0], [0.5]);
    await publish(t, 'b', 2, [1, 1], [0.5, 1]);
    const x = await exchangeOf(t);
    const own = answers('a', 3, [1, 1]);
    const r = await x.complete(3, own, sampled());
    assert.deepEqual(
      r.table.map((s) => [s.generator, s.group, s.reward]),
      [
        ['a', 3, 1],
        ['a', 3, 1],
        ['b', 1, 1],
        ['b', 1, 0],
      ],
      "own answers in step 3's group, b's step 1 in step 1's",
    );
    assert.deepEqual(r.versions.capability, [0.5], "b@1's P̂, not its latest 0.75");
    assert.deepEqual(r.versions.prompts.get(1), [7, 'question of step 1'.length], "a's rendering of step 1's prompt");
    // The learner's update sees b@1 as generator 2 (after the team's a = 0, b = 1) with P̂ 0.5.
    const slots = generatorSlots(r.table, ['a', 'b'], r.versions);
    assert.deepEqual(slots, [0, 0, 2, 2]);
    const capability = [1, NaN, ...r.versions.capability];
    const out = ADVANTAGE_ESTIMATORS['capability-aware'].estimate({
      rewards: r.table.map((s) => s.reward),
      groups: r.table.map((s) => s.group),
      generators: slots,
      learner: 0,
      capability,
      capabilityBaseline: true,
      discrepancyCoefficient: true,
      partnerOnly: true,
    });
    near(out.advantages, [0, 0, 0, -1 / (Math.SQRT1_2 + 1e-6)], 1e-12);
    assert.equal(out.omega![2], 2);
    assert.equal(out.coefficients![2], 0.5);
    // The step's ω metric for b is the version's, not the 1 of b's team slot (which holds no record here).
    const partners = partnerSlots(r.table, [0, 1, 2, 3], slots, ['a', 'b'], 0);
    assert.deepEqual([...partners], [['b', [2]]]);
    const facts = { shared: true, pHat: 1, advantages: out, partnerSlots: partners, groups: 2, zeroVarianceGroups: 0 };
    const metrics = learnerMetrics({
      ...facts,
      foreignSamples: 2,
      foreignDropped: 0,
      mismatch: null,
      lr: 0,
      updates: { stats: {}, skippedUpdates: 0 },
    });
    assert.equal(metrics.omega_b, 2);
    // The same batch with b's latest P̂: the numbers the hand-worked comment gives for the wrong reading.
    const latest = capabilityAwareBatchAdvantages([1, 0], [1, 1], [1, 1], 0, [1, 1 / 0.75], { partnerOnly: true });
    const scale = Math.SQRT1_2 + 1e-6;
    near(latest.advantages, [(1 - 2 / 3) / scale, (0 - 2 / 3) / scale], 1e-12);
  });

  test('Eq. 7′ falls back to the plain mean when the scaled baseline exceeds every reward', () => {
    // ω = 4 on rewards 1, 0: μ̂ = (4 + 0)/2 = 2 > 1, so μ̂ = mean(1, 0) = 0.5.
    assert.deepEqual(partnerOnlyBaseline([1, 0], [1, 1], [1, 4], [0, 1]), { baseline: 0.5, fallback: true });
    assert.deepEqual(partnerOnlyBaseline([1, 0], [1, 1], [1, 0.5], [0, 1]), { baseline: 0.25, fallback: false });
    assert.throws(
      () => capabilityAwareBatchAdvantages([1, 0], [1, 1], [0, 0], 0, [1, 1]),
      /has no response of learner 0/,
      'still an error where partner-only groups are not expected (lockstep)',
    );
  });
});

describe('what an asynchronous step consumes', () => {
  test('oldest first, a cap per partner, steps older than maxStaleness expired and counted', async () => {
    const t = new InProcessTransport();
    await t.publish(0, 'b', encodeHello('unit', 'b', {}));
    for (let s = 1; s <= 5; s++) await publish(t, 'b', s, [1, 0], [0.5]);
    const x = await exchangeOf(t, { maxStaleness: 3, maxAhead: 3, maxStepsPerPartner: 2 });
    // At step 6: b's steps 1 and 2 are older than 6 − 3 = 3 (expired); 3 and 4 taken (cap 2); 5 waits.
    const r6 = await x.complete(6, answers('a', 6, [1, 0]), sampled());
    const m = r6.sampled.get('a')!;
    assert.deepEqual(
      [m.partner_b_steps, m.partner_b_expired, m.partner_b_age_mean, m.partner_b_age_max],
      [2, 2, 2.5, 3],
    );
    assert.deepEqual(
      r6.table.slice(2).map((s) => s.group),
      [3, 3, 4, 4],
    );
    const r7 = await x.complete(7, answers('a', 7, [1, 0]), sampled());
    assert.deepEqual(
      r7.table.slice(2).map((s) => s.group),
      [5, 5],
      'the next step starts after the last one taken',
    );
  });

  test('admission: an agent more than maxAhead steps ahead waits for the partner, at most waitSeconds', async () => {
    const t = new InProcessTransport();
    await t.publish(0, 'b', encodeHello('unit', 'b', {}));
    await publish(t, 'b', 1, [1, 0], [0.5]);
    const lines: string[] = [];
    const x = await exchangeOf(t, { maxAhead: 2, waitSeconds: 1, onLate: 'continue', log: (l) => lines.push(l) });
    // Step 3 is 2 ahead of b's step 1: no wait. Step 4 is 3 ahead: it waits until b publishes step 2.
    const r3 = await x.complete(3, answers('a', 3, [1, 0]), sampled());
    assert.ok(r3.sampled.get('a')!.time_exchange_wait_s! < 0.5);
    setTimeout(() => void publish(t, 'b', 2, [1, 1], [0.5, 1]), 300);
    const r4 = await x.complete(4, answers('a', 4, [1, 0]), sampled());
    const waited = r4.sampled.get('a')!.time_exchange_wait_s!;
    assert.ok(waited >= 0.25 && waited < 1, `waited ${waited} s for b's step 2`);
    assert.equal(r4.sampled.get('a')!.partner_b_last_step, 2);
    // Step 5 is 3 ahead of b's step 2 and b publishes nothing: after waitSeconds it goes on as if b left.
    const t0 = Date.now();
    await x.complete(5, answers('a', 5, [1, 0]), sampled());
    assert.ok(Date.now() - t0 >= 1000 && Date.now() - t0 < 3000);
    assert.match(lines.join('\n'), /agent b published no step after 2 within 1 s .* going on as if it left/);
    // onLate stop names the partner and the step instead.
    const y = await exchangeOf(t, { maxAhead: 0, waitSeconds: 0.2 });
    await assert.rejects(
      y.complete(3, answers('a', 3, [1, 0]), sampled()),
      /agent b published no step after 2 .*stopping/,
    );
    // A stop request while it waits at the bound: its safe point throws there, long before waitSeconds.
    let asked = false;
    setTimeout(() => (asked = true), 200);
    const poll = () => {
      if (asked) throw new StopPoint();
    };
    const z = await exchangeOf(t, { maxAhead: 0, waitSeconds: 60, poll });
    const t1 = Date.now();
    await assert.rejects(z.complete(3, answers('a', 3, [1, 0]), sampled()), StopPoint);
    assert.ok(Date.now() - t1 < 5000, `stopped ${Date.now() - t1} ms into a 60 s wait`);
  });

  test('a partner that left is not waited for; its published steps are still used', async () => {
    const t = new InProcessTransport();
    await t.publish(0, 'b', encodeHello('unit', 'b', {}));
    await publish(t, 'b', 1, [1, 0], [0.5]);
    await t.publish(1, 'b', new TextEncoder().encode('{"format":"hacrl-leave","agent":"b"}'), 'leave');
    const x = await exchangeOf(t, { maxAhead: 0, waitSeconds: 0.2 });
    const r = await x.complete(3, answers('a', 3, [1, 0]), sampled());
    assert.deepEqual(
      r.table.slice(2).map((s) => s.group),
      [1, 1],
    );
  });

  test('the manifest decides a step written before: a restart takes what it lists, whatever has arrived since', async () => {
    const t = new InProcessTransport();
    await t.publish(0, 'b', encodeHello('unit', 'b', {}));
    await publish(t, 'b', 1, [1, 0], [0.5]);
    const dir = join(root, 'replayed');
    const first = await (await exchangeOf(t, {}, dir)).complete(1, answers('a', 1, [1, 0]), sampled());
    await publish(t, 'b', 2, [1, 1], [0.5, 1]);
    const lines = (await readFile(join(dir, 'manifest.jsonl'), 'utf8')).trim().split('\n');
    assert.equal(lines.length, 2, 'its first line and step 1');
    assert.deepEqual(
      JSON.parse(lines[1]!).consumed.map((c: { step: number }) => c.step),
      [1],
    );
    // Started again (b's step 2 now there too), step 1 takes exactly the listed step 1.
    const again = await (await exchangeOf(t, {}, dir)).complete(1, answers('a', 1, [1, 0]), sampled());
    assert.deepEqual(again.table, first.table);
    // A manifest entry whose hash the broker's payload does not match is refused.
    const other = new InProcessTransport();
    await other.publish(0, 'b', encodeHello('unit', 'b', {}));
    await publish(other, 'b', 1, [0, 0], [0]);
    await assert.rejects(
      (await exchangeOf(other, {}, dir)).complete(1, answers('a', 1, [1, 0]), sampled()),
      /the manifest of step 1 lists agent b's step 1 with sha256 .*, the broker holds/,
    );
  });

  test('a partner step stored before the step its admission waited for is refused as published ahead of its author', async () => {
    const t = new InProcessTransport();
    await t.publish(0, 'b', encodeHello('unit', 'b', {}));
    const x = await exchangeOf(t, { maxAhead: 0, maxStepsPerPartner: 2 });
    // b's steps 1 and 2 appear after a greeted, before a's step 1: with maxAhead 0 honest b publishes step 2 only
    // after a's step 1 is stored.
    await publish(t, 'b', 1, [1, 0], [0.5]);
    await publish(t, 'b', 2, [1, 0], [0.5, 0.5]);
    await assert.rejects(
      x.complete(1, answers('a', 1, [1, 0]), sampled()),
      /refused agent b's records of step 2: stored before agent a's records of step 1, .*forged\?/,
    );
  });

  test("a version-3 payload's P_t must be its records' mean reward, and contradictory settings are refused", () => {
    const bytes = encodeStep('unit', 1, 'b', answers('b', 1, [1, 0]), {}, [0.9]);
    assert.throws(
      () => decodeStep('unit', 1, 'b', bytes, { groups: 1, groupSize: 2, vocabSize: 10 }),
      /capability 0\.9 for this step, its records' mean reward is 0\.5/,
    );
    assert.throws(() => checkAsyncSettings({ maxStaleness: 1, maxAhead: 2 }), /raise maxStaleness or lower maxAhead/);
  });
});
