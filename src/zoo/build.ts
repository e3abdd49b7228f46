/**
 * Building and caching zoo agents. Each agent lives in `<zoo dir>/<pair>-<agent>-<hash>/` where the hash covers
 * everything that decides its bytes (recipe, data, the agent it continues, the format version), so a changed recipe
 * gets a new folder and an unchanged one is never rebuilt. A folder appears only complete: it is built under a
 * temporary name and renamed into place.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rename, rm } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { engine } from '../backend/engine.js';
import { reproducibleMode } from '../backend/select.js';
import type { Estimate } from '../eval/evaluate.js';
import { loadPretrained, savePretrained } from '../model/pretrained.js';
import { makeTaskDataset, presetSpec } from '../tasks/splits.js';
import { taskAgent, trainSft, type SftLogEntry } from '../agents/sft-trainer.js';
import { writeJsonAtomic } from '../util/atomic-write.js';
import type { AgentRecipe, PairRecipe } from './recipes.js';
import { RECORDED_WEIGHTS } from './recorded.js';

/** Bumped whenever the build procedure changes in a way that changes the bytes of an unchanged recipe. */
const ZOO_FORMAT = 1;

/** The file in each agent folder that records how it was built. */
export const MANIFEST = 'hacrl_zoo.json';

/** The zoo folder: $HACRL_ZOO_DIR, else runs/zoo under the current folder. */
export function defaultZooDir(): string {
  return process.env.HACRL_ZOO_DIR ?? join('runs', 'zoo');
}

/** What `hacrl_zoo.json` holds. */
export interface ZooManifest {
  pair: string;
  agent: string;
  /** sha256 of the recipe key (see agentHash). */
  hash: string;
  recipe: AgentRecipe;
  data: PairRecipe['data'];
  /** Greedy accuracy on the pair's held-out test problems after the warm start. */
  accuracy: Estimate;
  /**
   * sha256 of model.safetensors: in the reproducible mode equal on every machine (RECORDED_WEIGHTS holds the
   * expected one), with the fast kernels across builds of one recipe on one machine.
   */
  weightsSha256: string;
  /** The kernels it was built with (absent in folders built before the mode existed: fast). */
  kernels?: 'reproducible' | 'fast';
  /** Wall-clock seconds of this build (its own SFT and evaluation, not the agent it continues). */
  buildSeconds: number;
  /** CPU seconds (user + system, all threads) of this build: on a quiet machine the wall time is at most this. */
  cpuSeconds?: number;
  /** Where it was built: CPU count and the 1-minute load average when the build ended (a busy machine is slower). */
  machine: { cpus: number; load1: number };
  /** Mean response-token NLL (nats) of the last SFT step. */
  finalLoss: number;
}

/** One agent of a pair as the zoo holds it. */
export interface ZooAgent {
  name: string;
  /** Its checkpoint folder (a Hugging Face checkpoint). */
  dir: string;
  manifest: ZooManifest;
}

/** Progress lines of a build. */
export type ZooLog = (line: string) => void;

/**
 * The hash that names an agent's folder: recipe, data, format, (for a later stage) the parent's hash, and the kernel
 * mode (reproducible unless `hacrl --fast-kernels`): the fast kernels' bytes depend on the machine, the reproducible
 * ones' do not, so the two never share a folder. The fast kernels' key is the one zoos had before the mode existed.
 */
export function agentHash(pair: PairRecipe, agent: AgentRecipe, reproducible = reproducibleMode().on): string {
  const parent = agent.continues === undefined ? null : agentHash(pair, agentOf(pair, agent.continues), reproducible);
  const key = JSON.stringify({
    format: ZOO_FORMAT,
    data: pair.data,
    recipe: agent,
    parent,
    ...(reproducible ? { kernels: 'reproducible' } : {}),
  });
  return createHash('sha256').update(key).digest('hex');
}

/** The folder of `agent` of `pair` in zoo folder `dir` (whether built or not). */
export function agentDir(dir: string, pair: PairRecipe, agent: AgentRecipe): string {
  return join(dir, `${pair.name}-${agent.name}-${agentHash(pair, agent).slice(0, 12)}`);
}

