/**
 * `hacrl bench async`: agents of different speeds as separate `hacrl agent` processes over a local nats-server, each
 * pinned to a core, in lockstep and in async exchange settings. Per run and agent: steps per hour while every agent
 * ran, the share of step wall time spent outside its own work (waiting for partners, the exchange, checkpoints), the
 * partners' off-policy ages and expired steps, whether maxAhead held, and held-out greedy accuracy at equal steps and
 * at equal wall time (the lockstep run's, same seed). Every run is bounded by steps; only which checkpoint counts as
 * "equal wall time" and what an async step consumed depend on timing, and the run folders record both.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readFile, readdir, rm, stat } from 'node:fs/promises';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { NatsServer } from '../distributed/nats-server.js';
import { agentMetrics } from '../run/metric-names.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import { reproducibleMode } from '../backend/select.js';
import { writeFileAtomic, writeJsonAtomic } from '../util/atomic-write.js';
import { etaSeconds, formatDuration } from '../train/progress.js';
import { refuseOverlap } from '../util/output-paths.js';
import { agentOf, defaultZooDir, ensureAgent } from '../zoo/build.js';
import { ZOO, type PairName, type ZooData } from '../zoo/recipes.js';
import { asyncBenchPlan, type AsyncBenchMode, type AsyncBenchPlan, type AsyncSetting } from './async-bench-plan.js';
import { asyncBenchTable } from './async-bench-table.js';
import { measureCheckpoint } from './measure.js';
import { commit } from './paper.js';
import { HELD_OUT_SEED } from './paper-run.js';
import { zooRunConfig } from './run-config.js';

/** One agent the bench trains: its name, warm start and extra agent settings (LoRA, precision). */
export interface BenchAgent {
  name: string;
  dir: string;
  /** More fields of its `agents` entry; default none. */
  extra?: Record<string, unknown>;
}

/** A partner's steps as one agent consumed them over a run. */
export interface PartnerUse {
  /** Partner steps trained on. */
  consumed: number;
  /** Off-policy age (t − s) over them: mean and max; NaN when none was consumed. */
  ageMean: number;
  ageMax: number;
  /** Partner steps counted as expired (older than maxStaleness). */
  expired: number;
}

/** What one agent of one run measured. */
export interface AgentMeasure {
  /** Steps in its metrics (the steps it ran). */
  steps: number;
  /** Steps per hour while every agent of the run was training (from its checkpoints' times). */
  stepsPerHour: number;
  /** Share of its step wall time (steps 2…, between checkpoints) outside generate, score and train. */
  waitingShare: number;
  /** Share of its step wall time waiting at the maxAhead bound (time_exchange_wait_s; 0 in lockstep). */
  boundWaitShare: number;
  /**
   * Largest t − (a partner's newest published step when step t was decided) over the steps decided once the partner
   * had published one (before, it may not have joined: an agent not yet greeted is not waited for); null in lockstep,
   * alone, and when no partner had published a step.
   */
  maxLead: number | null;
  /** Seconds from the run's start to its last checkpoint. */
  seconds: number;
  partners: Record<string, PartnerUse>;
  /** Held-out greedy correctness (1/0 per problem) at its last step; absent without evaluation. */
  atEqualSteps?: number[];
  /** The step of its newest checkpoint no later than the lockstep run's wall time (0: the warm start), and its
   * correctness; absent without evaluation or for settings that are not timed against lockstep. */
  atEqualWall?: { step: number; correct: number[] };
}

/** The result of one run (setting × seed), written to results/<id>.json. */
export interface AsyncRunResult {
  id: string;
  setting: string;
  seed: number;
  /** exchange.maxAhead of the run (null in lockstep and alone). */
  maxAhead: number | null;
  /** Seconds from starting the processes to the last one's exit. */
  wallSeconds: number;
  /** Whether each agent ran pinned to its own core. */
  pinned: boolean;
  agents: Record<string, AgentMeasure>;
}

/** Where and how the bench runs. */
export interface AsyncBenchRun {
  plan: AsyncBenchPlan;
  agents: BenchAgent[];
  /** Data the runs train on and the held-out split is drawn from. */
  data: ZooData;
  out: string;
  log: (line: string) => void;
}

/** The cores agent processes are pinned to (`taskset -c`), or null (with the reason) when pinning is not possible. */
export function pinningCores(): { cores: number[] } | { reason: string } {
  if (availableParallelism() < 2) return { reason: `this machine has ${availableParallelism()} core` };
  const probe = spawnSync('taskset', ['-c', '0', 'true']);
  if (probe.error || probe.status !== 0) return { reason: 'taskset is missing or cannot pin (util-linux)' };
  return { cores: [0, 1] };
}

