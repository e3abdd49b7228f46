#!/usr/bin/env node
import { writeFile } from 'node:fs/promises';
import { Command, InvalidArgumentError, Option } from 'commander';
import { runAgent, runBrokerUsers, type AgentCliOptions } from './agent.js';
import { BENCH_FAST, BENCH_FULL, BENCH_TINY } from '../experiments/mas-sizes.js';
import { runBenchPaper, type BenchPaperCliOptions } from '../experiments/paper.js';
import { baselineBenchOptions, type BaselineBenchCliOptions } from '../experiments/baseline-bias.js';
import { runConfigResolve, runConfigSchema } from './config.js';
import { runDemo, type DemoOptions } from '../experiments/demo.js';
import { createProgressDisplay } from '../train/progress.js';
import { runEval, type EvalCliOptions } from './eval.js';
import { exportCommand } from './export.js';
import { loraCommand } from './lora.js';
import { runBenchMas } from '../experiments/mas.js';
import { ABLATIONS, isAblation } from '../experiments/mas-options.js';
import { benchMasTable } from '../experiments/mas-table.js';
import { runBenchAsync, type BenchAsyncCliOptions } from '../experiments/async-bench.js';
import { runBenchStaleness, type BenchStalenessCliOptions } from '../experiments/staleness-bench.js';
import { runMasEval } from './mas-eval.js';
import { masCommand, parseModelArgs, workflowOption } from './mas.js';
import { runMasWarmstart } from './mas-warmstart.js';
import { runPlan, type PlanCliOptions } from './plan.js';
import { precisionOption } from './precision.js';
import { BASE_HELP } from '../model/pretrained.js';
import { runBaselineBenchWithPlots, runReport } from './report.js';
import { runScore, type ScoreOptions } from './score.js';
import { serveCommand } from './serve.js';
import { runSft, type SftCliOptions } from './sft.js';
import { runSmoke } from './smoke.js';
import { runTrain, type TrainCliOptions } from './train.js';
import { MAX_TIMEOUT_MS } from '../rewards/worker-pool.js';
import { surviveClosedStdout } from '../util/closed-output.js';
import { checkWritableFile } from '../util/fs-errors.js';
import { DEFAULT_VERIFY_EXTRACT, runVerify, type VerifyCliOptions } from './verify.js';
import { runZooBuild, runZooList, type ZooCliOptions } from './zoo.js';
import { settleReproducible } from '../backend/select.js';

/** Parses a command-line number (validated with the command's schema afterwards). */
function num(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`expected a number, got "${value}"`);
  return n;
}

/** Parses a command-line value that must be a positive integer. */
function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`expected a positive integer, got "${value}"`);
  return n;
}

/** Parses a time limit in milliseconds: a whole number from 1 to 2^31 − 1 (what a Node timer can hold). */
function timeLimitMs(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_TIMEOUT_MS)
    throw new InvalidArgumentError(
      `expected whole milliseconds from 1 to ${MAX_TIMEOUT_MS} (2^31 − 1, about 24.8 days), got "${value}"`,
    );
  return n;
}

/** Parses a comma-separated list (`boxed,hashes`). */
function list(value: string): string[] {
  return value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');
}

/** Flags of `hacrl bench mas`. */
interface BenchCli {
  fast: boolean;
  tiny: boolean;
  seeds: number;
  firstSeed: number;
  workDir: string;
  json?: string;
  steps?: number;
  lr?: number;
  only?: string;
  ablations: boolean | string;
}

/**
 * The commands whose results the docs record (the zoo, the demo, the benches and the warm starts they build): they
 * compute in the reproducible mode unless asked otherwise, so their numbers are the same on every CPU.
 */
const REPRODUCIBLE_BY_DEFAULT = new Set([
  'zoo build',
  'demo',
  'bench paper',
  'bench mas',
  'bench baseline',
  'bench async',
  'bench staleness',
]);

