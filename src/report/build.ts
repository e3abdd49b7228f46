/** Building the report: run folders in, one self-contained HTML document out. */
import { panelsFor } from './panels.js';
import { renderPage } from './page.js';
import { renderPanels } from './plots.js';
import { loadRuns, type RunData } from './run-data.js';
import { collectSeries } from './series.js';
import { foldConstantPanels, readDemoHeadline, renderHeadline, validationFirst, type DemoHeadline } from './summary.js';
import { runsTable, samplesTable } from './tables.js';

/** Options of the report. */
export interface ReportOptions {
  /** Most sample completions shown per run; default 32. */
  maxSamples?: number;
  /** Demo results by run label (a demo run's demo.json), shown as the headline; default none. */
  demos?: ReadonlyMap<string, DemoHeadline>;
}

/** The report of already loaded runs as an HTML string (pure: no file access). */
export function renderReport(runs: readonly RunData[], options: ReportOptions = {}): string {
  const set = collectSeries(runs);
  const { plotted, constant } = foldConstantPanels(validationFirst(panelsFor(set.fields)), set);
  return renderPage({
    title: `hacrl report: ${runs.map((r) => r.label).join(', ')}`,
    headline: renderHeadline(runs, set, options.demos ?? new Map()),
    runsTable: runsTable(runs, set),
    panels: renderPanels(plotted, set),
    constant,
    samples: samplesTable(runs, options.maxSamples ?? 32),
  });
}

/** Reads the run folders and returns the report as one self-contained HTML file's text. */
export async function buildReport(runDirs: readonly string[], options: ReportOptions = {}): Promise<string> {
  const runs = await loadRuns(runDirs);
  const demos = new Map<string, DemoHeadline>();
  for (const run of runs) {
    const demo = await readDemoHeadline(run.dir);
    if (demo) demos.set(run.label, demo);
  }
  return renderReport(runs, { demos, ...options });
}
