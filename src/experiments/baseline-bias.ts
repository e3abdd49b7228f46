/**
 * `hacrl bench baseline`: how far each capability-aware baseline (hacpo.baseline) lands from an agent's own chance of
 * success on the question, per group. Every zoo agent's per-question success p(q) is estimated from many samples;
 * then groups of G responses per agent are drawn from those p(q) (Monte-Carlo, seeded) and each estimator's baseline
 * is compared with the learner's p(q). This is the direct test of the paper's unbiasedness claim when the agents'
 * capabilities differ: the paper's μ̂ is unbiased only on average over questions.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { engine } from '../backend/engine.js';
import { evaluate } from '../eval/evaluate.js';
import { groupIsConstant, groupMean } from '../algorithms/grouping.js';
import {
  DEFAULT_BASELINE,
  HACPO_BASELINES,
  type HacpoBaseline,
  baselineRatios,
  blendParts,
  blendWeight,
  groupBaseline,
} from '../algorithms/hacpo/index.js';
import { loadPretrained } from '../model/pretrained.js';
import { closeDefaultPool } from '../rewards/worker-pool.js';
import { loadDataSpec } from '../tasks/data-spec.js';
import { writeFileAtomic, writeJsonAtomic } from '../util/atomic-write.js';
import { Rng } from '../util/rng.js';
import { mean } from '../util/stats.js';
import { defaultZooDir, ensurePair } from '../zoo/build.js';
import { type PairName, pairRecipe } from '../zoo/recipes.js';
import { refuseOverlap } from '../util/output-paths.js';

/** The estimators compared: the learner's own group mean (GRPO's baseline) and every hacpo.baseline variant. */
export const BIAS_ESTIMATORS = ['own', ...HACPO_BASELINES] as const;
/** An estimator's name in the table. */
export type BiasEstimator = (typeof BIAS_ESTIMATORS)[number];

/** Options of the Monte-Carlo computation from p(q). */
export interface BiasOptions {
  /** Responses per agent per question G; default 8. */
  groupSize?: number;
  /** Simulated steps, each one group per question; default 200. */
  replicates?: number;
  /** Seed of the draws; default 0. */
  seed?: number;
}

/** One estimator's error against the learner's p(q), over questions × replicates. */
export interface BiasRow {
  estimator: BiasEstimator;
  /** Mean of (baseline − p(q)) over all groups, the baseline as training uses it (constant groups and fallback). */
  meanBias: number;
  /** Mean over questions of |E[baseline | q] − p(q)|. */
  meanAbsBias: number;
  /** √ mean (baseline − p(q))² over all groups. */
  rmse: number;
  /** Share of groups (not constant) whose estimator exceeds the group's largest reward (the fallback is taken). */
  exceedsMax: number;
  /** Share of the learner's correct responses (reward > 0) that the estimator, without the fallback, puts below it. */
  correctNegative: number;
}

/**
 * Every estimator's bias table for a learner with per-question success `own` and its partner with `partner` (same
 * questions, same order), ω = mean(own)/mean(partner) as a well-tracked P̂ converges to. A pure function of its inputs.
 */
export function baselineBias(own: readonly number[], partner: readonly number[], o: BiasOptions = {}): BiasRow[] {
  const G = o.groupSize ?? 8;
  const reps = o.replicates ?? 200;
  if (own.length === 0 || own.length !== partner.length) {
    throw new Error(
      `baselineBias needs p(q) of both agents on the same questions, got ${own.length} and ${partner.length}`,
    );
  }
  for (const p of [...own, ...partner]) {
    if (!(p >= 0 && p <= 1)) throw new Error(`a success probability must lie in [0, 1], got ${p}`);
  }
  if (!(Number.isInteger(G) && G >= 2)) throw new Error(`group size must be an integer ≥ 2, got ${G}`);
  if (!(Number.isInteger(reps) && reps >= 1)) throw new Error(`replicates must be an integer ≥ 1, got ${reps}`);
  const Q = own.length;
  const capability = [mean(own), mean(partner)];
  const omega = baselineRatios(capability, 0);
  const generators = Array.from({ length: 2 * G }, (_, i) => (i < G ? 0 : 1));
  const members = generators.map((_, i) => i);
  const ownMembers = members.slice(0, G);
  const rng = new Rng(o.seed ?? 0);
  const acc = BIAS_ESTIMATORS.map(() => ({ bias: 0, sq: 0, perQ: new Float64Array(Q), exceed: 0, negative: 0 }));
  let correct = 0;
  for (let rep = 0; rep < reps; rep++) {
    const batch = own.map((p, q) => generators.map((g) => (rng.next() < (g === 0 ? p : partner[q]!) ? 1 : 0)));
    const beta = blendWeight(batch.map((r) => blendParts(r, generators, 0, omega, members)));
    for (const [q, r] of batch.entries()) {
      const constant = groupIsConstant(r, members);
      const max = Math.max(...r);
      const ownMean = groupMean(r, ownMembers);
      for (const i of ownMembers) if (r[i]! > 0) correct++;
      for (const [e, name] of BIAS_ESTIMATORS.entries()) {
        const settings = { ...DEFAULT_BASELINE, kind: name as HacpoBaseline };
        const raw =
          name === 'own'
            ? ownMean
            : groupBaseline(r, generators, members, { settings, learner: 0, omega, capability, beta });
        // As capabilityAwareAdvantages: a constant group's advantages are 0 whatever the baseline (it counts as the
        // shared reward), and a baseline above the largest reward falls back to the learner's own mean.
        const used = constant ? r[0]! : raw > max ? ownMean : raw;
        const a = acc[e]!;
        a.bias += used - own[q]!;
        a.sq += (used - own[q]!) ** 2;
        a.perQ[q]! += used;
        if (!constant && raw > max) a.exceed++;
        if (!constant) for (const i of ownMembers) if (r[i]! > 0 && r[i]! < raw) a.negative++;
      }
    }
  }
  const n = Q * reps;
  return BIAS_ESTIMATORS.map((estimator, e) => {
    const a = acc[e]!;
    return {
      estimator,
      meanBias: a.bias / n,
      meanAbsBias: mean(Array.from(a.perQ, (s, q) => Math.abs(s / reps - own[q]!))),
      rmse: Math.sqrt(a.sq / n),
      exceedsMax: a.exceed / n,
      correctNegative: correct === 0 ? 0 : a.negative / correct,
    };
  });
}