const program = new Command();
program
  .name('hacrl')
  .description('Heterogeneous agent collaborative RL (HACPO, AT-GRPO) for transformer language models on the CPU')
  .version('0.1.0')
  .option('--debug', 'on an error, print its stack trace too (also HACRL_DEBUG=1)', false)
  .option(
    '--reproducible',
    'every product and reduction summed in one fixed order: the same weights from the same seed on any CPU, slower ' +
      `(also HACRL_REPRODUCIBLE=1; the default of ${[...REPRODUCIBLE_BY_DEFAULT].join(', ')}; docs/reproducible.md)`,
    false,
  )
  .option(
    '--fast-kernels',
    'the fast kernels (BLAS, the widest vectors) even where the reproducible mode is the default: faster, but the ' +
      'numbers depend on the CPU and the BLAS library (also HACRL_REPRODUCIBLE=0)',
    false,
  )
  // The engine reads the mode once, when a command first computes: settle it before any action runs.
  .hook('preAction', (_, action) => {
    const o = program.opts<{ reproducible: boolean; fastKernels: boolean }>();
    if (o.reproducible && o.fastKernels) throw new Error('choose one of --reproducible and --fast-kernels');
    const path = action.parent === program ? action.name() : `${action.parent?.name()} ${action.name()}`;
    settleReproducible(o.reproducible || (o.fastKernels ? false : undefined), REPRODUCIBLE_BY_DEFAULT.has(path));
  });

program
  .command('smoke')
  .description('check the compute engine: backend, BLAS in use, kernel agreement with the TypeScript backend, speed')
  .option('--json', 'print one JSON object instead of text')
  .action((opts: { json?: boolean }) => runSmoke(opts.json === true));

program
  .command('score')
  .description('per-token log-probs of responses given prompts, under a checkpoint (JSONL in, JSONL out)')
  .requiredOption(
    '--model <dir>',
    'checkpoint folder (config.json, weights; tokenizer files for text rows) or PEFT adapter folder',
  )
  .requiredOption('--input <file>', 'JSONL rows {prompt, response} (text) or {prompt_ids, response_ids}')
  .option('--output <file>', 'where to write the JSONL results (default: standard output)')
  .option('--batch-size <n>', 'sequences per forward pass', positiveInt, 16)
  .option('--add-special-tokens', 'let the tokenizer add its special tokens (e.g. BOS) to text prompts', false)
  .addOption(precisionOption())
  .action((opts: ScoreOptions) => runScore(opts));

program
  .command('verify')
  .description(
    'check math answers in model responses: --gold/--answer prints true or false (exit 2: unparseable gold, 3: no ' +
      'verdict); --input checks JSONL rows {gold, answer} and writes {equal, reason, extracted} per row',
  )
  .option('--gold <answer>', 'gold answer (bare, "#### 18" or with \\boxed{})')
  .option('--answer <response>', 'response (or, with --extracted, answer) to check against --gold')
  .option('--input <file>', 'JSONL rows {gold, answer} or {gold, response}')
  .option('--output <file>', 'where to write the JSONL results (default: standard output)')
  .option('--timeout-ms <ms>', 'time limit of each whole check, in milliseconds', timeLimitMs, 2000)
  .option(
    '--extract <list>',
    'extractors tried on each response, in this order: boxed, hashes (#### N), answerIs ("the answer is N"), ' +
      'lastNumber, whole',
    list,
    DEFAULT_VERIFY_EXTRACT,
  )
  .option('--extracted', 'the answers are already extracted: read each whole', false)
  .action((opts: VerifyCliOptions) => runVerify(opts));

