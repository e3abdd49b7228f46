// Agents as separate processes (`hacrl agent`) exchanging rollouts over a real nats-server: a HACPO pair with
// different tokenizers (also as LoRA agents), and three agents, end with the same weights, optimizer moments,
// checkpoint state and metrics as the single-process run — also when an agent or the broker is SIGKILLed mid-run,
// when a publish is repeated, and when steps go through the Object Store. The exchange's own rules (agent order, rejected records, late agents) are checked in process first.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { RolloutExchange, type ExchangeOptions } from '../src/distributed/exchange.js';
import {
  brokerCredentials,
  NatsTransport,
  printableBroker,
  type NatsSettings,
} from '../src/distributed/nats-transport.js';
import { decodeStep, encodeHello, encodeStep } from '../src/distributed/records.js';
import { readSafetensors } from '../src/model/safetensors.js';
import { InProcessTransport, TransportClosed } from '../src/distributed/transport.js';
import { StopPoint } from '../src/run/interrupt.js';
import { loadDataSpec } from '../src/tasks/data-spec.js';
import type { SampleRecord } from '../src/train/sample-table.js';
import { hacrl, metricRows, TINY_AGENT_FLAGS } from './cli.js';
import { NatsServer } from '../src/distributed/nats-server.js';

/** Record `i` of agent `agent` in a step of 2 prompts × 2 responses. */
function record(agent: string, i: number, text = `${agent} says ${i}`): SampleRecord {
  return {
    id: i,
    generator: agent,
    role: agent,
    episode: i,
    group: Math.floor(i / 2),
    prompt: `question ${Math.floor(i / 2)}`,
    gold: '4',
    text,
    tokens: { prompt: [1, 2, 3], response: [4, 5, i] },
    generatorLogProbs: [-0.5, -1.25, -0.1 * (i + 1)],
    reward: i % 2,
    rewardParts: { math: i % 2 },
    truncated: false,
    stoppedByEos: true,
  };
}
const records = (agent: string): SampleRecord[] => [0, 1, 2, 3].map((i) => record(agent, i));
const metricsOf = (agent: string): Map<string, Record<string, number>> => new Map([[agent, { reward_mean: 0.5 }]]);

const exchangeOptions = (local: string, extra: Partial<ExchangeOptions> = {}): ExchangeOptions => ({
  run: 'unit',
  agents: ['a', 'b'],
  local: [local],
  limits: () => ({ groups: 2, groupSize: 2, vocabSize: 10 }),
  waitSeconds: 5,
  onLate: 'stop',
  fingerprint: {},
  log: () => {},
  ...extra,
});

/** A transport on which both agents have published their (empty) fingerprints, as greet() does. */
async function greetedTransport(): Promise<InProcessTransport> {
  const transport = new InProcessTransport();
  for (const agent of ['a', 'b']) await transport.publish(0, agent, encodeHello('unit', agent, {}));
  return transport;
}

