/** Axis ranges, "nice" tick values (1, 2 or 5 × 10^k apart) and compact tick labels. */

/** An axis: its drawn range and the tick values inside it. */
export interface Axis {
  min: number;
  max: number;
  ticks: number[];
}

// Summing tick steps accumulates binary rounding error (0.1 + 0.2); 12 significant digits hide it in labels.
const clean = (v: number): number => Number(v.toPrecision(12));

/** A tick spacing of 1, 2 or 5 × 10^k close to span / count. */
function niceStep(span: number, count: number): number {
  const raw = span / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

// A flat series still needs a range to draw in; widen it around the value (or around 0 by 1).
function widen(lo: number, hi: number): [number, number] {
  if (hi > lo) return [lo, hi];
  const pad = lo === 0 ? 1 : Math.abs(lo) * 0.1;
  return [lo - pad, hi + pad];
}

/** A y axis covering [lo, hi], extended outwards to whole ticks so the top and bottom lines are labelled. */
export function valueAxis(lo: number, hi: number, count = 5): Axis {
  const [a, b] = widen(lo, hi);
  const step = niceStep(b - a, count);
  const min = clean(Math.floor(a / step) * step);
  const max = clean(Math.ceil(b / step) * step);
  const ticks: number[] = [];
  for (let i = 0; min + i * step <= max + step * 1e-9; i++) ticks.push(clean(min + i * step));
  return { min, max, ticks };
}

/** An x axis over steps [lo, hi] exactly (so lines reach both edges), with whole-number ticks inside it. */
export function stepAxis(lo: number, hi: number, count = 6): Axis {
  const [min, max] = widen(lo, hi);
  const step = Math.max(1, niceStep(max - min, count));
  const ticks: number[] = [];
  for (let t = Math.ceil(min / step) * step; t <= max; t += step) ticks.push(clean(t));
  return { min, max, ticks };
}

/** A short value: up to 3 significant digits, exponent form for very small or large magnitudes (learning rates). */
export function formatNumber(v: number): string {
  return format(v, 3);
}

/** A tick label with just enough digits to tell ticks `step` apart (1.0002 and 1.0004 stay distinct). */
export function formatTick(v: number, step: number): string {
  if (v === 0) return '0';
  return format(v, Math.max(1, Math.floor(Math.log10(Math.abs(v))) - Math.floor(Math.log10(step)) + 1));
}

function format(v: number, digits: number): string {
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1e5 || a < 1e-3) {
    const [mant, exp] = v.toExponential(Math.min(digits, 21) - 1).split('e');
    return `${String(Number(mant))}e${Number(exp)}`;
  }
  return String(Number(v.toPrecision(Math.min(digits, 21))));
}