const sft = program
  .command('sft')
  .description('warm start: train a small agent from scratch on generated worked solutions, save it as a checkpoint')
  .requiredOption('--out <dir>', 'folder to write the agent into')
  .option('--force', 'replace an --out folder that already holds something', false)
  .option('--task <preset>', 'task preset: easy (2-digit + and −) or easy-mix', 'easy')
  .option('--train-n <n>', 'training problems', num, 8000)
  .option('--eval-n <n>', 'held-out test problems for the accuracy', num, 200)
  .option('--data-seed <n>', 'seed of the generated data', num, 0)
  .option('--template <text>', 'question template with {question}', '{question}')
  .option('--steps <n>', 'most optimizer steps', num, 3000)
  .option('--batch-size <n>', 'sequences per step', num, 32)
  .option('--lr <x>', 'peak learning rate (cosine decay)', num, 3e-3)
  .option('--warmup-steps <n>', 'linear warm-up steps', num, 50)
  .option('--eval-every <n>', 'steps between accuracy checks (0: only at the end)', num, 100)
  .option('--stop-at-accuracy <x>', 'stop once greedy test accuracy reaches this', num, 0.4)
  .option('--time-limit <s>', 'training time budget in seconds', num, 540)
  .option('--max-new-tokens <n>', 'longest response when evaluating', num, 96)
  .action((o: Record<string, unknown>) => {
    const [agent, rest] = agentSpecOf(o);
    return runSft({ ...rest, agent } as SftCliOptions);
  });
withAgentOptions(sft);

program
  .command('eval')
  .description('greedy and sampled accuracy (avg@k, pass@k, maj@k) with 95% intervals, per checkpoint and data set')
  .requiredOption('--model <dir...>', 'checkpoint folders')
  .option('--base <dir>', BASE_HELP)
  .requiredOption('--data <spec...>', 'JSONL files, or generated NAME[:SPLIT[:N[:SEED]]] (e.g. easy:test:200)')
  .option('--k <n>', 'samples per problem for avg@k/pass@k/maj@k (0: greedy only)', num, 0)
  .option('--temperature <x>', 'temperature of the k samples', num, 1)
  .option('--top-p <x>', 'nucleus mass of the k samples', num, 1)
  .option('--max-new-tokens <n>', 'longest response', num, 256)
  .option('--limit <n>', 'only the first n problems of each data set (0: all)', num, 0)
  .option(
    '--template <text>',
    "question template with {question} (default: --run-config's, else the paper's boxed-answer suffix)",
  )
  .option('--system <text>', "system message of the prompt (default: --run-config's, else none)")
  .option('--run-config <file>', "a run's config (YAML, or its config.resolved.json): prompt as its agents were")
  .option('--agent <name>', 'the agent of --run-config whose prompt to use, when its agents are prompted differently')
  .option('--seed <n>', 'sampling seed', num, 0)
  .option('--json', 'print one JSON object instead of the table', false)
  .option('--output <file>', 'also write the full report with every response')
  .addOption(precisionOption())
  .action((o: EvalCliOptions) => runEval(o));

program
  .command('train')
  .description(
    'RL training (GRPO, GSPO, GSPO×2, HACPO, naive sharing) of the agents a YAML/JSON configuration names; see `hacrl config schema`',
  )
  .option('--config <file>', 'run configuration (YAML or JSON)')
  .option('--set <key=value...>', 'overrides, e.g. --set rollout.groupSize=8 agents.0.lr=1e-5', [])
  .option('--resume', "continue the run folder's latest complete checkpoint", false)
  .option('--skip-memory-check', 'train even when the memory plan (hacrl plan) says the run does not fit', false)
  .option(
    '--replay <dir>',
    "replay the finished asynchronous run (exchange.mode async) in <dir> from its agents' manifests, every agent in " +
      "this process, against the run's broker: into the config's runDir, byte-equal to the run",
  )
  .action((o: TrainCliOptions) => runTrain(o));

