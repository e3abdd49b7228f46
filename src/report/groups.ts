/**
 * Reports over many runs (a bench's seeds × methods): the runs of one group (a method on a pair) become one line per
 * agent, the mean over the group's runs at each step, so every method is overlaid and summarised in one row per
 * method and agent instead of one per run.
 */
import { renderReport, type ReportOptions } from './build.js';
import { loadRuns, type MetricRow, type RunData } from './run-data.js';
import { numericFields } from './series.js';

/** Runs reported together under one label. */
export interface RunGroup {
  /** Legend and table label, e.g. "size · hacpo". */
  label: string;
  /** Run folders of the group. */
  dirs: string[];
}

/**
 * One synthetic run per group: at each (agent, step), every numeric metric is the mean over the group's runs that
 * logged it; samples come from the group's first run.
 */
export function meanRun(label: string, runs: readonly RunData[]): RunData {
  const sums = new Map<string, { step: number; agent: string | undefined; fields: Map<string, number[]> }>();
  for (const run of runs)
    for (const row of run.metrics) {
      const key = `${row.agent ?? ''}\u0000${row.step}`;
      const at = sums.get(key) ?? { step: row.step, agent: row.agent, fields: new Map<string, number[]>() };
      sums.set(key, at);
      for (const [f, v] of numericFields(row)) if (v !== null) at.fields.set(f, [...(at.fields.get(f) ?? []), v]);
    }
  const metrics: MetricRow[] = [...sums.values()].map(({ step, agent, fields }) => {
    const row: MetricRow = { step, ...(agent === undefined ? {} : { agent }) };
    for (const [f, vs] of fields) row[f] = vs.reduce((a, b) => a + b, 0) / vs.length;
    return row;
  });
  return {
    dir: `${runs.length} run${runs.length === 1 ? '' : 's'}: ${runs.map((r) => r.label).join(', ')}`,
    label,
    config: runs[0]?.config ?? null,
    metrics,
    samples: runs[0]?.samples ?? [],
  };
}

/** The report of run groups, each drawn as its mean over runs (see meanRun). */
export async function buildGroupReport(groups: readonly RunGroup[], options: ReportOptions = {}): Promise<string> {
  const runs: RunData[] = [];
  for (const g of groups) if (g.dirs.length > 0) runs.push(meanRun(g.label, await loadRuns(g.dirs)));
  if (runs.length === 0) throw new Error('no runs to report');
  return renderReport(runs, options);
}
