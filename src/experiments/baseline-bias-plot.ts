/**
 * The plots of `hacrl bench baseline`: each estimator's per-group error against ω, one point per zoo agent, so the
 * paper's baseline can be seen to degrade where ω is large (the stronger agent of an unequal pair). Beside its
 * experiment, which the report layer below must not import.
 */
import { escapeHtml } from '../report/escape.js';
import { sourceColour } from '../report/plots.js';
import { renderLinePlot, type PlotLine } from '../report/svg-plot.js';
import { writeFileAtomic } from '../util/atomic-write.js';
import { BIAS_ESTIMATORS, type AgentBias, type BiasRow } from './baseline-bias.js';

/** One panel: a title, a y label, and the plotted value of an estimator's row (given the own mean's row). */
interface BiasPanel {
  title: string;
  yLabel: string;
  value: (row: BiasRow, own: BiasRow) => number;
}

const PANELS: readonly BiasPanel[] = [
  { title: 'Baseline RMSE / own group mean’s', yLabel: 'RMSE ratio (1 = own mean)', value: (r, o) => r.rmse / o.rmse },
  { title: 'Mean bias of the baseline', yLabel: 'mean (baseline − p(q))', value: (r) => r.meanBias },
  { title: 'Mean |bias| per question', yLabel: 'mean |E[baseline | q] − p(q)|', value: (r) => r.meanAbsBias },
  { title: 'Correct responses with A < 0', yLabel: '% of correct responses', value: (r) => 100 * r.correctNegative },
];

/** The x axis: ω of the learner, the ratio its partner's rewards are scaled by. */
const X_LABEL = 'ω = P̂(learner) / P̂(partner), one point per agent';

// Pairs are told apart by dash pattern, estimators by colour; the pair legend's swatches are neutral.
const PAIR_DASHES = ['', '7 4', '2 3', '10 3 2 3'];
const PAIR_SWATCH = '#555';

/** One SVG per panel: per pair, a line per estimator joining its agents in ω order (the weaker agent first). */
export function biasPlots(agents: readonly AgentBias[]): string[] {
  const pairs = [...new Set(agents.map((a) => a.pair))];
  return PANELS.map((panel) => {
    const lines: PlotLine[] = pairs.flatMap((pair, p) => {
      const members = agents.filter((a) => a.pair === pair).sort((a, b) => a.omega - b.omega);
      return BIAS_ESTIMATORS.map((estimator, e) => ({
        points: members.map((a) => {
          const own = a.rows.find((r) => r.estimator === 'own')!;
          return [
            a.omega,
            panel.value(
              a.rows.find((r) => r.estimator === estimator)!,
              own,
            ),
          ] as const;
        }),
        colour: sourceColour(e),
        dash: PAIR_DASHES[p % PAIR_DASHES.length]!,
      }));
    });
    const legend = [
      ...BIAS_ESTIMATORS.map((estimator, e) => ({ label: estimator, colour: sourceColour(e), dash: '' })),
      ...pairs.map((pair, p) => ({
        label: `pair ${pair}`,
        colour: PAIR_SWATCH,
        dash: PAIR_DASHES[p % PAIR_DASHES.length]!,
        newRow: p === 0,
      })),
    ];
    return renderLinePlot({ title: panel.title, xLabel: X_LABEL, yLabel: panel.yLabel, lines, legend });
  });
}

/** Writes the plots as one self-contained HTML page (no scripts, nothing fetched) at `path`. */
export async function writeBiasPage(agents: readonly AgentBias[], path: string, caption: string): Promise<void> {
  const points = [...agents]
    .sort((a, b) => a.omega - b.omega)
    .map((a) => `${a.pair}/${a.agent} ω = ${a.omega.toFixed(2)}`)
    .join('; ');
  const figures = biasPlots(agents)
    .map((svg) => `<figure style="margin:0;border:1px solid #e2e2e2">\n${svg}\n</figure>`)
    .join('\n');
  await writeFileAtomic(
    path,
    `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>hacrl bench baseline</title>
<style>body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; font-size: 13px; margin: 16px 20px; }
.panels { display: grid; grid-template-columns: repeat(2, 440px); gap: 10px; }</style>
</head>
<body>
<h1 style="font-size:18px">HACPO baselines against each agent’s own p(q)</h1>
<p>${escapeHtml(caption)}</p>
<p>${escapeHtml(points)}</p>
<div class="panels">
${figures}
</div>
</body>
</html>
`,
  );
}
