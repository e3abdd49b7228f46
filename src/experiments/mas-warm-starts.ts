/**
 * The warm starts of `hacrl bench mas`: per environment, the workflow's (every role's solver rows) and the single
 * agent's (its own rows), cached in `<workDir>/warm-starts` by everything that decides their weights, and played
 * greedily on the held-out instances — the untrained arms.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { AttemptedBandOutcome, BandOutcome } from '../agents/warm-start-band.js';
import { workflowAgent, type WarmStart } from '../agents/workflow-agent.js';
import type { Kernels } from '../backend/kernels.js';
import { reproducibleMode } from '../backend/select.js';
import type { AgentSpec } from '../model/agent-spec.js';
import { loadPretrained, savePretrained } from '../model/pretrained.js';
import { Rng } from '../util/rng.js';
import { modelPolicy } from '../workflows/model-policy.js';
import { playHeldOut, successRate } from '../workflows/play.js';
import { buildWorkflow } from '../workflows/registry.js';
import { parseWorkflowConfig } from '../workflows/workflow-config.js';
import type { Workflow } from '../workflows/workflow.js';

/** Where a warm start landed. */
export interface WarmStartReport {
  /** SFT steps trained. */
  steps: number;
  /** The band it was to stop in (fractions), or null for a fixed step count. */
  band: { low: number; high: number } | null;
  /** Greedy success on the calibration instances where it stopped (null without a band). */
  calibration: number | null;
  /** 'in-band', 'above' or 'below' the band (warm-start-band.ts), or 'fixed' without one. */
  outcome: BandOutcome['outcome'] | 'fixed';
  /** Calibration success after every chunk (empty without a band). */
  curve: BandOutcome['curve'];
  /** The kept try of `band.attempts`, from 1 (absent in warm starts cached before attempts existed: 1). */
  attempt?: number;
  /** Every try's stop, in order (absent without a band, or cached before attempts existed). */
  attempts?: AttemptedBandOutcome['attempts'];
  /** Greedy success on the held-out instances (the untrained arm's). */
  heldOut: number;
  /** True when it was read from the cache instead of trained. */
  cached: boolean;
}

/** 1/0 per held-out instance, in instance order. */
export const successVector = (episodes: readonly { seed: number; success: boolean }[]): number[] =>
  [...episodes].sort((a, b) => a.seed - b.seed).map((e) => (e.success ? 1 : 0));

/**
 * What of the kernels decides a result's rounding: backend, BLAS library and thread count (`HACRL_THREADS`); in the
 * reproducible mode nothing of them does, so results are shared across machines, backends and thread counts.
 */
export const kernelsKey = (k: Kernels) =>
  reproducibleMode().on
    ? { reproducible: true }
    : { name: k.name, blas: k.blas, threads: process.env['HACRL_THREADS'] ?? String(availableParallelism()) };

/**
 * Per workflow (default 1): bumped whenever warm-start training or that workflow's solver rows change in a way that
 * changes the weights of an unchanged key. math-tool 2: its tool rows compute the answer instead of printing it.
 * coding 2: a coder detoured before the last turn writes one of the task's mutants (was another task's reference).
 */
const WARM_CACHE_FORMAT: Readonly<Record<string, number>> = { 'math-tool': 2, coding: 2 };

/**
 * The warm start of `w` (built from workflow section `section`; `label` names its folder), from
 * `<workDir>/warm-starts` when a warm start with the same key is there, else trained and stored: the key holds the
 * resolved workflow section, agent, warm start (its band rule included), seed and the kernels' backend, BLAS library
 * and thread count (their rounding decides the weights). Returns its folder and where it stopped.
 */