program
  .command('plan')
  .description(
    "a run's estimated peak memory per agent — weights, gradients, AdamW, KL reference, and per phase the " +
      'inference copies, KV cache and activations — against this machine (os.totalmem, /proc/meminfo MemAvailable); ' +
      'hacrl train refuses a run that does not fit',
  )
  .option('--config <file>', 'run configuration (YAML or JSON)')
  .option('--set <key=value...>', 'overrides, e.g. --set optim.activationCheckpointing=true', [])
  .option(
    '--prompt-tokens <n>',
    'longest prompt in tokens (default: measured on the 256 longest questions of data.train)',
    positiveInt,
  )
  .option('--json', 'print one JSON object instead of the table', false)
  .action((o: PlanCliOptions) => runPlan(o));

program
  .command('agent')
  .description(
    'one agent of a run in its own process: it samples, trains and checkpoints only that agent (in <runDir>/<agent>) ' +
      "and exchanges each step's rollouts with the other agents' processes over NATS JetStream (docs/distributed.md); " +
      'started again, it continues from its newest checkpoint',
  )
  .option('--config <file>', 'run configuration (YAML or JSON), the same file for every agent')
  .option(
    '--set <key=value...>',
    'overrides after the file, the same for every agent (e.g. exchange.waitSeconds=60)',
    [],
  )
  .requiredOption('--agent <name>', 'the agent of the configuration this process runs')
  .option('--broker <url>', "NATS server (default: the config's exchange.broker, nats://127.0.0.1:4222)")
  .option('--skip-memory-check', "run even when the memory plan says this agent's process does not fit", false)
  .option('--join', "exchange.mode async: a fresh agent starts after the partners' newest step (joins a run under way)")
  .option('--leave-after <step>', 'exchange.mode async: leave the run after this step; the others go on', positiveInt)
  .addHelpText(
    'after',
    '\nCredentials come from the environment (HACRL_NATS_USER, HACRL_NATS_PASSWORD, HACRL_NATS_NKEY_SEED) or from\n' +
      'files named in the config (exchange.user, passwordFile, nkeySeedFile, tlsCaFile, tlsCertFile, tlsKeyFile);\n' +
      'they are never printed. exchange.waitSeconds and exchange.onLate say how long to wait for a late agent and\n' +
      'what then; `hacrl config schema` documents every exchange field.',
  )
  .action((o: AgentCliOptions) => runAgent(o));

program
  .command('broker-users')
  .description(
    'prints a nats-server authorization block for the run: one user per agent, each allowed to publish only its own ' +
      "subjects (docs/distributed.md, 'One user per agent'); passwords from the server's environment",
  )
  .option('--config <file>', 'run configuration (YAML or JSON), the same file the agents get')
  .option('--set <key=value...>', 'overrides after the file, the same the agents get', [])
  .action((o: Pick<AgentCliOptions, 'config' | 'set'>) => runBrokerUsers(o));

/** Adds the flags of a small agent built from scratch (hacrl sft, hacrl mas warmstart). */
function withAgentOptions(c: Command): Command {
  return c
    .option('--arch <family>', 'qwen3, llama, qwen2 or gpt2', 'qwen3')
    .option('--hidden <n>', 'model width', num, 192)
    .option('--layers <n>', 'transformer blocks', num, 4)
    .option('--heads <n>', 'attention heads', num, 6)
    .option('--kv-heads <n>', 'key/value heads (default heads/2)', num)
    .option('--tokenizer <kind>', 'char or bpe', 'char')
    .option('--bpe-vocab <n>', 'vocabulary size of a bpe tokenizer', num, 512)
    .option('--model-seed <n>', 'seed of the weight initialisation', num, 0);
}

/** The agent spec the withAgentOptions flags give, and the other options. */
function agentSpecOf(o: Record<string, unknown>): [Record<string, unknown>, Record<string, unknown>] {
  const { arch, hidden, layers, heads, kvHeads, tokenizer, bpeVocab, modelSeed, ...rest } = o;
  return [{ arch, hidden, layers, heads, kvHeads, tokenizer, bpeVocab, seed: modelSeed }, rest];
}

