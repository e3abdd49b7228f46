/** The HTML page around the report's parts: inline styles only, no scripts, nothing fetched. */
import { escapeHtml } from './escape.js';

// The page is laid out for a 1400 px wide window (the PNG export's width): three 440 px panels a row.
const CSS = `
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; font-size: 13px; color: #222; margin: 16px 20px;
  background: #fff; }
h1 { font-size: 20px; margin: 0 0 10px; }
h2 { font-size: 16px; margin: 22px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
pre { margin: 0; white-space: pre-wrap; word-break: break-word; font-size: 12px; max-height: 14em; overflow: auto; }
details pre { max-height: 30em; min-width: 420px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 5px; border-radius: 2px; }
.panels { display: grid; grid-template-columns: repeat(auto-fill, 440px); gap: 10px; }
.panel { border: 1px solid #e2e2e2; }
.panel svg { display: block; }
.samples td:nth-child(5) { min-width: 380px; }
.samples tr.correct { background: #f1faf3; }
.samples tr.incorrect { background: #fdf2f2; }
.mark { font-weight: bold; text-align: center; }
.mark.ok { color: #137333; }
.mark.bad { color: #b3261e; }
.note { color: #555; }
table.headline td { font-variant-numeric: tabular-nums; }
table.headline td:first-child { font-weight: bold; }
.constant { max-width: 1340px; }
`;

/** The parts of a report page. */
export interface PageParts {
  title: string;
  /** The result the page leads with (summary.ts). */
  headline: string;
  runsTable: string;
  panels: readonly string[];
  /** The line naming the panels left out because they stayed constant; '' when none. */
  constant: string;
  samples: string;
}

/** A complete, self-contained HTML document. */
export function renderPage(p: PageParts): string {
  const panels =
    p.panels.length === 0
      ? '<p class="note">No metrics logged yet.</p>'
      : `<div class="panels">\n${p.panels.map((svg) => `<figure class="panel" style="margin:0">\n${svg}\n</figure>`).join('\n')}\n</div>`;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${escapeHtml(p.title)}</title>
<style>${CSS}</style>
</head>
<body>
<h1>${escapeHtml(p.title)}</h1>
<h2>Result</h2>
${p.headline}
<h2>Runs</h2>
${p.runsTable}
<h2>Metrics over steps (validation first)</h2>
${p.constant}
${panels}
<h2>Sample completions (last step)</h2>
${p.samples}
</body>
</html>
`;
}