const checkpointStep = (name: string): number | null => {
  const m = /^step-(\d+)$/.exec(name);
  return m ? Number(m[1]) : null;
};

/** The checkpoints of the run folder `dir`: step and seconds since `t0` (ms epoch) when it was written. */
async function checkpointTimes(dir: string, t0: number): Promise<{ step: number; t: number; dir: string }[]> {
  const root = join(dir, 'checkpoints');
  const out = [];
  for (const name of existsSync(root) ? await readdir(root) : []) {
    const step = checkpointStep(name);
    if (step === null) continue;
    out.push({ step, t: ((await stat(join(root, name))).mtimeMs - t0) / 1e3, dir: join(root, name) });
  }
  return out.sort((a, b) => a.step - b.step);
}

/** The run config of `setting` for `agents`: checkpoints every step, all kept; a broker-wide unique run name. */
function settingConfig(r: AsyncBenchRun, s: AsyncSetting, agents: BenchAgent[], seed: number, runDir: string) {
  const { plan } = r;
  const exchange =
    s.mode === 'async' ? { mode: 'async', maxAhead: s.bound!, maxStaleness: s.bound!, waitSeconds: 3600 } : {};
  return zooRunConfig({
    agents: agents.map((a) => ({ name: a.name, dir: a.dir })),
    data: { ...r.data, maxNewTokens: plan.maxNewTokens },
    steps: plan.steps,
    prompts: plan.prompts,
    groupSize: plan.groupSize,
    lr: plan.lr,
    seed,
    runDir,
    method: {
      algorithm: s.algorithm,
      ...(agents.some((a) => a.extra)
        ? { agents: agents.map((a) => ({ name: a.name, checkpoint: a.dir, ...a.extra })) }
        : {}),
      checkpoint: { every: 1, keepLast: plan.steps },
      exchange: {
        runId: `${s.name}-seed${seed}-${agents.map((a) => a.name).join('-')}`,
        waitSeconds: 3600,
        ...exchange,
      },
    },
  });
}

/**
 * Starts `hacrl ARGS` (or node with `script` instead of the CLI) pinned to `core` (null: unpinned) with one kernel
 * thread; rejects naming its log on failure.
 */
function startCli(args: string[], core: number | null, log: string, script?: string[]): Promise<void> {
  const cli = [process.execPath, ...(script ?? [process.argv[1]!, ...args])];
  const [cmd, ...rest] = core === null ? cli : ['taskset', '-c', String(core), ...cli];
  const child = spawn(cmd!, rest, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, HACRL_THREADS: '1' },
  });
  const file = createWriteStream(log);
  child.stdout.pipe(file);
  child.stderr.pipe(file);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => {
      file.end();
      if (code === 0) resolve();
      else
        void readFile(log, 'utf8').then((text) =>
          reject(
            new Error(
              `${script ? script[0] : `hacrl ${args[0]}`} failed (${signal ?? `exit ${code}`}); ${log} ends:\n${text.slice(-2000)}`,
            ),
          ),
        );
    });
  });
}

