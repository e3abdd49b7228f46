/**
 * The tables of `hacrl bench paper` from its finished runs: accuracy per pair, agent, method and split (mean over
 * seeds with a 95% interval), paired differences of HACPO against its baselines (same problems, same seeds), the
 * mechanisms' statistics per method and agent (foreign in-band fraction, P̂, ω), and the learning rate each method's sweep chose.
 */
import { mean, seedMean, seedPairedDifference, wilson, type Difference } from '../util/stats.js';

/** What a finished run leaves in `results/<id>.json`. */
export interface RunResult {
  id: string;
  phase: 'sweep' | 'test';
  pair: string;
  method: string;
  /** The trained agent of a solo method; null for pair and base runs. */
  agent: string | null;
  seed: number;
  lr: number | null;
  /** Per agent and split ('validation', or 'test', 'ood' and 'ood-mild'): 1/0 per problem, in the split's fixed order. */
  correct: Record<string, Record<string, number[]>>;
  /** Per agent: means over steps of foreign_in_band_frac (trained form, _token, _char), p_hat and omega_* (pair runs only). */
  mechanisms: Record<string, Record<string, number>>;
  /** Wall-clock seconds of the run (training and evaluation). */
  seconds: number;
}

const pts = (x: number) => (100 * x).toFixed(1);
const signed = (x: number) => `${x >= 0 ? '+' : '−'}${pts(Math.abs(x))}`;

/** The runs of one cell: a method's test runs for one pair, and for solo methods the ones that trained `agent`. */
function cellRuns(results: readonly RunResult[], pair: string, method: string, agent: string): RunResult[] {
  return results
    .filter((r) => r.phase === 'test' && r.pair === pair && r.method === method && (r.agent ?? agent) === agent)
    .sort((a, b) => a.seed - b.seed);
}

/** Accuracy of `agent` on `split` per seed, or null when the cell has no finished run. */
function cell(results: readonly RunResult[], pair: string, method: string, agent: string, split: string) {
  const runs = cellRuns(results, pair, method, agent).filter((r) => r.correct[agent]?.[split] !== undefined);
  if (runs.length === 0) return null;
  const per = runs.map((r) => r.correct[agent]![split]!);
  return seedMean(per.map(mean), () => {
    const w = wilson(
      per[0]!.reduce((a, b) => a + b, 0),
      per[0]!.length,
    );
    return { low: w.low, high: w.high };
  });
}

/**
 * HACPO − `other` for one agent and split, paired by seed and problem: the per-seed mean difference with a t interval
 * over seeds; with one seed, the paired interval over problems. Null when either side lacks runs of the same seeds.
 */
export function pairedCell(
  results: readonly RunResult[],
  pair: string,
  agent: string,
  split: string,
  other: string,
  base = 'hacpo',
): (Difference & { seeds: number }) | null {
  const a = cellRuns(results, pair, base, agent);
  const b = cellRuns(results, pair, other, agent);
  const seeds = a.map((r) => r.seed).filter((s) => b.some((r) => r.seed === s));
  const pairs = seeds.map((s) => {
    const x = a.find((r) => r.seed === s)!.correct[agent]?.[split];
    const y = b.find((r) => r.seed === s)!.correct[agent]?.[split];
    return x && y ? { x, y } : null;
  });
  if (pairs.length === 0 || pairs.some((p) => p === null)) return null;
  const ok = pairs as { x: number[]; y: number[] }[];
  return seedPairedDifference(ok.map((p) => ({ before: p.y, after: p.x })));
}

/** Inputs of the Markdown page besides the results. */
export interface TableContext {
  /** The pairs and their agents, in table order. */
  pairs: { name: string; agents: string[] }[];
  /** Method names in column order, and their rollout budgets. */
  methods: { name: string; budget: string }[];
  splits: { key: string; label: string }[];
  /** The learning rate chosen per pair and method (and solo agent), with the validation accuracy of each candidate. */
  sweep: { pair: string; method: string; agent: string | null; chosen: number; tried: Record<string, number> }[];
  /** Lines above the tables: command, commit, machine, sizes. */
  header: string[];
  /** Methods whose paired differences against gspo, gspo-x2 and naive are tabled; default ['hacpo']. */
  pairedBases?: string[];
}

