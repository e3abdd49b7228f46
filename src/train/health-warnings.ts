/**
 * Training-health warnings read from an agent's metric history: entropy collapse (the policy stops exploring) and
 * length blow-up (responses run into the token limit). Pure: the same history gives the same warnings, so a resumed
 * run that reloads its metrics.jsonl warns exactly as an uninterrupted one.
 */

/** One logged metric row (a line of metrics.jsonl). */
export type MetricRow = Readonly<Record<string, unknown>>;

/** When to warn; a threshold of 0 turns its check off. */
export interface HealthThresholds {
  /** Warn when the mean token entropy (metric `entropy`, nats) falls below this. */
  entropyFloor: number;
  /** Warn when the entropy falls below this fraction of its first logged value. */
  entropyFraction: number;
  /** Warn when the mean response length (metric `length_mean`) reaches this fraction of maxNewTokens. */
  lengthFraction: number;
  /** Warn when at least this fraction of responses is cut at maxNewTokens (metric `truncated_frac`). */
  truncatedFraction: number;
  /** The agent's token limit per response. */
  maxNewTokens: number;
}

/** The kinds of warning, each recorded as the metric `warn/<kind>` = 1 at every step where it holds. */
export type HealthKind = 'entropy_collapse' | 'length_blowup';

/** A warning raised by the latest row. */
export interface HealthWarning {
  kind: HealthKind;
  /** The metric that records it: `warn/<kind>`. */
  metric: `warn/${HealthKind}`;
  /** What was seen, with the numbers and the threshold crossed. */
  message: string;
  /** True when no earlier row of the history recorded this kind: the warning is printed only then. */
  first: boolean;
}

const num = (row: MetricRow | undefined, key: string): number | null => {
  const v = row?.[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
};
const pct = (x: number): string => `${(100 * x).toFixed(0)}%`;

/** Why the entropy of `latest` counts as collapsed, or null. */
function entropyCollapse(history: readonly MetricRow[], latest: MetricRow, t: HealthThresholds): string | null {
  const h = num(latest, 'entropy');
  if (h === null) return null;
  const start = history.map((r) => num(r, 'entropy')).find((v) => v !== null) ?? h;
  const why: string[] = [];
  if (t.entropyFloor > 0 && h < t.entropyFloor) why.push(`below the floor ${t.entropyFloor}`);
  if (t.entropyFraction > 0 && start > 0 && h < t.entropyFraction * start)
    why.push(`${pct(h / start)} of its first value ${start.toFixed(3)} (threshold ${pct(t.entropyFraction)})`);
  return why.length ? `entropy collapse: mean token entropy ${h.toFixed(4)} nats, ${why.join('; ')}` : null;
}

/** Why the lengths of `latest` count as blown up, or null. */
function lengthBlowup(latest: MetricRow, t: HealthThresholds): string | null {
  const length = num(latest, 'length_mean');
  const truncated = num(latest, 'truncated_frac');
  const why: string[] = [];
  if (t.lengthFraction > 0 && length !== null && length >= t.lengthFraction * t.maxNewTokens)
    why.push(
      `mean response length ${length.toFixed(1)} tokens is ${pct(length / t.maxNewTokens)} of maxNewTokens ` +
        `${t.maxNewTokens} (threshold ${pct(t.lengthFraction)})`,
    );
  if (t.truncatedFraction > 0 && truncated !== null && truncated >= t.truncatedFraction)
    why.push(`${pct(truncated)} of responses truncated (threshold ${pct(t.truncatedFraction)})`);
  return why.length ? `length blow-up: ${why.join('; ')}` : null;
}

/**
 * The warnings the last row of one agent's `history` (oldest first) raises; earlier rows give the entropy's first
 * value and tell whether a kind was already recorded (then `first` is false).
 */
export function healthWarnings(history: readonly MetricRow[], t: HealthThresholds): HealthWarning[] {
  const latest = history[history.length - 1];
  if (!latest) return [];
  const earlier = history.slice(0, -1);
  const found: [HealthKind, string | null][] = [
    ['entropy_collapse', entropyCollapse(history, latest, t)],
    ['length_blowup', lengthBlowup(latest, t)],
  ];
  return found.flatMap(([kind, message]) => {
    if (message === null) return [];
    const metric = `warn/${kind}` as const;
    return [{ kind, metric, message, first: !earlier.some((r) => r[metric] !== undefined) }];
  });
}