/** The agent named `name` in `pair`, or an error. */
export function agentOf(pair: PairRecipe, name: string): AgentRecipe {
  const a = pair.agents.find((x) => x.name === name);
  if (a === undefined) throw new Error(`zoo pair ${pair.name} has no agent "${name}"`);
  return a;
}

/** The manifest of a built agent folder, or null when the folder is not (completely) built. */
export async function readManifest(agentFolder: string): Promise<ZooManifest | null> {
  const path = join(agentFolder, MANIFEST);
  if (!existsSync(path)) return null;
  return JSON.parse(await readFile(path, 'utf8')) as ZooManifest;
}

/** Both agents of `pair`, built into `dir` where missing (in order, so a later stage finds its parent). */
export async function ensurePair(pair: PairRecipe, dir: string, log: ZooLog): Promise<ZooAgent[]> {
  const out: ZooAgent[] = [];
  for (const agent of pair.agents) out.push(await ensureAgent(pair, agent, dir, log));
  return out;
}

/** One agent, built when its folder is missing; `force` rebuilds it (to check that the bytes come out the same). */
export async function ensureAgent(
  pair: PairRecipe,
  agent: AgentRecipe,
  dir: string,
  log: ZooLog,
  force = false,
): Promise<ZooAgent> {
  const folder = agentDir(dir, pair, agent);
  const cached = force ? null : await readManifest(folder);
  if (cached !== null) {
    log(`zoo: ${pair.name}/${agent.name} cached in ${folder}`);
    return { name: agent.name, dir: folder, manifest: cached };
  }
  let parentDir: string | null = null;
  if (agent.continues !== undefined) {
    const parent = agentOf(pair, agent.continues);
    if (JSON.stringify(parent.spec) !== JSON.stringify(agent.spec))
      throw new Error(`zoo ${pair.name}/${agent.name} continues ${parent.name}, so its spec must equal that agent's`);
    parentDir = (await ensureAgent(pair, parent, dir, log)).dir;
  }
  const partial = `${folder}.partial-${process.pid}`;
  await rm(partial, { recursive: true, force: true });
  const manifest = await buildAgent(pair, agent, parentDir, partial, log);
  await rm(folder, { recursive: true, force: true });
  await rename(partial, folder);
  log(
    `zoo: ${pair.name}/${agent.name} built in ${manifest.buildSeconds.toFixed(0)} s: greedy accuracy ` +
      `${pct(manifest.accuracy)} on ${manifest.accuracy.n} held-out problems; ${folder}`,
  );
  return { name: agent.name, dir: folder, manifest };
}

/**
 * Rebuilds each agent of `pair` in a scratch folder inside `dir` and compares its weights' sha256 with `built`'s (the
 * cached build); logs one line per agent and returns how many differ (0: the build is deterministic here).
 */
