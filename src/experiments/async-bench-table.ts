/**
 * The Markdown page of `hacrl bench async`: per setting and agent the means over seeds (steps per hour, waiting
 * shares, partners' off-policy ages and expired steps, held-out accuracy at equal steps and at equal wall time), then
 * the plan's comparisons as paired differences by seed (accuracy also paired by problem).
 */
import {
  accuracyOverSeeds,
  formatDifference,
  mean,
  seedMean,
  seedPairedDifference,
  type Difference,
} from '../util/stats.js';
import type { AsyncBenchPlan } from './async-bench-plan.js';
import type { AgentMeasure, AsyncRunResult } from './async-bench.js';

const fixed = (x: number, digits = 0) => (Number.isFinite(x) ? x.toFixed(digits) : '—');
/** "mean [low, high]", or the mean alone when there is no interval (one seed). */
const interval = (m: { mean: number; low: number; high: number }, digits = 0, scale = 1) =>
  Number.isFinite(m.low)
    ? `${fixed(scale * m.mean, digits)} [${fixed(scale * m.low, digits)}, ${fixed(scale * m.high, digits)}]`
    : fixed(scale * m.mean, digits);

/** Mean over seeds of a per-run number with its 95% t interval (one seed: no interval). */
const overSeeds = (values: number[]) => seedMean(values, () => ({ low: NaN, high: NaN }));

/** The runs of `setting`, by seed. */
const runsOf = (results: readonly AsyncRunResult[], setting: string) =>
  results.filter((r) => r.setting === setting).sort((a, b) => a.seed - b.seed);

/** Accuracy over seeds with its interval (one seed: Wilson over problems), as "mean [low, high]" in %. */
function accuracyCell(per: number[][]): string {
  if (per.length === 0) return '—';
  const m = accuracyOverSeeds(per);
  return interval(m, 1, 100);
}

/** A per-seed difference of a number between two settings (paired by seed), or null without common seeds. */
function numberDifference(
  results: readonly AsyncRunResult[],
  [a, b]: [string, string],
  value: (m: AgentMeasure) => number,
  agent: string,
): ReturnType<typeof overSeeds> | null {
  const other = runsOf(results, b);
  const diffs = runsOf(results, a).flatMap((x) => {
    const y = other.find((r) => r.seed === x.seed);
    return y ? [value(x.agents[agent]!) - value(y.agents[agent]!)] : [];
  });
  return diffs.length === 0 ? null : overSeeds(diffs);
}

/** Accuracy of `a` − `b` for one agent, paired by seed and problem, or null when either lacks it. */
function accuracyDifference(
  results: readonly AsyncRunResult[],
  [a, b]: [string, string],
  agent: string,
  pick: (m: AgentMeasure) => number[] | undefined,
): (Difference & { seeds: number }) | null {
  const other = runsOf(results, b);
  const pairs = runsOf(results, a).flatMap((x) => {
    const y = other.find((r) => r.seed === x.seed);
    const [after, before] = [pick(x.agents[agent]!), y && pick(y.agents[agent]!)];
    return after && before ? [{ before, after }] : [];
  });
  return pairs.length === 0 ? null : seedPairedDifference(pairs);
}

/** The page: `header` lines, the per-setting table and the comparisons. */
export function asyncBenchTable(
  results: readonly AsyncRunResult[],
  plan: AsyncBenchPlan,
  agents: readonly string[],
  header: readonly string[],
): string {
  const evaluated = plan.evalN > 0;
  const lines = [...header, ''];
  lines.push(
    `Per setting and agent: mean over seeds [95% t interval over seeds; one seed: none` +
      `${evaluated ? `, or Wilson over the ${plan.evalN} problems for accuracy` : ''}]. ` +
      'Steps/h: while every agent of the run was training. Waiting: share of ' +
      'step wall time outside generate + score + train (partners, exchange, checkpoint); of it at the maxAhead bound: ' +
      '`time_exchange_wait_s`. Lead: the largest t − (partner’s newest published step) over the steps decided after the partner’s first. Partner age: t − s ' +
      'of the partner steps trained on (negative: a partner step newer than the learner’s own).',
    '',
    `| setting | agent | steps | steps/h | waiting % | at bound % | lead max | partner age mean / max | expired |` +
      (evaluated ? ' accuracy at equal steps % | accuracy at equal wall time % (step) |' : ''),
    `| --- | --- | --- | --- | --- | --- | --- | --- | --- |${evaluated ? ' --- | --- |' : ''}`,
  );
  for (const s of plan.settings) {
    const runs = runsOf(results, s.name);
    if (runs.length === 0) continue;
    for (const agent of agents) {
      const m = runs.map((r) => r.agents[agent]!);
      const partners = m.flatMap((x) => Object.values(x.partners));
      const leads = m.flatMap((x) => (x.maxLead === null ? [] : [x.maxLead]));
      const cells = [
        s.name,
        agent,
        fixed(mean(m.map((x) => x.steps)), 1),
        interval(overSeeds(m.map((x) => x.stepsPerHour))),
        interval(overSeeds(m.map((x) => x.waitingShare)), 1, 100),
        fixed(100 * mean(m.map((x) => x.boundWaitShare)), 1),
        leads.length === 0 ? '—' : String(Math.max(...leads)),
        partners.length === 0
          ? '—'
          : `${fixed(mean(partners.map((p) => p.ageMean).filter(Number.isFinite)), 2)} / ` +
            `${fixed(Math.max(...partners.map((p) => p.ageMax).filter(Number.isFinite)))}`,
        partners.length === 0 ? '—' : String(partners.reduce((a, p) => a + p.expired, 0)),
      ];
      if (evaluated) {
        cells.push(accuracyCell(m.flatMap((x) => (x.atEqualSteps ? [x.atEqualSteps] : []))));
        const wall = m.flatMap((x) => (x.atEqualWall ? [x.atEqualWall] : []));
        cells.push(
          wall.length === 0
            ? '—'
            : `${accuracyCell(wall.map((w) => w.correct))} (${wall.map((w) => w.step).join(', ')})`,
        );
      }
      lines.push(`| ${cells.join(' | ')} |`);
    }
  }
  lines.push(
    '',
    'Paired differences (setting − against, same seed): steps per hour and waiting share with a t interval over ' +
      'seeds; accuracy paired by seed and problem (one seed: the paired interval over problems).',
    '',
    `| setting − against | agent | Δ steps/h | Δ waiting (points) |` +
      (evaluated ? ' Δ accuracy at equal steps (points) | Δ accuracy at equal wall time (points) |' : ''),
    `| --- | --- | --- | --- |${evaluated ? ' --- | --- |' : ''}`,
  );
  for (const c of plan.comparisons) {
    if (runsOf(results, c[0]).length === 0 || runsOf(results, c[1]).length === 0) continue;
    for (const agent of agents) {
      const rate = numberDifference(results, c, (m) => m.stepsPerHour, agent);
      const waiting = numberDifference(results, c, (m) => m.waitingShare, agent);
      const cells = [
        `${c[0]} − ${c[1]}`,
        agent,
        rate ? interval(rate) : '—',
        waiting ? interval(waiting, 1, 100) : '—',
      ];
      if (evaluated)
        for (const pick of [(m: AgentMeasure) => m.atEqualSteps, (m: AgentMeasure) => m.atEqualWall?.correct]) {
          const d = accuracyDifference(results, c, agent, pick);
          cells.push(d ? formatDifference(d) : '—');
        }
      lines.push(`| ${cells.join(' | ')} |`);
    }
  }
  return lines.join('\n') + '\n';
}