describe('the rollout exchange', () => {
  test('every agent gets the same table, in agent order whatever the arrival order, numbered as one process', async () => {
    const transport = await greetedTransport();
    const b = new RolloutExchange(transport, exchangeOptions('b')).complete(1, records('b'), metricsOf('b'));
    await sleep(20); // b has published and waits for a
    const a = await new RolloutExchange(transport, exchangeOptions('a')).complete(1, records('a'), metricsOf('a'));
    const fromB = await b;
    assert.deepEqual(fromB.table, a.table);
    assert.deepEqual(
      a.table.map((r) => [r.generator, r.id, r.episode]),
      [...records('a'), ...records('b')].map((r, i) => [r.generator, i, i]),
    );
    assert.deepEqual([...fromB.sampled.keys()], ['a', 'b']);
  });

  test('a record that fails validation is refused naming the agent and the step', async () => {
    const transport = await greetedTransport();
    const bad = records('b');
    bad[2] = { ...bad[2]!, tokens: { ...bad[2]!.tokens, response: [4, 5, 99] } };
    await transport.publish(3, 'b', encodeStep('unit', 3, 'b', bad, { reward_mean: 0.5 }));
    await assert.rejects(
      new RolloutExchange(transport, exchangeOptions('a')).complete(3, records('a'), metricsOf('a')),
      /refused agent b's records of step 3: record 2: token id 99 outside the vocabulary \(10\); stopping before any learner reads it/,
    );
    await transport.publish(4, 'b', new TextEncoder().encode('{"format": "hacrl-step", "code": "rm -rf /"}'));
    await assert.rejects(
      new RolloutExchange(transport, exchangeOptions('a')).complete(4, records('a'), metricsOf('a')),
      /refused agent b's records of step 4: /,
    );
  });

  test('a step that differs from the stored one (another run under the same name) stops at once', async () => {
    const transport = new InProcessTransport();
    await transport.publish(1, 'a', encodeStep('unit', 1, 'a', records('b').slice(0, 0), { reward_mean: 0 }));
    const t0 = Date.now();
    await assert.rejects(
      new RolloutExchange(transport, exchangeOptions('a')).complete(1, records('a'), metricsOf('a')),
      /agent a's records of step 1 differ from the stored ones/,
    );
    assert.ok(Date.now() - t0 < 1000, 'no waiting');
  });

  test('a late agent is named with the step after the wait: the run stops, or goes on without it', async () => {
    const lines: string[] = [];
    const opts = (onLate: 'stop' | 'continue'): ExchangeOptions =>
      exchangeOptions('a', { waitSeconds: 0.2, onLate, log: (l) => lines.push(l) });
    const t0 = Date.now();
    await assert.rejects(
      new RolloutExchange(new InProcessTransport(), opts('stop')).complete(2, records('a'), metricsOf('a')),
      /agent b did not publish records of step 2 within 0\.2 s .*stopping/,
    );
    assert.ok(Date.now() - t0 < 2000, 'no wait beyond the configured time');
    const r = await new RolloutExchange(new InProcessTransport(), opts('continue')).complete(
      2,
      records('a'),
      metricsOf('a'),
    );
    assert.deepEqual(
      r.table.map((x) => x.generator),
      ['a', 'a', 'a', 'a'],
    );
    assert.match(lines.join('\n'), /agent b did not publish records of step 2 .* goes on without it/);
  });

  test('an agent waiting for a partner stops at once when the transport is closed under it, naming why', async () => {
    const transport = await greetedTransport();
    const t0 = Date.now();
    const waiting = new RolloutExchange(transport, exchangeOptions('a', { waitSeconds: 60 })).complete(
      1,
      records('a'),
      metricsOf('a'),
    );
    setTimeout(() => void transport.close('agent b failed: out of memory'), 100);
    await assert.rejects(waiting, (e: Error) => e instanceof TransportClosed && /agent b failed/.test(e.message));
    assert.ok(Date.now() - t0 < 5000, `stopped within 5 s of a 60 s wait (${Date.now() - t0} ms)`);
  });

  test("a stop request while waiting for a partner's records throws at the wait's safe point, not after it", async () => {
    let asked = false;
    const poll = () => {
      if (asked) throw new StopPoint();
    };
    const x = new RolloutExchange(await greetedTransport(), exchangeOptions('a', { waitSeconds: 60, poll }));
    setTimeout(() => (asked = true), 200);
    const t0 = Date.now();
    await assert.rejects(x.complete(1, records('a'), metricsOf('a')), StopPoint);
    assert.ok(Date.now() - t0 < 5000, `stopped ${Date.now() - t0} ms into a 60 s wait`);
  });
});

/** A transport of the test's own on the broker at `url`, for run `run`. */
const transportOn = (url: string, run: string, more: Partial<NatsSettings> = {}): Promise<NatsTransport> =>
  NatsTransport.open({
    broker: url,
    run,
    agent: 'test',
    maxMessageBytes: 1 << 20,
    maxObjectBytes: 1 << 24,
    connectSeconds: 10,
    ...more,
  });

