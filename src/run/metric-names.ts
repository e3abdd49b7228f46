/**
 * The metric protocol of metrics.jsonl, both directions in one place: one row per step; what belongs to an agent is
 * namespaced `agent/NAME/metric`, what belongs to the process (memory) is run-level. The trainer writes with
 * `namespaced`; the report, the health warnings of a resumed run and the experiments read with `agentMetrics`,
 * `rowsPerAgent` and `agentKey`.
 */

/** A metrics.jsonl row: its step and any fields (older runs also carry an `agent` field). */
export type MetricRow = { step: number; agent?: string | undefined } & Record<string, unknown>;

const PREFIX = 'agent/';
const NAMESPACED = /^agent\/([^/]+)\/(.+)$/;

/** The field name of agent `agent`'s `metric` in a row, e.g. `agent/qwen/reward_mean`. */
export function agentKey(agent: string, metric: string): string {
  return `${PREFIX}${agent}/${metric}`;
}

/** The agent and metric a field name stands for; null for a run-level field (`step`, `mem/…`). */
export function parseMetricKey(key: string): { agent: string; metric: string } | null {
  const m = NAMESPACED.exec(key);
  return m ? { agent: m[1]!, metric: m[2]! } : null;
}

/** Agent `agent`'s metrics under their row names. */
export function namespaced(agent: string, metrics: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(metrics).map(([k, v]) => [agentKey(agent, k), v]));
}

/** Agent `agent`'s metrics of `row` without their namespace (the inverse of `namespaced`). */
export function agentMetrics(agent: string, row: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const prefix = agentKey(agent, '');
  return Object.fromEntries(
    Object.entries(row).flatMap(([k, v]) => (k.startsWith(prefix) ? [[k.slice(prefix.length), v]] : [])),
  );
}

/**
 * One row per agent from a row whose fields are namespaced per agent: {step, agent: NAME, metric, …}, plus a row
 * without an agent for any fields not namespaced. A row that is not namespaced (older runs, or logged with an `agent`
 * field) is returned as it is.
 */
export function rowsPerAgent<R extends MetricRow>(row: R): MetricRow[] {
  const byAgent = new Map<string | undefined, MetricRow>();
  for (const [key, value] of Object.entries(row)) {
    if (key === 'step') continue;
    const parsed = parseMetricKey(key);
    const agent = parsed ? parsed.agent : row.agent;
    if (!parsed && key === 'agent') continue;
    const out = byAgent.get(agent) ?? { step: row.step, ...(agent === undefined ? {} : { agent }) };
    out[parsed ? parsed.metric : key] = value;
    byAgent.set(agent, out);
  }
  return byAgent.size === 0 ? [row] : [...byAgent.values()];
}
