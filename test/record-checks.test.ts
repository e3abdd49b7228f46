// Partners' records re-checked on arrival: prompts and gold against this agent's own draw, text against the decoding
// of the ids, rewards against the run's reward functions, lengths, group sizes, log-prob floor and accuracies; the
// exchange's onBadRecord policy; and the fingerprint that refuses machines holding different data or weights.
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { RolloutExchange, type ExchangeOptions } from '../src/distributed/exchange.js';
import { checkPartnerStep, LOG_PROB_FLOOR, type PartnerSettings } from '../src/distributed/record-checks.js';
import { encodeHello, encodeStep } from '../src/distributed/records.js';
import { runFingerprint } from '../src/distributed/run-fingerprint.js';
import { InProcessTransport } from '../src/distributed/transport.js';
import { mathReward, scoreSamples, type WeightedReward } from '../src/rewards/reward.js';
import { CharTokenizer } from '../src/tokenizer/char-tokenizer.js';
import type { SampleRecord } from '../src/train/sample-table.js';
import { resolveRun } from '../src/train/resolved-run.js';
import { parseRunConfig } from '../src/config/load-config.js';

const tokenizer = new CharTokenizer({
  alphabet: '0123456789 +-=?\\{}abdeoqx',
  specialTokens: ['<eos>'],
  names: { eos: '<eos>' },
});
const partner: PartnerSettings = { tokenizer, groupSize: 2, maxNewTokens: 16, stopStrings: [] };
const rewards: WeightedReward[] = [{ name: 'math', fn: mathReward(), weight: 1 }];
const QUESTIONS = [
  { prompt: '1+1=?', gold: '2' },
  { prompt: '2+3=?', gold: '5' },
];
/** Each prompt's two responses: one right, one wrong. */
const TEXTS = [
  ['\\boxed{2}', '\\boxed{3}'],
  ['\\boxed{5}', 'x'],
];

/** The honest records of `agent` (2 prompts × 2 responses), their rewards scored by the run's rewards. */
async function honest(agent: string): Promise<SampleRecord[]> {
  const rows = QUESTIONS.flatMap((q, group) => TEXTS[group]!.map((text) => ({ ...q, group, text })));
  const scored = await scoreSamples(
    rows.map((r) => ({ prompt: r.prompt, response: r.text, gold: r.gold })),
    rewards,
  );
  return rows.map((r, i) => ({
    id: i,
    generator: agent,
    role: agent,
    episode: i,
    group: r.group,
    prompt: r.prompt,
    gold: r.gold,
    text: r.text,
    tokens: { prompt: tokenizer.encode(r.prompt), response: [...tokenizer.encode(r.text), tokenizer.eosId] },
    generatorLogProbs: new Array<number>(r.text.length + 1).fill(-0.5),
    reward: scored.scores[i]!.total,
    rewardParts: scored.scores[i]!.values,
    truncated: false,
    stoppedByEos: true,
  }));
}

const check = async (records: SampleRecord[], metrics = { accuracy: 0.5 }): Promise<void> =>
  checkPartnerStep('b', 3, records, metrics, await honest('a'), partner, rewards);

/** Record 1 of b's honest step with `change` applied. */
async function forged(change: Partial<SampleRecord>): Promise<SampleRecord[]> {
  const records = await honest('b');
  records[1] = { ...records[1]!, ...change };
  return records;
}

describe("a partner's records re-checked on arrival", () => {
  test('an honest step passes', async () => {
    await check(await honest('b'));
  });

  test('each forged field is refused naming the agent, the step, the field and the value', async () => {
    const cases: [Partial<SampleRecord> | null, RegExp][] = [
      [{ reward: 1 }, /agent b's records of step 3: record 1 reward = 1: the run's rewards give 0/],
      [{ reward: 1e300 }, /record 1 reward = 1e\+300/],
      [{ rewardParts: { math: 1 } }, /record 1 rewardParts = "\{\\"math\\":1\}"/],
      [{ text: '\\boxed{2}' }, /record 1 text = "\\\\boxed\{2\}": its response ids decode to "\\\\boxed\{3\}"/],
      [{ prompt: '9+9=?' }, /record 1 prompt = "9\+9=\?": this step's prompt 0 is "1\+1=\?"/],
      [{ gold: '3' }, /record 1 gold = "3"/],
      [
        { generatorLogProbs: [-1e308, ...new Array<number>(9).fill(-0.5)] },
        /generatorLogProbs = -1e\+308: below the floor/,
      ],
      [{ group: 1 }, /prompt 0 responses = 1: its group size is 2|record 1 prompt/],
    ];
    for (const [change, want] of cases)
      await assert.rejects(check(await forged(change!)), want, JSON.stringify(change));
    const long = [...tokenizer.encode('\\boxed{3}'), ...new Array<number>(10).fill(tokenizer.encode('x')[0]!)];
    await assert.rejects(
      check(
        await forged({ tokens: { prompt: tokenizer.encode('1+1=?'), response: long }, text: tokenizer.decode(long) }),
      ),
      /record 1 response length = 19: over its maxNewTokens \(16\)/,
    );
    await assert.rejects(
      check(await honest('b'), { accuracy: 2 }),
      /its metrics accuracy = 2: an accuracy lies in \[0, 1\]/,
    );
    assert.ok(LOG_PROB_FLOOR < -100, 'the floor is below every honest float32 log-prob');
  });

  test('stop strings cut the expected text as sampling cut it', async () => {
    const cut: PartnerSettings = { ...partner, stopStrings: ['}'] };
    const records = (await honest('b')).map((r) => ({ ...r, text: r.text.replace(/\}.*/, '') }));
    const scored = await scoreSamples(
      records.map((r) => ({ prompt: r.prompt, response: r.text, gold: r.gold })),
      rewards,
    );
    const rescored = records.map((r, i) => ({
      ...r,
      reward: scored.scores[i]!.total,
      rewardParts: scored.scores[i]!.values,
    }));
    await checkPartnerStep('b', 3, rescored, {}, await honest('a'), cut, rewards);
    await assert.rejects(checkPartnerStep('b', 3, await honest('b'), {}, await honest('a'), cut, rewards), /text/);
  });
});