describe('reaching the broker', () => {
  test('a broker that does not answer stops the agent after the wait, naming its address', async () => {
    const gone = await NatsServer.start();
    await gone.stop();
    const t0 = Date.now();
    await assert.rejects(
      transportOn(gone.url, 'gone', { connectSeconds: 0.5 }),
      new RegExp(`cannot reach the NATS server at ${gone.url} within 0.5 s .*start it \\(nats-server -js\\)`),
    );
    assert.ok(Date.now() - t0 < 10_000, 'no wait beyond the configured time');
  });

  test('user and password from a file or the environment; refused ones fail at once and are never printed', async () => {
    const server = await NatsServer.start(['--user', 'trainer', '--pass', 'right-secret']);
    const dir = await mkdtemp(join(tmpdir(), 'hacrl-creds-'));
    try {
      await writeFile(join(dir, 'password'), 'wrong-secret\n');
      const fromFile = await brokerCredentials({ user: 'trainer', passwordFile: join(dir, 'password') }, {});
      assert.deepEqual(fromFile, { user: 'trainer', password: 'wrong-secret' });
      const open = (c: Partial<NatsSettings>) => transportOn(server.url, 'creds', c);
      const t0 = Date.now();
      await assert.rejects(open(fromFile), (e: Error) => {
        assert.match(e.message, /refused this agent's credentials/);
        assert.doesNotMatch(e.message, /secret/);
        return true;
      });
      assert.ok(Date.now() - t0 < 10_000, 'refused credentials are not retried');
      const fromEnv = await brokerCredentials(
        { user: 'trainer', passwordFile: join(dir, 'password') },
        { HACRL_NATS_PASSWORD: 'right-secret' },
      );
      const t = await open(fromEnv);
      await t.publish(1, 'a', new TextEncoder().encode('{}'));
      assert.equal(new TextDecoder().decode((await t.fetch(1, 'a'))!), '{}');
      await t.close();
      assert.equal(printableBroker('nats://trainer:right-secret@10.0.0.2:4222'), 'nats://***@10.0.0.2:4222');
    } finally {
      await server.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

const root = await mkdtemp(join(tmpdir(), 'hacrl-distributed-'));
let broker: NatsServer | null = null;
after(async () => {
  await broker?.stop();
  await rm(root, { recursive: true, force: true });
});
const rewardPath = join(root, 'digits.mjs');

/** The starting agents: two with character tokenizers, one GPT-2-style with a byte-level BPE. */
const AGENTS: Record<string, string[]> = {
  char: [...TINY_AGENT_FLAGS, '--steps', '10'],
  bpe: ['--arch', 'gpt2', '--tokenizer', 'bpe', '--bpe-vocab', '300', ...TINY_AGENT_FLAGS, '--steps', '10'],
  third: [...TINY_AGENT_FLAGS, '--steps', '10', '--model-seed', '1'],
};
const agentDir = (name: string): string => join(root, 'agents', name);
const STEPS = 3;

/** A small HACPO run of `agents` as a YAML file: the one file `hacrl train` and every `hacrl agent` read. */
async function runConfig(name: string, agents: string[]): Promise<string> {
  const file = join(root, `${name}.yaml`);
  const yaml = [
    'preset: hacpo',
    'agents:',
    ...agents.flatMap((a) => [`  - name: ${a}`, `    checkpoint: ${agentDir(a)}`]),
    "data: { train: 'easy:train:64', validation: ['easy:test:4'], template: '{question}' }",
    'rollout: { promptsPerStep: 2, groupSize: 4, maxNewTokens: 12 }',
    'optim: { lr: 0.003 }',
    `reward: { math: 0, custom: [{ path: ${rewardPath}, weight: 1, name: digits }] }`,
    `steps: ${STEPS}`,
    'eval: { every: 0, problems: 4 }',
    'checkpoint: { every: 1 }',
    'exchange: { waitSeconds: 60 }',
  ];
  await writeFile(file, `${yaml.join('\n')}\n`);
  return file;
}

/** The command-line settings of a run of `config` in `runDir`, with more `key=value` overrides. */
const settings = (config: string, runDir: string, extra: string[]): string[] => [
  '--config',
  config,
  '--set',
  `runDir=${runDir}`,
  ...extra,
];

/** A transport of the test's own on the test's broker, for run `run`. */
const openTransport = (run: string): Promise<NatsTransport> => transportOn(broker!.url, run);

interface Exit {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** `hacrl agent --agent NAME` started in the background. */
function startAgent(config: string, runDir: string, name: string, extra: string[] = []) {
  const args = ['agent', '--agent', name, '--broker', broker!.url, ...settings(config, runDir, extra)];
  const child = spawn(process.execPath, ['dist/src/cli/main.js', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let [stdout, stderr] = ['', ''];
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<Exit>((r) => child.once('close', (status) => r({ status, stdout, stderr })));
  return { child, done };
}

/** Resolves once `ready()` holds; fails when `process` ends first. */
async function when(what: string, ready: () => boolean | Promise<boolean>, process: Promise<Exit>): Promise<void> {
  let ended: Exit | null = null;
  void process.then((e) => (ended = e));
  while (!(await ready())) {
    if (ended) assert.fail(`the agent ended before ${what}: ${(ended as Exit).stderr}`);
    await sleep(5);
  }
}

/** Each of `agents` as its own process; all must finish. */
async function runAgents(config: string, runDir: string, agents: string[], extra: string[] = []): Promise<void> {
  const exits = await Promise.all(agents.map((a) => startAgent(config, runDir, a, extra).done));
  exits.forEach((e, i) => assert.equal(e.status, 0, `${agents[i]}: ${e.stderr}`));
}

const checkpoint = (runDir: string, step: number): string =>
  join(runDir, 'checkpoints', `step-${String(step).padStart(6, '0')}`);
/** The weight files of agent folder `dir`: a LoRA agent's adapters (a PEFT folder), else its whole weights. */
const weightFiles = (dir: string): string[] =>
  existsSync(join(dir, 'adapter_config.json'))
    ? ['adapter_config.json', 'adapter_model.safetensors']
    : ['model.safetensors'];
/**
 * The weights of agent folder `dir` as bytes: each file's, a safetensors file's without its metadata (an adapter's
 * records its base relative to where the folder lies, which differs between a run folder and an agent's).
 */
const weights = async (dir: string): Promise<Buffer> =>
  Buffer.concat(await Promise.all(weightFiles(dir).map(async (f) => withoutMetadata(await readFile(join(dir, f)), f))));
function withoutMetadata(bytes: Buffer, name: string): Buffer {
  if (!name.endsWith('.safetensors')) return bytes;
  const headerBytes = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerBytes).toString('utf8')) as Record<string, unknown>;
  delete header.__metadata__;
  return Buffer.concat([Buffer.from(JSON.stringify(header)), bytes.subarray(8 + headerBytes)]);
}
const stateJson = async (dir: string): Promise<{ agents: { name: string; rngs: Record<string, number[]> }[] }> =>
  JSON.parse(await readFile(join(dir, 'state.json'), 'utf8')) as {
    agents: { name: string; rngs: Record<string, number[]> }[];
  };

/** The single-process run of `config` in `runDir`, with more `key=value` overrides. */
function oneProcess(config: string, runDir: string, extra: string[] = []): void {
  const r = hacrl(['train', ...settings(config, runDir, extra)]);
  assert.equal(r.status, 0, r.stderr);
}

/**
 * Every agent of the distributed run in `dist` ends with the weights (or adapters), AdamW moments, checkpoint state
 * and metrics of the one-process run `whole`.
 */
async function assertSameAsOneProcess(whole: string, dist: string, agents: string[]): Promise<void> {
  const wholeRows = await metricRows(whole);
  const wholeState = await stateJson(checkpoint(whole, STEPS));
  for (const a of agents) {
    const final = await weights(join(checkpoint(join(dist, a), STEPS), 'agents', a));
    assert.ok(final.equals(await weights(join(checkpoint(whole, STEPS), 'agents', a))), `${a}: final weights`);
    assert.ok(!final.equals(await weights(agentDir(a))), `${a}: the weights changed`);
    const moments = (run: string): Promise<Buffer> =>
      readFile(join(checkpoint(run, STEPS), 'optimizer', `${a}.safetensors`));
    assert.ok((await moments(join(dist, a))).equals(await moments(whole)), `${a}: AdamW moments`);
    // An agent's checkpoint holds only its own part; everything else in state.json (step, data cursor, run-wide RNG
    // states, HACPO's capability history of every agent) is the whole run's.
    assert.deepEqual(
      await stateJson(checkpoint(join(dist, a), STEPS)),
      { ...wholeState, agents: wholeState.agents.filter((x) => x.name === a) },
      `${a}: state.json`,
    );
    const rows = await metricRows(join(dist, a));
    assert.equal(rows.length, STEPS + 1, `${a}: the base validation and one row per step`);
    assert.deepEqual(
      rows,
      wholeRows.filter((r) => r.agent === a),
      `${a}: metrics`,
    );
  }
}

describe('hacrl agent: one process per agent over a real nats-server', () => {
  const pair = ['char', 'bpe'];
  const whole = join(root, 'whole');
  let config = '';
  before(async () => {
    await writeFile(
      rewardPath,
      'export default (s) => (s.response.match(/[0-9]/g) ?? []).length / Math.max(1, s.response.length);\n',
    );
    for (const [name, flags] of Object.entries(AGENTS)) {
      const r = hacrl([
        'sft',
        '--out',
        agentDir(name),
        '--eval-every',
        '0',
        '--eval-n',
        '4',
        '--train-n',
        '200',
        ...flags,
      ]);
      assert.equal(r.status, 0, r.stderr);
    }
    broker = await NatsServer.start();
    config = await runConfig('pair', pair);
    oneProcess(config, whole);
  });

  test('a HACPO pair with different tokenizers as two processes ends byte-equal to one process', async () => {
    const dist = join(root, 'pair');
    await runAgents(config, dist, pair, ['exchange.runId=pair']);
    await assertSameAsOneProcess(whole, dist, pair);
  });

  test('a repeated publish is ignored: a rerun agent republishes every step and still ends byte-equal', async () => {
    // The first run's records are on the broker (run "pair"). A different payload with the id of char's step 1 is
    // refused, the same one dropped, and char run again in a new folder publishes every step a second time.
    const t = await openTransport('pair');
    const before = await t.fetch(1, 'char');
    await assert.rejects(
      t.publish(1, 'char', new TextEncoder().encode('forged')),
      /already holds different records of agent char for step 1 of run pair/,
    );
    await t.publish(1, 'char', before!);
    assert.deepEqual(await t.fetch(1, 'char'), before);
    await t.close();
    const again = join(root, 'pair-again');
    const r = await startAgent(config, again, 'char', ['exchange.runId=pair']).done;
    assert.equal(r.status, 0, r.stderr);
    await assertSameAsOneProcess(whole, again, ['char']);
  });

  test('machines holding different data behind the same path are refused before any step', async () => {
    const data = join(root, 'train-data.jsonl');
    const rows = (await loadDataSpec('easy:train:16')).problems.map((p) => ({ prompt: p.prompt, answer: p.answer }));
    const write = (answers: string[]): Promise<void> =>
      writeFile(data, rows.map((r, i) => JSON.stringify({ ...r, answer: answers[i] })).join('\n') + '\n');
    await write(rows.map((r) => r.answer));
    const dir = join(root, 'data-differs');
    const extra = ['exchange.runId=data-differs', `data.train=${data}`];
    const a = startAgent(config, dir, 'char', extra);
    const t = await openTransport('data-differs');
    await when('its fingerprint was published', async () => (await t.fetch(0, 'char')) !== null, a.done);
    await t.close();
    // The second machine's file at the same path holds one other gold answer.
    await write(rows.map((r, i) => (i === 3 ? `${r.answer}0` : r.answer)));
    const b = startAgent(config, dir, 'bpe', extra);
    const [ea, eb] = await Promise.all([a.done, b.done]);
    assert.notEqual(eb.status, 0);
    assert.match(eb.stderr, /agent char's machine holds other data\.train than this one/);
    assert.notEqual(ea.status, 0);
    assert.match(ea.stderr, /agent bpe's machine holds other data\.train than this one/);
    for (const agent of ['char', 'bpe'])
      assert.ok(!existsSync(checkpoint(join(dir, agent), 1)), `${agent} trained no step`);
  });

  test('an agent SIGKILLed mid-run and started again resumes and ends byte-equal', async () => {
    const dist = join(root, 'killed-agent');
    const a = startAgent(config, dist, 'char', ['exchange.runId=killed-agent']);
    const b = startAgent(config, dist, 'bpe', ['exchange.runId=killed-agent']);
    // Mid-step: bpe has published its records of step 2 and not yet checkpointed the step.
    const t = await openTransport('killed-agent');
    await when('its step 2 was published', async () => (await t.fetch(2, 'bpe')) !== null, b.done);
    b.child.kill('SIGKILL');
    await t.close();
    assert.equal((await b.done).status, null, 'killed');
    assert.ok(!existsSync(checkpoint(join(dist, 'bpe'), STEPS)), 'killed before the end');
    // Started again with a longer wait: exchange settings may change between restarts.
    const restarted = await startAgent(config, dist, 'bpe', ['exchange.runId=killed-agent', 'exchange.waitSeconds=90'])
      .done;
    assert.equal(restarted.status, 0, restarted.stderr);
    assert.match(restarted.stdout, /resuming .* from step [1-2]/);
    assert.equal((await a.done).status, 0);
    await assertSameAsOneProcess(whole, dist, pair);
  });

  test('the broker SIGKILLed mid-run and started again loses nothing: byte-equal', async () => {
    const dist = join(root, 'killed-broker');
    const a = startAgent(config, dist, 'char');
    const b = startAgent(config, dist, 'bpe');
    const ready = join(checkpoint(join(dist, 'char'), 1), 'state.json');
    await when(`${ready} appeared`, () => existsSync(ready), a.done);
    await broker!.kill();
    await sleep(300);
    await broker!.restart();
    for (const [name, p] of [
      ['char', a],
      ['bpe', b],
    ] as const) {
      const e = await p.done;
      assert.equal(e.status, 0, `${name}: ${e.stderr}`);
    }
    await assertSameAsOneProcess(whole, dist, pair);
  });

  test('records over the message limit go through the Object Store: a 1.5 MB record, and whole runs, byte-equal', async () => {
    const t = await openTransport('big');
    const big = [record('a', 0, 'x'.repeat(1_500_000)), ...[1, 2, 3].map((i) => record('a', i))];
    const payload = encodeStep('big', 1, 'a', big, { reward_mean: 0.5 });
    assert.ok(payload.length > 1 << 20);
    await t.publish(1, 'a', payload);
    const back = decodeStep('big', 1, 'a', (await t.fetch(1, 'a'))!, { groups: 2, groupSize: 2, vocabSize: 10 });
    assert.deepEqual(back.records, big);
    await t.close();
    // Every step of every agent over a 1 KiB message limit: all records travel through the Object Store.
    const dist = join(root, 'objects');
    await runAgents(config, dist, pair, ['exchange.maxMessageBytes=1024']);
    await assertSameAsOneProcess(whole, dist, pair);
  });

  test('a HACPO pair of LoRA agents with different tokenizers, one with dropout and KL, SIGKILLed and restarted, ends byte-equal', async () => {
    const lora = [
      'agents.0.lora={rank: 4, alpha: 8}',
      'agents.1.lora={rank: 4, alpha: 8, dropout: 0.1}',
      'optim.klCoef=0.01',
      'optim.lr=0.01',
      'exchange.runId=lora',
    ];
    const wholeLora = join(root, 'whole-lora');
    oneProcess(config, wholeLora, lora);
    const dist = join(root, 'lora');
    const a = startAgent(config, dist, 'char', lora);
    const b = startAgent(config, dist, 'bpe', lora);
    // The agent with dropout is killed after its first checkpoint: restarted, it draws its masks from the saved RNG.
    const ready = join(checkpoint(join(dist, 'bpe'), 1), 'state.json');
    await when(`${ready} appeared`, () => existsSync(ready), b.done);
    b.child.kill('SIGKILL');
    assert.equal((await b.done).status, null, 'killed');
    assert.ok(!existsSync(checkpoint(join(dist, 'bpe'), STEPS)), 'killed before the end');
    const restarted = await startAgent(config, dist, 'bpe', lora).done;
    assert.equal(restarted.status, 0, restarted.stderr);
    assert.match(restarted.stdout, /resuming .* from step [1-2]/);
    assert.equal((await a.done).status, 0);
    await assertSameAsOneProcess(wholeLora, dist, pair);
    for (const a of pair) {
      const folder = join(checkpoint(join(dist, a), STEPS), 'agents', a);
      assert.ok(!existsSync(join(folder, 'model.safetensors')), `${a}: adapters only, no copy of the base`);
      const { tensors } = await readSafetensors(join(folder, 'adapter_model.safetensors'));
      assert.ok(
        [...tensors].some(([n, t]) => n.endsWith('lora_B.weight') && (t.data as Float32Array).some((v) => v !== 0)),
        `${a}: B moved from zero`,
      );
    }
    const { agents } = await stateJson(checkpoint(join(dist, 'bpe'), STEPS));
    assert.ok(agents[0]!.rngs.lora_dropout, 'the dropout RNG is checkpointed');
  });

  test('three agents as three processes end byte-equal to one process', async () => {
    const trio = ['char', 'bpe', 'third'];
    const config3 = await runConfig('trio', trio);
    const whole3 = join(root, 'whole3');
    oneProcess(config3, whole3);
    const dist = join(root, 'trio');
    await runAgents(config3, dist, trio);
    await assertSameAsOneProcess(whole3, dist, trio);
  });

  test('a late agent: the other stops after the configured wait, naming it and the step', async () => {
    const t0 = Date.now();
    const r = await startAgent(config, join(root, 'late'), 'char', ['exchange.waitSeconds=2']).done;
    const seconds = (Date.now() - t0) / 1e3;
    assert.equal(r.status, 1, r.stderr);
    // A partner that never started is missed at the greeting, before step 1 is sampled.
    assert.match(
      r.stderr,
      /agent bpe did not publish its fingerprint before step 1 within 2 s \(exchange\.waitSeconds\)/,
    );
    assert.ok(!existsSync(checkpoint(join(root, 'late', 'char'), 1)), 'no step was trained');
    assert.ok(seconds < 2 + 20, `stopped after ${seconds} s`);
  });
});