/** One agent's measures from its run folder (metrics and checkpoint times), evaluation left out. */
async function measureAgent(
  name: string,
  dir: string,
  t0: number,
  window: { from: number; to: number },
): Promise<AgentMeasure & { checkpoints: { step: number; t: number; dir: string }[] }> {
  const rows = (await readFile(join(dir, 'metrics.jsonl'), 'utf8'))
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as { step: number } & Record<string, unknown>)
    .filter((r) => r.step >= 1)
    .map((r) => ({ step: r.step, m: agentMetrics(name, r) as Record<string, number> }));
  const checkpoints = await checkpointTimes(dir, t0);
  const at = new Map(checkpoints.map((c) => [c.step, c.t]));
  let wall = 0;
  let work = 0;
  let bound = 0;
  for (const { step, m } of rows) {
    const [before, after] = [at.get(step - 1), at.get(step)];
    if (before === undefined || after === undefined) continue;
    wall += after - before;
    work += (m.time_generate_s ?? 0) + (m.time_score_s ?? 0) + (m.time_train_s ?? 0);
    bound += m.time_exchange_wait_s ?? 0;
  }
  // Steps finished while every agent was training; a window too short to hold one (a run of very few steps) falls
  // back to the agent's own span from its first checkpoint to its last.
  const inWindow = checkpoints.filter((c) => c.t > window.from && c.t <= window.to).length;
  const [first, last] = [checkpoints[0]?.t ?? NaN, checkpoints.at(-1)?.t ?? NaN];
  const rate = inWindow >= 1 ? inWindow / (window.to - window.from) : (checkpoints.length - 1) / (last - first);
  const partners: Record<string, PartnerUse> = {};
  let maxLead: number | null = null;
  for (const { step, m } of rows)
    for (const [key, v] of Object.entries(m)) {
      const p = /^partner_(.+)_steps$/.exec(key)?.[1];
      if (p === undefined) continue;
      const u = (partners[p] ??= { consumed: 0, ageMean: 0, ageMax: -Infinity, expired: 0 });
      // Summed ages first; divided by the count below.
      if (v > 0) u.ageMean += v * m[`partner_${p}_age_mean`]!;
      if (v > 0) u.ageMax = Math.max(u.ageMax, m[`partner_${p}_age_max`]!);
      u.consumed += v;
      u.expired += m[`partner_${p}_expired`] ?? 0;
      // Before a partner's first step it may not have joined yet (an agent not yet greeted is not waited for).
      const newest = m[`partner_${p}_last_step`]!;
      if (newest >= 1) maxLead = Math.max(maxLead ?? -Infinity, step - newest);
    }
  for (const u of Object.values(partners)) {
    u.ageMean = u.consumed > 0 ? u.ageMean / u.consumed : NaN;
    if (u.consumed === 0) u.ageMax = NaN;
  }
  return {
    steps: rows.length,
    stepsPerHour: rate * 3600,
    waitingShare: wall > 0 ? Math.max(0, wall - work) / wall : NaN,
    boundWaitShare: wall > 0 ? bound / wall : NaN,
    maxLead,
    seconds: last,
    partners,
    checkpoints,
  };
}

/**
 * Runs one setting and seed and measures it; `lockWall`: the lockstep run's seconds of the same seed (the checkpoint
 * at equal wall time is each agent's newest written by then), null when the setting is not timed against it.
 */
async function runSetting(
  r: AsyncBenchRun,
  s: AsyncSetting,
  seed: number,
  broker: NatsServer,
  pin: number[] | null,
  lockWall: number | null,
): Promise<AsyncRunResult> {
  const id = `${s.name}-seed${seed}`;
  const runDir = join(r.out, 'runs', id);
  // A run stopped part-way starts again from scratch: only finished runs (with a result file) are kept.
  await rm(runDir, { recursive: true, force: true });
  await mkdir(runDir, { recursive: true });
  const teams = s.alone ? r.agents.map((a) => [a]) : [r.agents];
  const configs = teams.map((team) => {
    // Each agent process writes into <runDir>/<agent>; a run alone writes into the folder it is given.
    const cfg = settingConfig(r, s, team, seed, s.alone ? join(runDir, team[0]!.name) : runDir);
    return { team, cfg, file: join(runDir, `${s.alone ? team[0]!.name : 'run'}.json`) };
  });
  for (const c of configs) await writeJsonAtomic(c.file, c.cfg);
  const core = (i: number) => (pin === null ? null : pin[i % pin.length]!);
  const t0 = Date.now();
  const started = performance.now();
  await Promise.all(
    r.agents.map((a, i) => {
      const log = join(runDir, `${a.name}.log`);
      if (s.alone) return startCli(['train', '--config', configs[i]!.file], core(i), log);
      const args = ['agent', '--agent', a.name, '--broker', broker.url, '--config', configs[0]!.file];
      return startCli(args, core(i), log);
    }),
  );
  const wallSeconds = (performance.now() - started) / 1e3;
  // Every agent's own checkpoints first, to find the time span all of them were training.
  const spans = await Promise.all(r.agents.map((a) => checkpointTimes(join(runDir, a.name), t0)));
  const window = {
    from: Math.max(...spans.map((c) => c[0]?.t ?? Infinity)),
    to: Math.min(...spans.map((c) => c.at(-1)?.t ?? -Infinity)),
  };
  const split = r.plan.evalN > 0 ? await heldOutSplit(r) : null;
  const agents: Record<string, AgentMeasure> = {};
  for (const a of r.agents) {
    const { checkpoints, ...m } = await measureAgent(a.name, join(runDir, a.name), t0, window);
    agents[a.name] = m;
    if (split === null) continue;
    const accuracy = async (dir: string) => (await measureCheckpoint(dir, [split], r.data))[0]!.correct;
    const last = checkpoints.at(-1)!;
    m.atEqualSteps = await accuracy(join(last.dir, 'agents', a.name));
    if (lockWall === null) continue;
    const before = checkpoints.filter((c) => c.t <= lockWall).at(-1);
    m.atEqualWall =
      before === undefined
        ? { step: 0, correct: await accuracy(a.dir) }
        : {
            step: before.step,
            correct: before.step === last.step ? m.atEqualSteps : await accuracy(join(before.dir, 'agents', a.name)),
          };
  }
  return {
    id,
    setting: s.name,
    seed,
    maxAhead: s.mode === 'async' && !s.alone ? s.bound! : null,
    wallSeconds,
    pinned: pin !== null,
    agents,
  };
}