const mas = masCommand();
program.addCommand(mas);
withAgentOptions(mas.command('warmstart'))
  .description(
    "a small agent for a workflow (tokenizer fitted to its text), SFT'd on solver rows, saved as a checkpoint",
  )
  .requiredOption('--out <dir>', 'folder to write the agent into')
  .option('--force', 'replace an --out folder that already holds something', false)
  .option('--workflow <json>', 'the workflow config section as JSON (docs/at-grpo.md)', '{}')
  .option('--steps <n>', 'SFT steps on solver rows (0: untrained)', num, 0)
  .option('--rows <n>', 'solver rows', num, 2000)
  .option('--batch-size <n>', 'rows per step', num, 16)
  .option('--lr <x>', 'peak learning rate (cosine decay)', num, 3e-3)
  .option('--role <name...>', "train on these roles' rows only (per-role policies); default every role")
  .option(
    '--detour <p>',
    "probability of applying another instance's solver answer (rows off the solver's path)",
    num,
    0,
  )
  .option('--detour-last-turn', "detour the last turn too, all but its final role's answer (one-turn workflows)")
  .option('--detour-role <name...>', 'roles whose applied answer may be a detour; default every role')
  .option('--seed <n>', 'seed of the SFT batch order', num, 0)
  .option(
    '--band <low,high>',
    'stop at the first chunk whose greedy calibration success is in [low, high], e.g. 0.2,0.4',
  )
  .option('--band-every <n>', 'SFT steps between calibration evaluations (with --band)', num, 100)
  .option(
    '--band-refine <n>',
    'after a chunk that overshoots the band, retrace it in chunks of every/n steps (1: off; with --band)',
    num,
    4,
  )
  .option('--band-instances <n>', 'calibration instances per evaluation (with --band)', num, 100)
  .option(
    '--band-attempts <n>',
    'tries until one stops in the band, each with the next batch-order seed; else the nearest is kept (with --band)',
    num,
    1,
  )
  .action(async (o: Record<string, unknown>) => {
    const [agent, rest] = agentSpecOf(o);
    const {
      out,
      workflow,
      steps,
      rows,
      batchSize,
      lr,
      role,
      detour,
      detourLastTurn,
      detourRole,
      seed,
      band,
      bandEvery,
      bandRefine,
      bandInstances,
      bandAttempts,
      force,
    } = rest;
    const [low, high] = band === undefined ? [] : String(band).split(',').map(Number);
    if (band !== undefined && !(Number.isFinite(low) && Number.isFinite(high)))
      throw new Error(`--band takes two fractions, low and high, e.g. 0.2,0.4; got ${String(band)}`);
    await runMasWarmstart(
      {
        out: out as string,
        workflow: workflowOption(workflow),
        agent: agent as never,
        warmStart: {
          steps,
          rows,
          batchSize,
          lr,
          detour,
          ...(detourLastTurn ? { detourLastTurn: true } : {}),
          ...(detourRole ? { detourRoles: detourRole } : {}),
          ...(role ? { roles: role } : {}),
          ...(band === undefined
            ? {}
            : {
                band: {
                  low,
                  high,
                  every: bandEvery,
                  refine: bandRefine,
                  instances: bandInstances,
                  ...(bandAttempts === 1 ? {} : { attempts: bandAttempts }),
                },
              }),
        } as never,
        seed: seed as number,
        force: force === true,
      },
      (line) => console.log(line),
    );
  });

mas
  .command('eval')
  .description(
    'greedy episodes on held-out, calibration or train-side instances, a checkpoint per policy, roles optionally played by the solver',
  )
  .option('--workflow <json>', 'the workflow config section as JSON (see docs/at-grpo.md)', '{}')
  .requiredOption('--model <dir...>', 'checkpoint per policy, NAME=DIR or DIR (shared)')
  .option('--expert <role...>', "roles answered by the environment's solver instead of a model")
  .option(
    '--split <split>',
    'heldout (the instances bench mas reports), calibration, or train (train-side, never trained on: coding task keys training sees)',
    'heldout',
  )
  .option('--instances <n>', 'instances, one greedy episode each', positiveInt, 100)
  .action(async (o: Record<string, unknown>) => {
    const summary = await runMasEval({
      workflow: workflowOption(o['workflow']),
      models: parseModelArgs(o['model'] as string[]),
      expert: (o['expert'] as string[] | undefined) ?? [],
      split: o['split'] as 'heldout',
      instances: o['instances'] as number,
    });
    console.log(JSON.stringify(summary, null, 2));
  });

