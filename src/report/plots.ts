/** The report's plots: one SVG per panel, runs and agents told apart by colour and metrics by dash pattern. */
import type { Panel } from './panels.js';
import type { SeriesSet } from './series.js';
import { renderLinePlot, type LegendEntry, type PlotLine } from './svg-plot.js';

// Okabe–Ito's colour-blind-safe palette (yellow dropped: too faint on white), then a few darker extras.
const COLOURS = ['#0072B2', '#D55E00', '#009E73', '#CC79A7', '#56B4E9', '#E69F00', '#000000', '#7F3C8D', '#8C564B'];
const DASHES = ['', '7 4', '2 3', '10 3 2 3', '4 2', '1 2'];
// Metric legend swatches are neutral so that colour keeps meaning "which run/agent" only.
const METRIC_SWATCH = '#555';

/** The colour of the i-th (run, agent) source, the same in every panel. */
export function sourceColour(i: number): string {
  return COLOURS[i % COLOURS.length]!;
}

/** Renders one SVG line plot per panel, over steps. */
export function renderPanels(panels: readonly Panel[], set: SeriesSet): string[] {
  return panels.map((panel) => {
    const lines: PlotLine[] = [];
    const sources = new Set<number>();
    for (const [k, field] of panel.fields.entries())
      for (const s of set.series.filter((x) => x.field === field)) {
        sources.add(s.source);
        lines.push({ points: s.points, colour: sourceColour(s.source), dash: DASHES[k % DASHES.length]! });
      }
    const legend: LegendEntry[] = [...sources]
      .sort((a, b) => a - b)
      .map((i) => ({ label: set.sources[i]!.label, colour: sourceColour(i), dash: '' }));
    if (panel.fields.length > 1)
      legend.push(
        ...panel.fields.map((f, k) => ({
          label: f,
          colour: METRIC_SWATCH,
          dash: DASHES[k % DASHES.length]!,
          newRow: k === 0,
        })),
      );
    return renderLinePlot({ title: panel.title, xLabel: 'step', yLabel: panel.yLabel, lines, legend });
  });
}
