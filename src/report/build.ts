/** Building the report: run folders in, one self-contained HTML document out. */
import { panelsFor } from './panels.js';
import { renderPage } from './page.js';
import { renderPanels } from './plots.js';
import { loadRuns, type RunData } from './run-data.js';
import { collectSeries } from './series.js';
import { runsTable, samplesTable } from './tables.js';

/** Options of the report. */
export interface ReportOptions {
  /** Most sample completions shown per run; default 32. */
  maxSamples?: number;
}

/** The report of already loaded runs as an HTML string (pure: no file access). */
export function renderReport(runs: readonly RunData[], options: ReportOptions = {}): string {
  const set = collectSeries(runs);
  return renderPage({
    title: `hacrl report: ${runs.map((r) => r.label).join(', ')}`,
    runsTable: runsTable(runs, set),
    panels: renderPanels(panelsFor(set.fields), set),
    samples: samplesTable(runs, options.maxSamples ?? 32),
  });
}

/** Reads the run folders and returns the report as one self-contained HTML file's text. */
export async function buildReport(runDirs: readonly string[], options: ReportOptions = {}): Promise<string> {
  return renderReport(await loadRuns(runDirs), options);
}
