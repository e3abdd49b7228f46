/** Turning metric rows into plottable series: one per run, agent and numeric field. */
import type { MetricRow, RunData } from './run-data.js';

/** A line of one metric for one (run, agent), over steps. */
export interface MetricSeries {
  /** Flattened field name, e.g. "reward_mean" or "val_accuracy/gsm8k". */
  field: string;
  /** Index of the (run, agent) pair, fixed across all panels so it keeps one colour everywhere. */
  source: number;
  /** Points sorted by step; a null value is drawn as a gap. */
  points: [step: number, value: number | null][];
}

/** A (run, agent) pair whose series share a colour. */
export interface SeriesSource {
  run: string;
  /** Undefined for rows logged without an agent (single-agent runs, or run-wide rows of a HACPO run). */
  agent: string | undefined;
  label: string;
}

/** All series of a report, with the numeric fields in order of first appearance. */
export interface SeriesSet {
  fields: string[];
  sources: SeriesSource[];
  series: MetricSeries[];
}

const NOT_METRICS = new Set(['step', 'agent']);

/**
 * Numeric leaves of a metric row under '/'-joined names (val_accuracy: {gsm8k: 0.4} → "val_accuracy/gsm8k"), with
 * null for a value logged as null (JSON's stand-in for NaN and infinities); strings, booleans and arrays are not
 * plottable and are left out.
 */
export function numericFields(row: MetricRow): Map<string, number | null> {
  const out = new Map<string, number | null>();
  const visit = (value: unknown, name: string): void => {
    if (typeof value === 'number') out.set(name, Number.isFinite(value) ? value : null);
    else if (value === null) out.set(name, null);
    else if (value !== null && typeof value === 'object' && !Array.isArray(value))
      for (const [k, v] of Object.entries(value)) visit(v, `${name}/${k}`);
  };
  for (const [k, v] of Object.entries(row)) if (!NOT_METRICS.has(k)) visit(v, k);
  return out;
}

/** Groups every run's rows by agent and field; a step logged twice (e.g. again after a resume) keeps its last row. */
export function collectSeries(runs: readonly RunData[]): SeriesSet {
  const fields = new Set<string>();
  const sources: SeriesSource[] = [];
  const series: MetricSeries[] = [];
  for (const run of runs) {
    const byAgent = new Map<string | undefined, Map<number, Map<string, number | null>>>();
    for (const row of run.metrics) {
      const steps = byAgent.get(row.agent) ?? new Map<number, Map<string, number | null>>();
      byAgent.set(row.agent, steps);
      const values = numericFields(row);
      steps.set(row.step, values);
      for (const [f, v] of values) if (v !== null) fields.add(f);
    }
    for (const [agent, steps] of byAgent) {
      const source = sources.length;
      sources.push({ run: run.label, agent, label: agent === undefined ? run.label : `${run.label} · ${agent}` });
      const ordered = [...steps.entries()].sort((a, b) => a[0] - b[0]);
      const present = new Set(ordered.flatMap(([, v]) => [...v.keys()]));
      for (const field of present) {
        if (!fields.has(field)) continue; // only ever null so far: nothing to draw
        const points = ordered.flatMap(([step, v]): [number, number | null][] =>
          v.has(field) ? [[step, v.get(field)!]] : [],
        );
        series.push({ field, source, points: breakAtMissing(points) });
      }
    }
  }
  return { fields: [...fields], sources, series };
}

/**
 * Inserts a gap where a series skips steps it is normally logged at. A field logged every 4th step (validation)
 * is one connected line; a field logged every step but absent at one is missing there, and the line breaks.
 * The cadence is the median spacing of the series' own steps.
 */
export function breakAtMissing(points: readonly [number, number | null][]): [number, number | null][] {
  if (points.length < 3) return [...points];
  const gaps = points
    .slice(1)
    .map((p, i) => p[0] - points[i]![0])
    .sort((a, b) => a - b);
  const cadence = gaps[Math.floor(gaps.length / 2)]!;
  return points.flatMap((p, i): [number, number | null][] =>
    i > 0 && p[0] - points[i - 1]![0] > 1.5 * cadence ? [[(p[0] + points[i - 1]![0]) / 2, null], p] : [p],
  );
}
