/** The results of `hacrl bench mas` as Markdown tables, and the verdict on whether AT-GRPO lifts the workflow. */
import { formatDifference, formatPoints } from '../util/stats.js';
import { ARMS, TRAINED, VERSUS } from './mas-arms.js';
import { ABLATIONS } from './mas-options.js';
import type { WarmStartReport } from './mas-warm-starts.js';
import type { BenchMasResult } from './mas.js';

/** The AT-GRPO arms, whose lift over the workflow's warm start the verdict table judges. */
const AT_GRPO = ['at-grpo-shared', 'at-grpo-per-role'] as const;

/**
 * Whether AT-GRPO arm `arm` lifts the workflow, as the bench's goal asks: above the untrained workflow and above
 * single-agent GRPO (each paired interval entirely above zero), and how far its weakest seed ended from its warm start
 * (fraction; below zero when some seed pushed the start below itself). For a result with seeds.
 */
export function atGrpoVerdict(
  r: BenchMasResult,
  arm: (typeof AT_GRPO)[number],
): { aboveWorkflow: boolean; aboveSingle: boolean; weakestSeedGain: number } {
  const d = r.paired[arm]!;
  const { perSeed, warmStart } = r.arms[arm]!;
  return {
    aboveWorkflow: d['workflow-untrained']!.low > 0,
    aboveSingle: d['single-grpo']!.low > 0,
    weakestSeedGain: Math.min(...perSeed) - warmStart,
  };
}

/** A fraction as percent with one decimal: 0.253 → '25.3'. */
const pct = (x: number): string => (100 * x).toFixed(1);

/** A warm start's tries in the table's stop column: ' (attempt 2 of 3: below 3.0%, in-band 28.0%)', or '' for one. */
function tries(w: WarmStartReport): string {
  if (w.attempts === undefined || w.attempts.length < 2) return '';
  const each = w.attempts.map((a) => `${a.outcome} ${(100 * a.calibration).toFixed(1)}%`).join(', ');
  return ` (attempt ${w.attempt} of ${w.attempts.length}: ${each})`;
}

/** A Markdown table: the header row, its rule, then `rows`. */
function table(header: readonly string[], rows: readonly string[]): string[] {
  return [`| ${header.join(' | ')} |`, `| ${header.map(() => '---').join(' | ')} |`, ...rows];
}

/** A table under a title, set off by blank lines; nothing when it has no rows. */
function titled(title: string, header: readonly string[], rows: readonly string[]): string[] {
  return rows.length === 0 ? [] : ['', title, '', ...table(header, rows)];
}

/** Success per arm (pooled over seeds, 95% interval) beside its warm start's, per seed and responses per step. */
function armLines(results: readonly BenchMasResult[]): string[] {
  const seeds = results[0]?.seeds ?? [];
  const header = ['env', 'arm', 'success %', '95% interval', 'warm start %', `per seed (${seeds.join(', ')})`];
  return table(
    [...header, 'responses/step'],
    results.flatMap((r) =>
      [...ARMS, ...ABLATIONS].flatMap((a) => {
        const arm = r.arms[a];
        if (arm === undefined) return [];
        const { pooled, perSeed, warmStart } = arm;
        return [
          `| ${r.workflow} | ${a} | ${pct(pooled.value)} | ${pct(pooled.low)}–${pct(pooled.high)} | ${pct(warmStart)} | ` +
            `${perSeed.map(pct).join(' / ')} | ${r.responsesPerStep[a] ?? '—'} |`,
        ];
      }),
    ),
  );
}

/** Each trained arm's paired differences from the arms of VERSUS (`trained`: the results with seeds). */
function pairedLines(trained: readonly BenchMasResult[]): string[] {
  return titled(
    'Paired differences in points (same held-out instances; per-seed mean, Student-t 95% interval over seeds):',
    ['env', 'arm', ...VERSUS.map((b) => `− ${b}`)],
    trained.flatMap((r) =>
      TRAINED.map((a) => {
        const d = r.paired[a]!;
        const cells = VERSUS.map((b) => (d[b] === undefined ? '—' : formatDifference(d[b])));
        return `| ${r.workflow} | ${a} | ${cells.join(' | ')} |`;
      }),
    ),
  );
}

/** Where each warm start stopped: steps, band, calibration success, how it stopped, held-out success. */
function warmStartLines(results: readonly BenchMasResult[]): string[] {
  // Always shown, even for no results: it is the one section a bench without seeds has.
  return [
    '',
    'Warm starts (greedy success; a band stops at the first chunk of steps inside it on calibration instances):',
    '',
    ...table(
      ['env', 'warm start', 'steps', 'band %', 'calibration %', 'stop', 'held-out %'],
      results.flatMap((r) =>
        (['workflow', 'single'] as const).map((which) => {
          const w = r.warmStarts[which];
          const band = w.band === null ? '—' : `${pct(w.band.low)}–${pct(w.band.high)}`;
          const calibration = w.calibration === null ? '—' : pct(w.calibration);
          return (
            `| ${r.workflow} | ${which} | ${w.steps} | ${band} | ${calibration} | ${w.outcome}${tries(w)}` +
            `${w.cached ? ' (cached)' : ''} | ${pct(w.heldOut)} |`
          );
        }),
      ),
    ),
  ];
}

/** Whether each AT-GRPO arm lifts the workflow (atGrpoVerdict; `trained`: the results with seeds). */
function verdictLines(trained: readonly BenchMasResult[]): string[] {
  const yes = (b: boolean): string => (b ? 'yes' : 'no');
  return titled(
    'Does AT-GRPO lift the workflow? (above: the paired interval lies above zero; weakest seed − warm start in points):',
    ['env', 'arm', 'above workflow-untrained', 'above single-grpo', 'weakest seed − warm start'],
    trained.flatMap((r) =>
      AT_GRPO.map((a) => {
        const v = atGrpoVerdict(r, a);
        return `| ${r.workflow} | ${a} | ${yes(v.aboveWorkflow)} | ${yes(v.aboveSingle)} | ${formatPoints(v.weakestSeedGain)} |`;
      }),
    ),
  );
}

/** Each ablation run against at-grpo-shared. */
function ablationLines(results: readonly BenchMasResult[]): string[] {
  return titled(
    'Ablations − at-grpo-shared in points (same instances and seeds; one seed: the interval is over instances):',
    ['env', 'ablation', '− at-grpo-shared', 'seeds'],
    results.flatMap((r) =>
      ABLATIONS.flatMap((a) => {
        const d = r.ablations[a];
        if (d === undefined) return [];
        const name = a === 'group-filter-flipped' ? `${a} (lowMeanRatio ${r.flippedLowMeanRatio})` : a;
        return [`| ${r.workflow} | ${name} | ${formatDifference(d)} | ${d.seeds} |`];
      }),
    ),
  );
}

/**
 * The results as Markdown: success per arm (pooled over seeds, 95% interval) beside its warm start's, then the paired
 * differences, then where each warm start stopped, then whether AT-GRPO lifts the workflow (atGrpoVerdict), then
 * (when run) each ablation against at-grpo-shared.
 */
export function benchMasTable(results: readonly BenchMasResult[]): string {
  // A bench with no seeds has warm starts only: nothing to pair or judge.
  const trained = results.filter((r) => r.seeds.length > 0);
  return [
    ...armLines(results),
    ...pairedLines(trained),
    ...warmStartLines(results),
    ...verdictLines(trained),
    ...ablationLines(results),
  ].join('\n');
}