const options = (local: string, extra: Partial<ExchangeOptions> = {}): ExchangeOptions => ({
  run: 'unit',
  agents: ['a', 'b'],
  local: [local],
  limits: () => ({ groups: 2, groupSize: 2, vocabSize: tokenizer.vocabSize }),
  waitSeconds: 2,
  onLate: 'stop',
  fingerprint: { 'data.train': 'same' },
  check: (agent, step, p, own) => checkPartnerStep(agent, step, p.records, p.metrics, own, partner, rewards),
  log: () => {},
  ...extra,
});

describe('the exchange and a forged partner step', () => {
  test('onBadRecord stop: the step is refused before any learner gets a table; skip: it goes on without it', async () => {
    const transport = new InProcessTransport();
    await transport.publish(0, 'b', encodeHello('unit', 'b', { 'data.train': 'same' }));
    await transport.publish(3, 'b', encodeStep('unit', 3, 'b', await forged({ reward: 1 }), { accuracy: 0.5 }));
    const a = new RolloutExchange(transport, options('a'));
    await a.greet();
    const own = await honest('a');
    await assert.rejects(
      a.complete(3, own, new Map([['a', { accuracy: 0.5 }]])),
      /refused agent b's records of step 3: record 1 reward = 1: .*stopping before any learner reads it \(exchange\.onBadRecord: stop\)/,
    );
    const lines: string[] = [];
    const skip = new RolloutExchange(transport, options('a', { onBadRecord: 'skip', log: (l) => lines.push(l) }));
    await skip.greet();
    const r = await skip.complete(3, own, new Map([['a', { accuracy: 0.5 }]]));
    assert.deepEqual(
      r.table.map((x) => x.generator),
      ['a', 'a', 'a', 'a'],
    );
    assert.deepEqual([...r.sampled.keys()], ['a']);
    assert.match(lines.join('\n'), /step 3 goes on without agent b \(exchange\.onBadRecord: skip\)/);
  });

  test('a step stored before the step its author needed first was published ahead of it, and is refused', async () => {
    const transport = new InProcessTransport();
    for (const agent of ['a', 'b'])
      await transport.publish(0, agent, encodeHello('unit', agent, { 'data.train': 'same' }));
    const metrics = new Map([['a', { accuracy: 0.5 }]]);
    await transport.publish(1, 'b', encodeStep('unit', 1, 'b', await honest('b'), { accuracy: 0.5 }));
    // Someone publishes b's step 2 before a has published step 1: b could not have sampled it yet.
    await transport.publish(2, 'b', encodeStep('unit', 2, 'b', await honest('b'), { accuracy: 0.5 }));
    const a = new RolloutExchange(transport, options('a'));
    await a.greet();
    await a.complete(1, await honest('a'), metrics);
    await assert.rejects(
      a.complete(2, await honest('a'), metrics),
      /refused agent b's records of step 2: stored before agent a's records of step 1, which its author needed first/,
    );
  });

  test('machines holding different data are refused at the greeting, naming what differs', async () => {
    const transport = new InProcessTransport();
    await transport.publish(0, 'b', encodeHello('unit', 'b', { 'data.train': 'other', 'checkpoint of a': 'x' }));
    const a = new RolloutExchange(
      transport,
      options('a', { fingerprint: { 'data.train': 'same', 'checkpoint of a': 'x' } }),
    );
    await assert.rejects(a.greet(), /agent b's machine holds other data\.train than this one .*copy the files over/);
    // Restarted with other data, an agent finds its own first fingerprint on the broker.
    const changed = new RolloutExchange(transport, options('b', { fingerprint: { 'data.train': 'changed' } }));
    await assert.rejects(changed.greet(), /agent b started this run with other data or starting checkpoints/);
  });

  test('the fingerprint covers the data a relative path reads on each machine, and the checkpoint files', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'hacrl-fingerprint-'));
    const [one, two] = [join(dir, 'one.jsonl'), join(dir, 'two.jsonl')];
    await writeFile(one, '{"prompt": "1+1=?", "answer": "2"}\n');
    await writeFile(two, '{"prompt": "1+1=?", "answer": "3"}\n');
    const ckpt = join(dir, 'ckpt');
    const { mkdir } = await import('node:fs/promises');
    await mkdir(ckpt);
    await writeFile(join(ckpt, 'config.json'), '{}');
    await writeFile(join(ckpt, 'README.md'), 'notes');
    const fingerprint = (train: string) =>
      runFingerprint(resolveRun(parseRunConfig({ agents: [{ name: 'a', checkpoint: ckpt }], data: { train } })));
    const first = await fingerprint(one);
    assert.notEqual(first['data.train'], (await fingerprint(two))['data.train']);
    assert.deepEqual(await fingerprint(one), first);
    await writeFile(join(ckpt, 'README.md'), 'other notes');
    assert.deepEqual(await fingerprint(one), first, 'files that do not make the model do not count');
    await writeFile(join(ckpt, 'config.json'), '{"x": 1}');
    assert.notEqual((await fingerprint(one))['checkpoint of a'], first['checkpoint of a']);
  });
});
