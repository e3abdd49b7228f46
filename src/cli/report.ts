import { join } from 'node:path';
import { runBaselineBench, type BaselineBenchOptions } from '../experiments/baseline-bias.js';
import { writeBiasPage } from '../experiments/baseline-bias-plot.js';
import { buildReport } from '../report/build.js';
import { renderPng } from '../report/png.js';
import { writeFileAtomic } from '../util/atomic-write.js';

/** Options of `hacrl report`. */
export interface ReportCliOptions {
  /** Run folders (each with metrics.jsonl; config.resolved.json and samples.jsonl when present). */
  runs: string[];
  /** Where to write the HTML report. */
  output: string;
  /** Also render the report to this PNG with headless Chromium. */
  png?: string;
}

/** `hacrl report`: one self-contained HTML file with every run's metrics over steps and sample completions. */
export async function runReport(o: ReportCliOptions): Promise<void> {
  if (o.runs.length === 0) throw new Error('hacrl report needs at least one run folder');
  if (!o.output.endsWith('.html')) throw new Error(`--output should name an .html file, got "${o.output}"`);
  if (o.png !== undefined && !o.png.endsWith('.png')) throw new Error(`--png should name a .png file, got "${o.png}"`);
  await writeFileAtomic(o.output, await buildReport(o.runs));
  console.log(`wrote ${o.output}`);
  if (o.png !== undefined) {
    const { width, height } = await renderPng(o.output, o.png);
    console.log(`wrote ${o.png} (${width}×${height})`);
  }
}

/**
 * `hacrl bench baseline`: the tables (runBaselineBench), then the plots against ω as `<out>/bias.html` and, with
 * `png`, `<out>/bias.png` (two 440 px panels a row).
 */
export async function runBaselineBenchWithPlots(o: BaselineBenchOptions, png: boolean): Promise<void> {
  const agents = await runBaselineBench(o);
  const page = join(o.out, 'bias.html');
  const b = o.bias;
  await writeBiasPage(
    agents,
    page,
    `${o.questions} training-split questions × ${o.samples} samples at T = 1 per agent; G = ${b.groupSize}, ` +
      `${b.replicates} replicates, seed ${b.seed}. A line joins the two agents of one pair.`,
  );
  console.log(`bench baseline: plots in ${page}`);
  if (png) {
    const { width, height } = await renderPng(page, join(o.out, 'bias.png'), { width: 940 });
    console.log(`bench baseline: wrote ${join(o.out, 'bias.png')} (${width}×${height})`);
  }
}
