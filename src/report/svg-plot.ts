/**
 * A small line-plot renderer that writes static SVG. No chart library: the report must be one self-contained file
 * that opens offline, and plots drawn as plain SVG elements (no browser JavaScript) can be checked by reading the
 * markup, look the same in any browser, and export to PNG (or be copied into a paper) exactly as they are.
 */
import { escapeHtml } from './escape.js';
import { formatTick, stepAxis, valueAxis, type Axis } from './scale.js';

/** One series: (x, y) points in x order, null y for a gap. */
export interface PlotLine {
  points: readonly (readonly [number, number | null])[];
  colour: string;
  /** SVG stroke-dasharray; empty for a solid line. */
  dash: string;
}

/** A legend item: a short line in the series' colour and dash, and its name. */
export interface LegendEntry {
  label: string;
  colour: string;
  dash: string;
  /** Start a new legend row with this entry (e.g. metric names after run names). */
  newRow?: boolean;
}

/** What to draw. */
export interface PlotSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  lines: readonly PlotLine[];
  legend: readonly LegendEntry[];
  /** Width in px; the height follows from the plot area and the legend's rows. */
  width?: number;
}

const FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"';
const MARGIN = { left: 58, right: 14, top: 30, bottom: 42 };
const PLOT_HEIGHT = 190;
const LEGEND_ROW = 17;
const SWATCH = 24;
// Tick and legend text is 11 px; this average glyph width is enough to wrap legend rows without measuring text.
const CHAR_WIDTH = 6.4;

const r1 = (v: number): string => String(Math.round(v * 10) / 10);

/** Renders one panel as a standalone <svg> element: title, axes with ticks, grid, lines with gaps, legend. */
export function renderLinePlot(spec: PlotSpec): string {
  const width = spec.width ?? 440;
  const plotW = width - MARGIN.left - MARGIN.right;
  const finite = spec.lines.flatMap((l) => l.points.filter((p): p is [number, number] => p[1] !== null));
  const xs = spec.lines.flatMap((l) => l.points.map((p) => p[0]));
  const xAxis = xs.length > 0 ? stepAxis(Math.min(...xs), Math.max(...xs)) : stepAxis(0, 1);
  const ys = finite.map((p) => p[1]);
  const yAxis = ys.length > 0 ? valueAxis(Math.min(...ys), Math.max(...ys)) : valueAxis(0, 1);
  const sx = (x: number): number => MARGIN.left + ((x - xAxis.min) / (xAxis.max - xAxis.min)) * plotW;
  const sy = (y: number): number => MARGIN.top + (1 - (y - yAxis.min) / (yAxis.max - yAxis.min)) * PLOT_HEIGHT;

  const legend = layoutLegend(spec.legend, width);
  const height = MARGIN.top + PLOT_HEIGHT + MARGIN.bottom + legend.rows * LEGEND_ROW;
  const legendTop = MARGIN.top + PLOT_HEIGHT + MARGIN.bottom;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="${width}" height="${height}" ` +
      `viewBox="0 0 ${width} ${height}" role="img" ${FONT} font-size="11">`,
    `<title>${escapeHtml(spec.title)}</title>`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="${MARGIN.left}" y="18" font-size="13" font-weight="bold">${escapeHtml(spec.title)}</text>`,
    grid(xAxis, yAxis, sx, sy, plotW),
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${r1(plotW)}" height="${PLOT_HEIGHT}" ` +
      `fill="none" stroke="#888"/>`,
    `<text x="${r1(MARGIN.left + plotW / 2)}" y="${MARGIN.top + PLOT_HEIGHT + 34}" text-anchor="middle" ` +
      `fill="#444">${escapeHtml(spec.xLabel)}</text>`,
    spec.yLabel === ''
      ? ''
      : `<text transform="translate(12 ${r1(MARGIN.top + PLOT_HEIGHT / 2)}) rotate(-90)" text-anchor="middle" ` +
        `fill="#444">${escapeHtml(spec.yLabel)}</text>`,
    ...spec.lines.map((l) => drawLine(l, sx, sy)),
    finite.length === 0
      ? `<text x="${r1(MARGIN.left + plotW / 2)}" y="${MARGIN.top + PLOT_HEIGHT / 2}" text-anchor="middle" ` +
        `fill="#999">no values</text>`
      : '',
    ...legend.items.map(({ entry, x, row }) => legendItem(entry, x, legendTop + row * LEGEND_ROW)),
    '</svg>',
  ];
  return parts.filter((p) => p !== '').join('\n');
}