/** Pearson correlation of two equally long series; 0 when either is constant. */
export function correlation(x: readonly number[], y: readonly number[]): number {
  const mx = mean(x);
  const my = mean(y);
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < x.length; i++) {
    sxy += (x[i]! - mx) * (y[i]! - my);
    sxx += (x[i]! - mx) ** 2;
    syy += (y[i]! - my) ** 2;
  }
  return sxx === 0 || syy === 0 ? 0 : sxy / Math.sqrt(sxx * syy);
}

/** One agent's measurement: its success, its ratio to the partner, and every estimator's row. */
export interface AgentBias {
  pair: string;
  agent: string;
  partner: string;
  /** Mean p(q) at temperature 1 (the P̂ a well-tracked Eq. 9 converges to). */
  success: number;
  /** ω = success / partner's success, clamped as Eq. 8 does. */
  omega: number;
  /** Correlation of the two agents' p(q) over the questions. */
  correlation: number;
  rows: BiasRow[];
}

/** Edges of the ω bins of the summary table (dimensionless). */
export const OMEGA_BINS = [0, 0.5, 1, 2, 4, Infinity] as const;

/** One ω bin × estimator: the agents' rows averaged (RMSE pooled as the root of the mean square). */
export interface BinRow extends Omit<BiasRow, 'estimator'> {
  estimator: BiasEstimator;
  bin: string;
  agents: number;
}

/** The agents' rows grouped by ω bin (OMEGA_BINS), for the table "as a function of ω". */
export function binByOmega(agents: readonly AgentBias[]): BinRow[] {
  const out: BinRow[] = [];
  for (let b = 0; b + 1 < OMEGA_BINS.length; b++) {
    const [lo, hi] = [OMEGA_BINS[b]!, OMEGA_BINS[b + 1]!];
    const inBin = agents.filter((a) => a.omega >= lo && a.omega < hi);
    if (inBin.length === 0) continue;
    const bin = hi === Infinity ? `≥ ${lo}` : `${lo}–${hi}`;
    for (const [e, estimator] of BIAS_ESTIMATORS.entries()) {
      const rows = inBin.map((a) => a.rows[e]!);
      out.push({
        bin,
        estimator,
        agents: inBin.length,
        meanBias: mean(rows.map((r) => r.meanBias)),
        meanAbsBias: mean(rows.map((r) => r.meanAbsBias)),
        rmse: Math.sqrt(mean(rows.map((r) => r.rmse ** 2))),
        exceedsMax: mean(rows.map((r) => r.exceedsMax)),
        correctNegative: mean(rows.map((r) => r.correctNegative)),
      });
    }
  }
  return out;
}

const f3 = (x: number) => x.toFixed(3);
const pc = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The per-agent table and the ω-binned one, as markdown. */
export function biasMarkdown(agents: readonly AgentBias[]): string {
  const lines = [
    '| pair | agent | P (T = 1) | ω | corr p(q) | estimator | mean bias | mean abs(bias) | RMSE | RMSE / own | exceeds max | correct with A < 0 |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const a of agents) {
    const own = a.rows.find((r) => r.estimator === 'own')!;
    for (const r of a.rows) {
      lines.push(
        `| ${a.pair} | ${a.agent} | ${f3(a.success)} | ${a.omega.toFixed(2)} | ${a.correlation.toFixed(2)} | ` +
          `${r.estimator} | ${f3(r.meanBias)} | ${f3(r.meanAbsBias)} | ${f3(r.rmse)} | ${(r.rmse / own.rmse).toFixed(2)} | ` +
          `${pc(r.exceedsMax)} | ${pc(r.correctNegative)} |`,
      );
    }
  }
  lines.push(
    '',
    '| ω bin | agents | estimator | mean bias | mean abs(bias) | RMSE | exceeds max | correct with A < 0 |',
  );
  lines.push('|---|---|---|---|---|---|---|---|');
  for (const b of binByOmega(agents)) {
    lines.push(
      `| ${b.bin} | ${b.agents} | ${b.estimator} | ${f3(b.meanBias)} | ${f3(b.meanAbsBias)} | ${f3(b.rmse)} | ` +
        `${pc(b.exceedsMax)} | ${pc(b.correctNegative)} |`,
    );
  }
  return lines.join('\n') + '\n';
}