export async function rebuildMismatches(
  pair: PairRecipe,
  built: readonly ZooAgent[],
  dir: string,
  log: ZooLog,
): Promise<number> {
  let mismatches = 0;
  const scratch = await mkdtemp(join(dir, '.check-'));
  try {
    for (const [i, agent] of pair.agents.entries()) {
      const again = await ensureAgent(pair, agent, scratch, log, true);
      const want = await weightsDigest(built[i]!);
      const same = again.manifest.weightsSha256 === want;
      if (!same) mismatches++;
      log(
        `zoo check: ${pair.name}/${agent.name} ${same ? 'identical' : 'DIFFERENT'} weights ` +
          `(sha256 ${again.manifest.weightsSha256.slice(0, 16)}… vs cached ${want.slice(0, 16)}…), ` +
          `rebuilt in ${again.manifest.buildSeconds.toFixed(0)} s`,
      );
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return mismatches;
}

/**
 * Compares the weights of each agent of `pair` in `built` with the digest RECORDED_WEIGHTS holds for its recipe in
 * the reproducible mode (what every machine must compute); logs one line per agent and returns how many differ. With
 * the fast kernels, or for a recipe with no recorded digest, it says so and compares nothing.
 */
export async function recordedMismatches(pair: PairRecipe, built: readonly ZooAgent[], log: ZooLog): Promise<number> {
  let mismatches = 0;
  for (const [i, agent] of pair.agents.entries()) {
    const name = `${pair.name}/${agent.name}`;
    const recorded = RECORDED_WEIGHTS[name];
    if (!reproducibleMode().on) {
      log(`zoo check: ${name}: no recorded digest for the fast kernels (their bytes depend on the machine)`);
      continue;
    }
    if (recorded === undefined || recorded.hash !== agentHash(pair, agent).slice(0, 12)) {
      log(`zoo check: ${name}: no digest recorded for this recipe (src/zoo/recorded.ts)`);
      continue;
    }
    const have = await weightsDigest(built[i]!);
    const same = have === recorded.sha256;
    if (!same) mismatches++;
    log(
      `zoo check: ${name} ${same ? 'equals' : 'DIFFERS from'} the recorded digest ` +
        `(sha256 ${have.slice(0, 16)}… vs recorded ${recorded.sha256.slice(0, 16)}…)`,
    );
  }
  return mismatches;
}

/** sha256 of an agent's model.safetensors, read from the file (not its manifest: a damaged file must not pass). */
async function weightsDigest(agent: ZooAgent): Promise<string> {
  return createHash('sha256')
    .update(await readFile(join(agent.dir, 'model.safetensors')))
    .digest('hex');
}

/** User + system CPU seconds of this process since `start` (a process.cpuUsage() reading). */
export function cpuSecondsSince(start: NodeJS.CpuUsage): number {
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1e6;
}

/** `12.5% [8.6, 17.8]` */
export function pct(e: Estimate): string {
  return `${(100 * e.value).toFixed(1)}% [${(100 * e.low).toFixed(1)}, ${(100 * e.high).toFixed(1)}]`;
}

/** Trains one agent into `out` and writes its manifest. */
async function buildAgent(
  pair: PairRecipe,
  agent: AgentRecipe,
  parentDir: string | null,
  out: string,
  log: ZooLog,
): Promise<ZooManifest> {
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  const d = pair.data;
  const train = makeTaskDataset(presetSpec(d.task, 'train', d.trainN, d.seed)).problems;
  const test = makeTaskDataset(presetSpec(d.task, 'test', d.evalN, d.seed)).problems;
  const prompt = { template: d.template };
  const { model, tokenizer } =
    parentDir === null ? taskAgent(agent.spec, train, d.template) : await loadPretrained(parentDir);
  const k = engine();
  log(
    `zoo: building ${pair.name}/${agent.name}: ${agent.spec.arch} ${agent.spec.layers}×${agent.spec.hidden}, ` +
      `${(model.numParameters / 1e6).toFixed(2)}M parameters, ${agent.spec.tokenizer} tokenizer ` +
      `(${tokenizer.vocabSize} ids), ${agent.sft.steps} SFT steps` +
      (parentDir === null ? '' : ` continuing ${agent.continues}`),
  );
  let last: SftLogEntry | undefined;
  const report = await trainSft(
    model,
    k,
    tokenizer,
    train,
    test,
    {
      ...agent.sft,
      weightDecay: 0.01,
      clip: 1,
      // Bounded by steps alone: no intermediate evaluation (so no early stop), no time limit.
      evalEvery: 0,
      stopAtAccuracy: 1,
      timeLimitSec: Infinity,
      maxNewTokens: d.maxNewTokens,
      prompt,
    },
    (e) => {
      last = e;
      if (e.step % 50 === 0)
        log(`zoo: ${pair.name}/${agent.name} step ${e.step}/${agent.sft.steps}  loss ${e.loss.toFixed(4)}`);
    },
  );
  await savePretrained(out, { model, tokenizer, generation: null });
  const weights = await readFile(join(out, 'model.safetensors'));
  const manifest: ZooManifest = {
    pair: pair.name,
    agent: agent.name,
    hash: agentHash(pair, agent),
    recipe: agent,
    data: d,
    accuracy: report.greedy,
    weightsSha256: createHash('sha256').update(weights).digest('hex'),
    kernels: reproducibleMode().on ? 'reproducible' : 'fast',
    buildSeconds: (performance.now() - started) / 1e3,
    cpuSeconds: cpuSecondsSince(cpuStart),
    machine: { cpus: cpus().length, load1: loadavg()[0]! },
    finalLoss: last?.loss ?? NaN,
  };
  await writeJsonAtomic(join(out, MANIFEST), manifest);
  return manifest;
}