const bench = program
  .command('bench')
  .description('research benchmarks (each prints its command, settings and intervals)');
bench
  .command('mas')
  .description(
    'single agent + GRPO vs the untrained workflow vs AT-GRPO shared vs per-role: held-out success with 95% intervals',
  )
  .option('--fast', 'the ~20-minute version (smaller agents, fewer steps and held-out instances)', false)
  .option('--tiny', 'test-sized: seconds, proves the pipeline, not the claim', false)
  .option('--seeds <n>', 'RL seeds (0: only the warm starts, built or read, and their held-out success)', num, 3)
  .option(
    '--first-seed <n>',
    'first seed (seeds first-seed … first-seed + seeds − 1): processes sharing a work folder can take other seeds',
    num,
    0,
  )
  .option('--work-dir <dir>', "working folder; each run's metrics.jsonl stays in it", 'runs/bench-mas')
  .option('--json <file>', 'also write the results as JSON')
  .option('--steps <n>', "RL steps of each trained arm (default: the size's)", positiveInt)
  .option('--lr <x>', "learning rate of the RL arms (default: the size's)", num)
  .option(
    '--only <workflows>',
    'only these environments of the size, comma-separated (e.g. plan-path or sudoku,sokoban; default: all)',
  )
  .option(
    '--ablations [names]',
    'also AT-GRPO (shared) grouped by agent only, by turn only, with no-tree sampling and the group filter flipped; ' +
      `or only these, comma-separated (${ABLATIONS.join(', ')})`,
    false,
  )
  .action(async (o: BenchCli) => {
    const size = o.tiny ? BENCH_TINY : o.fast ? BENCH_FAST : BENCH_FULL;
    const names = size.workflows.map((w) => w.name);
    const only = o.only?.split(',') ?? names;
    const unknown = only.filter((n) => !names.includes(n));
    if (unknown.length > 0)
      throw new Error(`--only ${unknown.join(',')}: not one of this size's environments (${names.join(', ')})`);
    const workflows = size.workflows.filter((w) => only.includes(w.name));
    const listed = typeof o.ablations === 'string' ? o.ablations.split(',') : [];
    const badAblations = listed.filter((a) => !isAblation(a));
    if (badAblations.length > 0)
      throw new Error(`--ablations ${badAblations.join(',')}: not one of ${ABLATIONS.join(', ')}`);
    const ablations = typeof o.ablations === 'string' ? listed.filter(isAblation) : o.ablations;
    const options = {
      ...size,
      workflows,
      seeds: o.seeds,
      firstSeed: o.firstSeed,
      workDir: o.workDir,
      ablations,
      ...(o.steps === undefined ? {} : { steps: o.steps }),
      ...(o.lr === undefined ? {} : { lr: o.lr }),
    };
    // Checked first: a bad --json must not cost the whole bench's results.
    if (o.json) await checkWritableFile(o.json, '--json');
    const results = await runBenchMas(options, (l) => console.log(l));
    console.log(benchMasTable(results));
    if (o.json) await writeFile(o.json, JSON.stringify(results, null, 2) + '\n');
  });

const config = program.command('config').description('run configuration tools');
config
  .command('schema')
  .description('print the JSON Schema of a run configuration file')
  .action(() => runConfigSchema());
config
  .command('resolve')
  .description('print a configuration after the recipe, defaults and overrides (validated)')
  .argument('[file]', 'YAML or JSON configuration')
  .argument('[overrides...]', 'key.path=value overrides')
  .action((file: string | undefined, overrides: string[]) => runConfigResolve(file, overrides));