async function cachedWarmStart(
  workDir: string,
  label: WarmStartKind,
  section: Record<string, unknown>,
  w: Workflow<unknown>,
  agent: AgentSpec,
  warm: WarmStart,
  k: Kernels,
  log: (line: string) => void,
): Promise<{ dir: string; stop: Omit<WarmStartReport, 'heldOut'> }> {
  const key = JSON.stringify({
    format: WARM_CACHE_FORMAT[w.name] ?? 1,
    workflow: parseWorkflowConfig(section),
    agent,
    warm,
    seed: 0,
    kernels: kernelsKey(k),
  });
  const hash = createHash('sha256').update(key).digest('hex').slice(0, 16);
  const dir = join(workDir, 'warm-starts', `${w.name}-${label}-${hash}`);
  const meta = join(dir, 'warm-start.json');
  if (existsSync(meta)) {
    const stored = JSON.parse(await readFile(meta, 'utf8')) as { key: string; stop: Omit<WarmStartReport, 'heldOut'> };
    if (stored.key === key) {
      log(`${w.name}: warm start from the cache (${dir})`);
      return { dir, stop: { ...stored.stop, cached: true } };
    }
  }
  const built = await workflowAgent(w, agent, warm, 0, k, log);
  const stop: Omit<WarmStartReport, 'heldOut'> = {
    steps: built.band?.steps ?? warm.steps,
    band: warm.band ? { low: warm.band.low, high: warm.band.high } : null,
    calibration: built.band?.calibration ?? null,
    outcome: built.band?.outcome ?? 'fixed',
    curve: built.band?.curve ?? [],
    ...(built.band ? { attempt: built.band.attempt, attempts: built.band.attempts } : {}),
    cached: false,
  };
  // Written beside the final folder and renamed into place, so an interrupted build never looks cached.
  const partial = `${dir}.partial`;
  await rm(partial, { recursive: true, force: true });
  await savePretrained(partial, { ...built, generation: null });
  await writeFile(join(partial, 'warm-start.json'), JSON.stringify({ key, stop }, null, 2) + '\n');
  await rm(dir, { recursive: true, force: true });
  await rename(partial, dir);
  return { dir, stop };
}

/** Which warm start: the workflow's (every role) or the single agent's. */
export type WarmStartKind = 'workflow' | 'single';

/** An environment's two warm starts: their folders, 1/0 per held-out instance, and where each landed. */
export interface BenchWarmStarts {
  starts: Record<WarmStartKind, string>;
  untrained: Record<WarmStartKind, number[]>;
  reports: Record<WarmStartKind, WarmStartReport>;
}

/**
 * Builds (or reads) the two warm starts of one environment, whose workflow section per kind is `sections`, and plays
 * each greedily on the first `o.heldOut` held-out instances, logging where it landed.
 */
export async function benchWarmStarts(
  sections: Record<WarmStartKind, Record<string, unknown>>,
  o: { workDir: string; heldOut: number; agent: AgentSpec; warmStart: WarmStart },
  k: Kernels,
  log: (line: string) => void,
): Promise<BenchWarmStarts> {
  const wf = buildWorkflow(sections.workflow);
  const out = { starts: {}, untrained: {}, reports: {} } as BenchWarmStarts;
  for (const [which, w] of [
    ['workflow', wf],
    ['single', buildWorkflow(sections.single)],
  ] as const) {
    const { dir, stop } = await cachedWarmStart(o.workDir, which, sections[which], w, o.agent, o.warmStart, k, log);
    out.starts[which] = dir;
    const agent = await loadPretrained(dir);
    const played = await playHeldOut(
      w,
      Object.fromEntries(w.roles.map((r) => [r.policy, modelPolicy(agent.model, agent.tokenizer, k, new Rng(1))])),
      o.heldOut,
    );
    out.untrained[which] = successVector(played.episodes);
    out.reports[which] = { ...stop, heldOut: successRate(played) };
    const calibration =
      stop.calibration === null ? '' : `, calibration ${stop.calibration.toFixed(3)} (${stop.outcome})`;
    log(
      `${wf.name} ${which}-untrained: ${stop.steps} warm-start steps${calibration}, held-out success ${successRate(played).toFixed(3)}`,
    );
  }
  return out;
}