function grid(xAxis: Axis, yAxis: Axis, sx: (x: number) => number, sy: (y: number) => number, plotW: number): string {
  const yStep = yAxis.ticks.length > 1 ? yAxis.ticks[1]! - yAxis.ticks[0]! : 1;
  const xStep = xAxis.ticks.length > 1 ? xAxis.ticks[1]! - xAxis.ticks[0]! : 1;
  const bottom = MARGIN.top + PLOT_HEIGHT;
  const yTicks = yAxis.ticks.map((t) => {
    const y = r1(sy(t));
    return (
      `<line x1="${MARGIN.left}" x2="${r1(MARGIN.left + plotW)}" y1="${y}" y2="${y}" stroke="#e4e4e4"/>` +
      `<text x="${MARGIN.left - 5}" y="${y}" dy="0.35em" text-anchor="end" fill="#444">${formatTick(t, yStep)}</text>`
    );
  });
  const xTicks = xAxis.ticks.map((t) => {
    const x = r1(sx(t));
    return (
      `<line x1="${x}" x2="${x}" y1="${MARGIN.top}" y2="${bottom}" stroke="#f0f0f0"/>` +
      `<text x="${x}" y="${bottom + 15}" text-anchor="middle" fill="#444">${formatTick(t, xStep)}</text>`
    );
  });
  return [...yTicks, ...xTicks].join('\n');
}

/** A path through each run of consecutive values (a null breaks it) and a dot for each value standing alone. */
function drawLine(line: PlotLine, sx: (x: number) => number, sy: (y: number) => number): string {
  const runs: [number, number][][] = [];
  let current: [number, number][] = [];
  for (const [x, y] of line.points) {
    if (y === null) {
      if (current.length > 0) runs.push(current);
      current = [];
    } else current.push([sx(x), sy(y)]);
  }
  if (current.length > 0) runs.push(current);
  const d = runs
    .filter((r) => r.length > 1)
    .map(thin)
    .map((r) => r.map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${r1(x)} ${r1(y)}`).join(' '))
    .join(' ');
  const dash = line.dash === '' ? '' : ` stroke-dasharray="${line.dash}"`;
  const path =
    d === ''
      ? ''
      : `<path class="series" d="${d}" fill="none" stroke="${line.colour}" stroke-width="1.8"${dash} ` +
        `stroke-linejoin="round"/>`;
  // A lone value between gaps (or a run of one step) has no segment to draw, so it would vanish without a dot.
  const dots = runs
    .filter((r) => r.length === 1)
    .map(([[x, y]]) => `<circle cx="${r1(x!)}" cy="${r1(y!)}" r="2.6" fill="${line.colour}"/>`);
  return [path, ...dots].filter((p) => p !== '').join('\n');
}

/**
 * Keeps, of the points falling in one pixel column, the first, lowest, highest and last: a long run (thousands of
 * steps) then draws the same picture with a path a few plot-widths long instead of one point per step.
 */
function thin(points: [number, number][]): [number, number][] {
  if (points.length <= 1000) return points;
  const out: [number, number][] = [];
  for (let i = 0; i < points.length;) {
    const column = Math.round(points[i]![0]);
    let j = i;
    let lo = i;
    let hi = i;
    for (; j < points.length && Math.round(points[j]![0]) === column; j++) {
      if (points[j]![1] < points[lo]![1]) lo = j;
      if (points[j]![1] > points[hi]![1]) hi = j;
    }
    for (const k of [...new Set([i, Math.min(lo, hi), Math.max(lo, hi), j - 1])]) out.push(points[k]!);
    i = j;
  }
  return out;
}

interface PlacedEntry {
  entry: LegendEntry;
  x: number;
  row: number;
}

/** Places legend items left to right below the plot, starting a new row when the next one would not fit. */
function layoutLegend(entries: readonly LegendEntry[], width: number): { items: PlacedEntry[]; rows: number } {
  const items: PlacedEntry[] = [];
  let x = MARGIN.left;
  let row = 0;
  for (const entry of entries) {
    const w = SWATCH + 5 + entry.label.length * CHAR_WIDTH + 14;
    if ((entry.newRow === true || x + w > width - MARGIN.right) && x > MARGIN.left) {
      row++;
      x = MARGIN.left;
    }
    items.push({ entry, x, row });
    x += w;
  }
  return { items, rows: entries.length === 0 ? 0 : row + 1 };
}

function legendItem(e: LegendEntry, x: number, top: number): string {
  const y = top + LEGEND_ROW / 2;
  const dash = e.dash === '' ? '' : ` stroke-dasharray="${e.dash}"`;
  return (
    `<g class="legend-item"><line x1="${r1(x)}" x2="${r1(x + SWATCH)}" y1="${y}" y2="${y}" stroke="${e.colour}" ` +
    `stroke-width="2.2"${dash}/><text x="${r1(x + SWATCH + 5)}" y="${y}" dy="0.35em" fill="#222">` +
    `${escapeHtml(e.label)}</text></g>`
  );
}