program
  .command('report')
  .description('one HTML file with plots of one or more runs overlaid, and sample completions')
  .argument('<runs...>', 'run folders')
  .requiredOption('--output <file>', 'HTML file to write')
  .option('--png <file>', 'also render a PNG (needs Debian chromium)')
  .action((runs: string[], o: { output: string; png?: string }) => runReport({ runs, ...o }));

program
  .command('demo')
  .description("HACPO on the zoo's size pair (built on first use): accuracy before and after, and the HTML report")
  .option('--pair <name>', 'zoo pair: size, state, model, or tiny (test-sized)', 'size')
  .option('--steps <n>', 'HACPO steps', positiveInt, 20)
  .option('--prompts <n>', 'prompts per step', positiveInt, 16)
  .option('--group-size <n>', 'responses per prompt and agent', positiveInt, 8)
  .option('--lr <x>', 'peak learning rate of both agents', num, 1e-4)
  .option('--eval-n <n>', 'held-out problems per split (in-distribution and out-of-distribution)', positiveInt, 500)
  .option('--seed <n>', 'seed of the run and of the held-out problems', num, 1)
  .option('--run-dir <dir>', 'run folder (replaced by each run)', 'runs/demo')
  .option('--zoo-dir <dir>', 'zoo folder (default: $HACRL_ZOO_DIR or runs/zoo)')
  .action(async (o: DemoOptions) => {
    await runDemo(o, console.log, createProgressDisplay(process.stdout));
  });

bench
  .command('paper')
  .description("the paper's comparison in miniature: every zoo pair × method × ablation × seed (resumable)")
  .option('--fast', 'one pair (size), 3 seeds, 10 steps', false)
  .option('--test', 'test-sized: the tiny pair, 2 seeds, 1 step (seconds)', false)
  .option('--out <dir>', 'output folder (default runs/bench-paper-<mode>)')
  .option('--zoo-dir <dir>', 'zoo folder (default: $HACRL_ZOO_DIR or runs/zoo)')
  .option('--jobs <n>', 'runs at once, each a child process with cores/jobs kernel threads', positiveInt, 1)
  .option('--only <pair>', "only this pair of the mode's zoo (e.g. state)")
  .option('--methods <list>', 'only these methods, comma-separated (e.g. hacpo,hacpo-blend; candidates too)', list)
  .option('--steps <n>', "RL steps per run instead of the mode's (needs --out)", positiveInt)
  .option('--seeds <list>', "seeds of the test runs instead of the mode's, comma-separated", (v: string) =>
    list(v).map(positiveInt),
  )
  .option('--sweep-only', 'only the learning-rate sweep on the validation split; writes validation.md', false)
  .addOption(new Option('--run-one <id>', 'internal: one run of the plan (a child of --jobs)').hideHelp())
  .action((o: BenchPaperCliOptions) => runBenchPaper(o));
bench
  .command('async')
  .description(
    'agents of different speeds as pinned `hacrl agent` processes over a local nats-server: lockstep against async',
  )
  .option(
    '--real',
    'the real shapes Qwen2.5-0.5B + Llama-3.2-1B (random weights, LoRA r16, bf16): steps per hour',
    false,
  )
  .option(
    '--swarm',
    'four zoo agents of different sizes: HACPO and naive, lockstep and async, against each alone',
    false,
  )
  .option('--test', 'test-sized: the tiny pair, 1 seed, 3 steps, lockstep and async-2 (for CI)', false)
  .option('--seeds <n>', 'seeds 1…N (default 5; --swarm 3; --real and --test 1)', positiveInt)
  .option('--steps <n>', "RL steps per agent instead of the mode's", positiveInt)
  .option('--eval-n <n>', 'held-out problems for greedy accuracy (default 200; --test 12)', positiveInt)
  .option('--out <dir>', 'output folder (default runs/bench-async[-real|-swarm|-test]); finished runs are kept')
  .option('--zoo-dir <dir>', 'zoo folder (default: $HACRL_ZOO_DIR or runs/zoo)')
  .action(async (o: BenchAsyncCliOptions) => {
    await runBenchAsync(o);
  });