/** The held-out split greedy accuracy is measured on: the first `evalN` of the in-distribution test draw. */
async function heldOutSplit(r: AsyncBenchRun) {
  const d = r.data;
  return { name: 'test', problems: (await loadDataSpec(`${d.task}:test:${r.plan.evalN}:${HELD_OUT_SEED}`)).problems };
}

/** Seconds from the start of the lockstep run of a result to its last agent's last checkpoint. */
const lockstepSeconds = (lock: AsyncRunResult): number => Math.max(...Object.values(lock.agents).map((a) => a.seconds));

/** Options of `hacrl bench async`. */
export interface BenchAsyncCliOptions {
  /** The real shapes (Qwen2.5-0.5B + Llama-3.2-1B, random weights, LoRA r16, bf16): steps per hour only. */
  real?: boolean;
  /** Four zoo agents of different sizes: HACPO and naive sharing, lockstep and async, against each agent alone. */
  swarm?: boolean;
  /** Test-sized: the tiny pair, 1 seed, 3 steps, lockstep and async-2 (for CI). */
  test?: boolean;
  /** Seeds (1…N); default 5 (the pair), 3 (the swarm), 1 (real, test). */
  seeds?: number;
  /** RL steps per agent; default the mode's. */
  steps?: number;
  /** Held-out problems for greedy accuracy; default 200 (12 with --test). */
  evalN?: number;
  /** Output folder; default runs/bench-async[-real|-swarm|-test]. */
  out?: string;
  /** Zoo folder; default $HACRL_ZOO_DIR or runs/zoo. */
  zooDir?: string;
}

/** The agents of `mode`: zoo warm starts (built when missing) or the Hub-shaped folders with random weights. */
async function benchAgents(mode: AsyncBenchMode, zooDir: string, out: string, log: (line: string) => void) {
  if (mode === 'real') {
    const models = join(out, 'models');
    const dirs = { qwen: join(models, 'qwen2.5-0.5b-instruct'), llama: join(models, 'llama-3.2-1b-instruct') };
    if (!existsSync(join(dirs.llama, 'tokenizer.json'))) {
      log(`bench async: writing the Hub-shaped folders with random bf16 weights into ${models}`);
      const script = new URL('../../bench/hub-folders.js', import.meta.url).pathname;
      await startCli([], null, join(out, 'hub-folders.log'), [script, models]);
    }
    const extra = { precision: 'bf16', lora: { rank: 16, alpha: 32, targets: ['all-linear'] } };
    return Object.entries(dirs).map(([name, dir]) => ({ name, dir, extra }));
  }
  // Only the agents named are built, one after the other (a later stage builds its parent first).
  const pick = async (pair: PairName, names: string[]) => {
    const built = [];
    for (const n of names) built.push(await ensureAgent(ZOO[pair], agentOf(ZOO[pair], n), zooDir, log));
    return built;
  };
  if (mode === 'test') return pick('tiny', ['small', 'large']);
  const size = await pick('size', ['small', 'large']);
  if (mode === 'pair') return size;
  // Two more sizes from the zoo's other pairs: warm starts on the same task and data, none built anew.
  return [...size, ...(await pick('state', ['early'])), ...(await pick('model', ['llama']))];
}