/** The whole Markdown page of the bench. */
export function renderTables(results: readonly RunResult[], ctx: TableContext): string {
  const lines = [...ctx.header, ''];
  const headline = ctx.methods.filter((m) => !m.name.startsWith('hacpo-'));
  const ablations = ctx.methods.filter((m) => m.name === 'hacpo' || m.name.startsWith('hacpo-'));
  const accuracyTable = (title: string, methods: typeof ctx.methods, split: { key: string; label: string }) => {
    lines.push(`### ${title}: greedy accuracy, ${split.label} (mean over seeds, 95% interval)`, '');
    lines.push(`| pair / agent | ${methods.map((m) => m.name).join(' | ')} |`);
    lines.push(`| --- | ${methods.map(() => '---').join(' | ')} |`);
    for (const p of ctx.pairs)
      for (const agent of p.agents) {
        const cells = methods.map((m) => {
          const c = cell(results, p.name, m.name, agent, split.key);
          return c === null ? '—' : `${pts(c.mean)} [${pts(c.low)}, ${pts(c.high)}]`;
        });
        lines.push(`| ${p.name} / ${agent} | ${cells.join(' | ')} |`);
      }
    lines.push('');
  };
  for (const split of ctx.splits) accuracyTable('Table 1 (methods)', headline, split);
  for (const split of ctx.splits) accuracyTable('Ablations and random-reward control', ablations, split);

  const others = ['gspo', 'gspo-x2', 'naive'];
  for (const base of ctx.pairedBases ?? ['hacpo']) {
    const name = base === 'hacpo' ? 'HACPO' : base;
    const against = base === 'hacpo' ? others : [...others, 'hacpo'];
    lines.push(`### Paired differences of ${name} (points; same problems and seeds; t interval over seeds)`, '');
    lines.push(
      `| pair / agent | split | ${against.map((o) => `${name} − ${o}`).join(' | ')} |`,
      `| --- | --- | ${against.map(() => '---').join(' | ')} |`,
    );
    for (const p of ctx.pairs)
      for (const agent of p.agents)
        for (const split of ctx.splits) {
          const cells = against.map((o) => {
            const d = pairedCell(results, p.name, agent, split.key, o, base);
            return d === null ? '—' : `${signed(d.mean)} [${signed(d.low)}, ${signed(d.high)}]`;
          });
          lines.push(`| ${p.name} / ${agent} | ${split.label} | ${cells.join(' | ')} |`);
        }
    lines.push('');
  }

  lines.push(
    '### Mechanisms per method and agent (means over steps, then over seeds): foreign in-band fraction (of the form ' +
      'trained, per token, per character), P̂, ω',
    '',
  );
  lines.push(
    '| pair | method | agent | seeds | in-band | in-band per token | in-band per char | P̂ | ω |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  );
  const byCell = new Map<string, { pair: string; method: string; agent: string; runs: Record<string, number>[] }>();
  for (const r of results.filter((x) => x.phase === 'test'))
    for (const [agent, m] of Object.entries(r.mechanisms)) {
      const key = `${r.pair}\u0000${r.method}\u0000${agent}`;
      const c = byCell.get(key) ?? { pair: r.pair, method: r.method, agent, runs: [] };
      byCell.set(key, c);
      c.runs.push(m);
    }
  const MECHANISMS = [
    'foreign_in_band_frac',
    'foreign_in_band_frac_token',
    'foreign_in_band_frac_char',
    'p_hat',
    'omega',
  ];
  for (const c of byCell.values()) {
    const f = (k: string) => {
      const xs = c.runs.map((m) => m[k]).filter((x): x is number => typeof x === 'number' && !Number.isNaN(x));
      return xs.length === 0 ? '—' : mean(xs).toFixed(3);
    };
    lines.push(`| ${c.pair} | ${c.method} | ${c.agent} | ${c.runs.length} | ${MECHANISMS.map(f).join(' | ')} |`);
  }
  lines.push('');

  lines.push('### Learning rates (chosen on the validation split, never the test split)', '');
  lines.push('| pair | method | chosen | validation accuracy per candidate |', '| --- | --- | --- | --- |');
  for (const s of ctx.sweep)
    lines.push(
      `| ${s.pair} | ${s.method}${s.agent ? ` (${s.agent})` : ''} | ${s.chosen} | ` +
        `${Object.entries(s.tried)
          .map(([lr, acc]) => `${lr}: ${pts(acc)}`)
          .join(', ')} |`,
    );
  lines.push('', '### Rollout budget per step (B prompts, G responses per prompt)', '');
  lines.push('| method | budget |', '| --- | --- |');
  for (const m of ctx.methods) lines.push(`| ${m.name} | ${m.budget} |`);
  return lines.join('\n') + '\n';
}