bench
  .command('staleness')
  .description(
    "HACPO against naive sharing as partners' rollouts age: the size pair, k = 0, 2, 4 steps stale (resumable)",
  )
  .option('--test', 'test-sized: the tiny pair, 1 seed, 2 steps (seconds)', false)
  .option('--seeds <list>', 'seeds, comma-separated (default 1,2,3,4,5)', (v: string) => list(v).map(positiveInt))
  .option('--out <dir>', 'output folder (default runs/bench-staleness)')
  .option('--zoo-dir <dir>', 'zoo folder (default: $HACRL_ZOO_DIR or runs/zoo)')
  .action((o: BenchStalenessCliOptions) => runBenchStaleness(o));
bench
  .command('baseline')
  .description("each HACPO baseline's per-group error against every zoo agent's own per-question success p(q)")
  .option('--fast', '30 questions × 16 samples, 50 replicates', false)
  .option('--only <pair>', 'only this pair: state, size, model or tiny (default: state, size and model)')
  .option('--questions <n>', 'training-distribution questions per pair (default 300)', positiveInt)
  .option('--samples <n>', 'samples per question at T = 1 for p(q) (default 64)', positiveInt)
  .option('--replicates <n>', 'Monte-Carlo steps of G = 8 groups per question (default 200)', positiveInt)
  .option('--seed <n>', 'seed of the questions, the samples and the draws', num, 0)
  .option('--out <dir>', 'output folder (default runs/bench-baseline[-fast])')
  .option('--zoo-dir <dir>', 'zoo folder (default: $HACRL_ZOO_DIR or runs/zoo)')
  .option('--png', 'also render the plots (<out>/bias.html) to <out>/bias.png with headless Chromium', false)
  .action(async (o: BaselineBenchCliOptions & { png: boolean }) => {
    await runBaselineBenchWithPlots(baselineBenchOptions(o), o.png);
  });

const zoo = program
  .command('zoo')
  .description('the agent zoo: warm-started pairs for the state, size and model heterogeneities');
zoo
  .command('build')
  .description('build the missing zoo agents (fixed steps and seeds; cached by a hash of the recipe)')
  .option('--only <pair>', 'only this pair: state, size, model or tiny (default: state, size and model)')
  .option('--dir <dir>', 'zoo folder (default: $HACRL_ZOO_DIR or runs/zoo)')
  .option('--check', 'rebuild each agent in a scratch folder and require identical weights', false)
  .action((o: ZooCliOptions) => runZooBuild(o));
zoo
  .command('list')
  .description('every zoo agent: recipe, folder, and when built its accuracy and build time')
  .option('--only <pair>', 'only this pair')
  .option('--dir <dir>', 'zoo folder (default: $HACRL_ZOO_DIR or runs/zoo)')
  .option('--json', 'print one JSON object', false)
  .action((o: ZooCliOptions) => runZooList(o));

program.addCommand(serveCommand());
program.addCommand(exportCommand());
program.addCommand(loraCommand());

surviveClosedStdout(
  'hacrl: standard output was closed; going on without it (a run keeps its progress in its run folder)',
);

program.parseAsync(process.argv).catch((e: unknown) => {
  // The message alone is what a user acts on; the stack is for reporting a bug.
  const debug = program.opts<{ debug: boolean }>().debug || process.env.HACRL_DEBUG === '1';
  console.error(debug && e instanceof Error && e.stack ? `hacrl: ${e.stack}` : `hacrl: ${(e as Error).message}`);
  // An Interrupted run says its own exit status (130 for SIGINT, 143 for SIGTERM).
  process.exit((e as { exitCode?: number }).exitCode ?? 1);
});