/** Options of `hacrl bench baseline`. */
export interface BaselineBenchOptions {
  /** Zoo pairs measured; default state, size, model. */
  pairs: PairName[];
  /** Training-distribution questions per pair; default 300. */
  questions: number;
  /** Samples per question at temperature 1 for p(q); default 64. */
  samples: number;
  /** Monte-Carlo settings of the groups (G default 8, 200 replicates, seed 0); the same seed picks the questions. */
  bias: Required<BiasOptions>;
  /** Output folder (bias.json, bias.md); default runs/bench-baseline. */
  out: string;
  /** Zoo folder; default $HACRL_ZOO_DIR or runs/zoo. */
  zooDir?: string;
}

/** Flags of `hacrl bench baseline`. */
export interface BaselineBenchCliOptions {
  fast: boolean;
  only?: string;
  questions?: number;
  samples?: number;
  replicates?: number;
  seed: number;
  out?: string;
  zooDir?: string;
}

/** The bench's options from its flags: --fast is 30 questions × 16 samples and 50 replicates unless given. */
export function baselineBenchOptions(c: BaselineBenchCliOptions): BaselineBenchOptions {
  const pairs: PairName[] = c.only === undefined ? ['state', 'size', 'model'] : [pairRecipe(c.only).name];
  return {
    pairs,
    questions: c.questions ?? (c.fast ? 30 : 300),
    samples: c.samples ?? (c.fast ? 16 : 64),
    bias: { groupSize: 8, replicates: c.replicates ?? (c.fast ? 50 : 200), seed: c.seed },
    out: c.out ?? `runs/bench-baseline${c.fast ? '-fast' : ''}`,
    zooDir: c.zooDir,
  };
}

/** Measures every agent's p(q), prints and writes the tables; returns the agents' measurements. */
export async function runBaselineBench(
  o: BaselineBenchOptions,
  log: (line: string) => void = console.log,
): Promise<AgentBias[]> {
  const started = performance.now();
  const agents: AgentBias[] = [];
  // The tables replace files in --out: a zoo inside it (or it inside the zoo) would be written over.
  await refuseOverlap({ flag: '--out', path: o.out }, [{ flag: '--zoo-dir', path: o.zooDir ?? defaultZooDir() }]);
  try {
    for (const name of o.pairs) {
      const pair = pairRecipe(name);
      const zoo = await ensurePair(pair, o.zooDir ?? defaultZooDir(), log);
      const data = await loadDataSpec(`${pair.data.task}:train:${o.questions}:${o.bias.seed}`);
      const p: number[][] = [];
      for (const a of zoo) {
        log(`bench baseline: ${name}/${a.name}: ${o.samples} samples at T = 1 on ${data.problems.length} questions`);
        const { model, tokenizer } = await loadPretrained(a.dir);
        const r = await evaluate(model, engine(), tokenizer, data.problems, {
          k: o.samples,
          temperature: 1,
          maxNewTokens: pair.data.maxNewTokens,
          prompt: { template: pair.data.template },
          seed: o.bias.seed,
          name: a.dir,
        });
        p.push(r.problems.map((q) => mean(q.samples.map((s) => (s ? 1 : 0)))));
      }
      for (const [k, a] of zoo.entries()) {
        const j = 1 - k;
        const rows = baselineBias(p[k]!, p[j]!, o.bias);
        const omega = baselineRatios([mean(p[k]!), mean(p[j]!)], 0)[1]!;
        const corr = correlation(p[k]!, p[j]!);
        agents.push({
          pair: name,
          agent: a.name,
          partner: zoo[j]!.name,
          success: mean(p[k]!),
          omega,
          correlation: corr,
          rows,
        });
      }
    }
  } finally {
    await closeDefaultPool();
  }
  const md = biasMarkdown(agents);
  log(md);
  await mkdir(o.out, { recursive: true });
  await writeJsonAtomic(join(o.out, 'bias.json'), { options: o, agents, bins: binByOmega(agents) });
  await writeFileAtomic(join(o.out, 'bias.md'), md);
  log(`bench baseline: ${((performance.now() - started) / 1000).toFixed(0)} s; tables in ${o.out}/bias.{json,md}`);
  return agents;
}
