/**
 * What a report leads with: the run's result (a demo's accuracy before and after with intervals; a training run's
 * validation at its first and last evaluation, per agent), validation first among the plots, and the panels that
 * stayed constant for the whole run folded into one line instead of flat plots.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { formatDifference } from '../util/stats.js';
import { escapeHtml } from './escape.js';
import type { Panel } from './panels.js';
import type { RunData } from './run-data.js';
import { formatNumber } from './scale.js';
import type { MetricSeries, SeriesSet } from './series.js';

const Estimate = z.object({ value: z.number(), low: z.number(), high: z.number(), n: z.number() });
const Difference = z.object({ mean: z.number(), low: z.number(), high: z.number(), n: z.number() });
/** The part of a demo's demo.json the headline shows. */
const DemoJson = z.looseObject({
  pair: z.string(),
  rows: z.array(
    z.looseObject({ agent: z.string(), split: z.string(), before: Estimate, after: Estimate, change: Difference }),
  ),
});
/** A demo's measured result: accuracy before and after per agent and split. */
export type DemoHeadline = z.output<typeof DemoJson>;

/** The demo result in run folder `dir` (its demo.json), or null when it has none. */
export async function readDemoHeadline(dir: string): Promise<DemoHeadline | null> {
  const text = await readFile(join(dir, 'demo.json'), 'utf8').catch(() => null);
  if (text === null) return null;
  const r = DemoJson.safeParse(JSON.parse(text));
  if (!r.success) throw new Error(`${join(dir, 'demo.json')} is not a demo result: ${z.prettifyError(r.error)}`);
  return r.data;
}

/** Fields plotted as validation: held-out accuracy (`val/<set>/greedy`, `…/avg@k`, `…/pass@k`, `val_…`). */
export const isValidation = (field: string): boolean => /^val[_/]/.test(field);

const pct = (x: number): string => `${(100 * x).toFixed(1)}%`;
const interval = (e: { value: number; low: number; high: number }): string =>
  `${pct(e.value)} [${(100 * e.low).toFixed(1)}, ${(100 * e.high).toFixed(1)}]`;

function table(head: readonly string[], rows: readonly (readonly string[])[]): string {
  return (
    `<table class="headline"><thead><tr>${head.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead>` +
    `<tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`).join('')}</tbody></table>`
  );
}

function demoTable(label: string, d: DemoHeadline): string {
  return (
    `<p class="note">${escapeHtml(label)}: the ${escapeHtml(d.pair)} pair, greedy accuracy on held-out problems ` +
    'before and after training, 95% intervals; change: paired difference in points.</p>' +
    table(
      ['agent', 'split', 'n', 'before', 'after', 'change'],
      d.rows.map((r) => [
        r.agent,
        r.split,
        String(r.after.n),
        interval(r.before),
        interval(r.after),
        formatDifference(r.change),
      ]),
    )
  );
}

/** First and last non-null points of a series, or null when it has fewer than one. */
function ends(s: MetricSeries): { first: [number, number]; last: [number, number] } | null {
  const pts = s.points.filter((p): p is [number, number] => p[1] !== null);
  return pts.length === 0 ? null : { first: pts[0]!, last: pts.at(-1)! };
}

/**
 * The headline section: each demo's before/after table; for runs without one, every agent's validation at its
 * first and last evaluation (or, without validation, its training accuracy), one row per agent and metric.
 */
export function renderHeadline(
  runs: readonly RunData[],
  set: SeriesSet,
  demos: ReadonlyMap<string, DemoHeadline>,
): string {
  const parts: string[] = [];
  const rows: string[][] = [];
  for (const run of runs) {
    const demo = demos.get(run.label);
    if (demo) {
      parts.push(demoTable(run.label, demo));
      continue;
    }
    const sources = new Set(set.sources.flatMap((s, i) => (s.run === run.label ? [i] : [])));
    const mine = set.series.filter((s) => sources.has(s.source));
    const val = mine.filter((s) => isValidation(s.field));
    const shown = val.length > 0 ? val : mine.filter((s) => s.field === 'accuracy' || s.field === 'reward_mean');
    for (const s of shown) {
      const e = ends(s);
      if (!e) continue;
      rows.push([
        set.sources[s.source]!.label,
        s.field,
        `${formatNumber(e.first[1])} (step ${e.first[0]})`,
        `${formatNumber(e.last[1])} (step ${e.last[0]})`,
        `${e.last[1] - e.first[1] >= 0 ? '+' : '−'}${formatNumber(Math.abs(e.last[1] - e.first[1]))}`,
      ]);
    }
  }
  if (rows.length > 0)
    parts.push(
      '<p class="note">Held-out validation at the first and the last evaluation (training samples where a run has ' +
        'no validation).</p>' +
        table(['run · agent', 'metric', 'first', 'last', 'change'], rows),
    );
  return parts.length > 0 ? parts.join('\n') : '<p class="note">No validation or accuracy logged yet.</p>';
}

/** Panels in reading order with validation first: the result, before how training went. */
export function validationFirst(panels: readonly Panel[]): Panel[] {
  const val = panels.filter((p) => p.fields.every(isValidation));
  return [...val, ...panels.filter((p) => !val.includes(p))];
}

/** A series' one value when it never changed; null when it did; undefined under two points (too short to tell). */
function flatValue(s: MetricSeries): number | null | undefined {
  const values = s.points.map((p) => p[1]).filter((v): v is number => v !== null);
  if (values.length < 2) return undefined;
  return values.every((v) => v === values[0]) ? values[0]! : null;
}

/**
 * Splits panels into those worth plotting and those whose every series (two or more points each) kept one value
 * for the whole run, which are listed on one line: field = value, with the sources when they differ. Validation
 * panels are always plotted.
 */
export function foldConstantPanels(panels: readonly Panel[], set: SeriesSet): { plotted: Panel[]; constant: string } {
  const plotted: Panel[] = [];
  const folded: string[] = [];
  for (const panel of panels) {
    const series = set.series.filter((s) => panel.fields.includes(s.field));
    const flat = series.map(flatValue);
    const keep = panel.fields.every(isValidation); // the result is plotted even when it did not move
    if (keep || series.length === 0 || flat.some((v) => v === null || v === undefined)) {
      plotted.push(panel);
      continue;
    }
    const fields = panel.fields.map((f) => {
      const byValue = new Map<number, string[]>();
      series.forEach((s, i) => {
        if (s.field !== f) return;
        const v = flat[i] as number;
        byValue.set(v, [...(byValue.get(v) ?? []), set.sources[s.source]!.label]);
      });
      const values = [...byValue.entries()];
      return values.length === 1
        ? `${f} = ${formatNumber(values[0]![0])}`
        : `${f} = ${values.map(([v, who]) => `${formatNumber(v)} (${who.join(', ')})`).join(', ')}`;
    });
    folded.push(`<b>${escapeHtml(panel.title)}</b>: ${escapeHtml(fields.join('; '))}`);
  }
  const constant =
    folded.length === 0
      ? ''
      : `<p class="note constant">Constant for the whole run, so not plotted: ${folded.join(' · ')}</p>`;
  return { plotted, constant };
}