/** `hacrl bench async`: runs every setting × seed (skipping finished ones), then writes results.json and results.md. */
export async function runBenchAsync(o: BenchAsyncCliOptions, log: (line: string) => void = console.log) {
  const flags = [o.real && 'real', o.swarm && 'swarm', o.test && 'test'].filter((f) => f !== false && f !== undefined);
  if (flags.length > 1) throw new Error(`choose one of --${flags.join(', --')}`);
  const mode: AsyncBenchMode = o.real ? 'real' : o.swarm ? 'swarm' : o.test ? 'test' : 'pair';
  const plan = asyncBenchPlan(mode, o);
  const out = o.out ?? `runs/bench-async${mode === 'pair' ? '' : `-${mode}`}`;
  const zooDir = o.zooDir ?? defaultZooDir();
  await refuseOverlap({ flag: '--out', path: out }, [{ flag: '--zoo-dir', path: zooDir }]);
  await mkdir(join(out, 'results'), { recursive: true });
  if (mode === 'real' && reproducibleMode().on)
    log(
      'bench async: WARNING: --real in the reproducible mode: its portable kernels are many times slower at these ' +
        'shapes than the ones users train with; `hacrl --fast-kernels bench async --real` times those',
    );
  const agents = await benchAgents(mode, zooDir, out, log);
  const pinning = pinningCores();
  if ('reason' in pinning) log(`bench async: WARNING: agents run unpinned (${pinning.reason}); paces may interfere`);
  const pin = 'cores' in pinning ? pinning.cores : null;
  const started = performance.now();
  const broker = await NatsServer.start().catch((e: Error) => {
    throw new Error(`bench async needs nats-server on the PATH (bash scripts/setup.sh installs it): ${e.message}`);
  });
  const results: AsyncRunResult[] = [];
  const ran: number[] = [];
  const total = plan.settings.length * plan.seeds.length;
  try {
    for (const seed of plan.seeds)
      // Lockstep first: its wall time is what "equal wall time" means for the other settings of the seed.
      for (const s of plan.settings) {
        const file = join(out, 'results', `${s.name}-seed${seed}.json`);
        const lock = results.find((r) => r.setting === 'lockstep' && r.seed === seed);
        // The lockstep run is at equal wall time with itself at its last step (Infinity: every checkpoint counts).
        const timed = s.name === 'lockstep' ? Infinity : lock !== undefined && !s.alone ? lockstepSeconds(lock) : null;
        const kept = existsSync(file);
        const result = kept
          ? (JSON.parse(await readFile(file, 'utf8')) as AsyncRunResult)
          : await runSetting({ plan, agents, data: dataOf(mode), out, log }, s, seed, broker, pin, timed);
        if (!kept) {
          await writeJsonAtomic(file, result);
          ran.push(result.wallSeconds);
        }
        results.push(result);
        const done = results.length;
        // From the runs made by this invocation only: a resumed bench's finished runs took no time here.
        const eta = etaSeconds(ran, total - done);
        log(
          `[${done}/${total}] ${result.id}: ${kept ? 'kept from an earlier start' : `${result.wallSeconds.toFixed(0)} s`}; ` +
            `ETA ${Number.isNaN(eta) ? '—' : formatDuration(eta)}`,
        );
      }
  } finally {
    await broker.stop();
  }
  const cpu = cpus();
  const model = (await readFile('/proc/cpuinfo', 'utf8').catch(() => '')).match(/^model name\s*:\s*(.*)$/m)?.[1];
  const command = [
    'hacrl bench async',
    ...flags.map((f) => `--${f}`),
    ...(o.seeds === undefined ? [] : ['--seeds', String(o.seeds)]),
    ...(o.steps === undefined ? [] : ['--steps', String(o.steps)]),
    ...(o.evalN === undefined ? [] : ['--eval-n', String(o.evalN)]),
    '--out',
    out,
  ].join(' ');
  const header = [
    `## ${command}`,
    '',
    `Command: \`${command}\`; commit ${commit()}; ${cpu.length} × ${model ?? cpu[0]?.model ?? 'unknown CPU'}; ` +
      `1 kernel thread per agent, ${pin === null ? 'unpinned' : `pinned round-robin to cores ${pin.join(', ')}`}; ` +
      `${reproducibleMode().on ? 'reproducible kernels' : 'fast kernels (--fast-kernels)'}; ` +
      `wall time ${((performance.now() - started) / 1e3).toFixed(0)} s (runs already finished not counted).`,
    `Agents ${agents.map((a) => a.name).join(', ')}; seeds ${plan.seeds.join(', ')}; ${plan.steps} steps of ` +
      `B = ${plan.prompts} prompts × G = ${plan.groupSize} responses, ≤ ${plan.maxNewTokens} new tokens; lr ${plan.lr}.`,
  ];
  const names = agents.map((a) => a.name);
  await writeJsonAtomic(join(out, 'results.json'), { command, header, plan, agents: names, results });
  const markdown = join(out, 'results.md');
  await writeFileAtomic(markdown, asyncBenchTable(results, plan, names, header));
  log(`tables: ${markdown}`);
  return { results, markdown };
}

/** The data every mode trains on: the zoo's (the tiny pair's for the test mode). */
const dataOf = (mode: AsyncBenchMode): ZooData => (mode === 'test' ? ZOO.tiny.data : ZOO.size.data);
