/** The report's tables: the runs and their key settings, and the sample completions of each run's last step. */
import { summarizeConfig } from './config-summary.js';
import { escapeHtml } from './escape.js';
import { sourceColour } from './plots.js';
import type { RunData, SampleRow } from './run-data.js';
import { formatNumber } from './scale.js';
import type { SeriesSet } from './series.js';

const TIME_PARTS = ['generate', 'score', 'train'] as const;

/** Share of the logged step time spent generating, scoring and training, e.g. "generate 61% · score 4% · train 35%". */
function timeSplit(run: RunData): string {
  const totals = TIME_PARTS.map((p) =>
    run.metrics.reduce((sum, r) => {
      const v = r[`time_${p}_s`];
      return sum + (typeof v === 'number' && Number.isFinite(v) ? v : 0);
    }, 0),
  );
  const all = totals.reduce((a, b) => a + b, 0);
  if (all <= 0) return '—';
  return TIME_PARTS.map((p, i) => `${p} ${Math.round((100 * totals[i]!) / all)}%`).join(' · ');
}

const cell = (text: string): string => `<td>${escapeHtml(text)}</td>`;
// Prompts and completions keep their line breaks and spacing, which matter when reading a model's output.
const textCell = (text: string): string => `<td><pre>${escapeHtml(text)}</pre></td>`;

/** One row per run: label (in its first series' colour), folder, key config, steps logged and the time split. */
export function runsTable(runs: readonly RunData[], set: SeriesSet): string {
  const head = ['run', 'folder', 'algorithm', 'agents', 'B', 'G', 'lr', 'steps', 'logged', 'time split'];
  const rows = runs.map((run) => {
    const c = summarizeConfig(run.config);
    const first = set.sources.findIndex((s) => s.run === run.label);
    const swatch = first < 0 ? '' : `<span class="swatch" style="background:${sourceColour(first)}"></span>`;
    const steps = run.metrics.map((r) => r.step);
    const logged = steps.length === 0 ? 'no steps yet' : `${new Set(steps).size} (last ${Math.max(...steps)})`;
    return (
      `<tr><td>${swatch}<b>${escapeHtml(run.label)}</b></td>` +
      [run.dir, c.algorithm, c.agents, c.B, c.G, c.lr, c.steps, logged, timeSplit(run)].map(cell).join('') +
      (run.config === null ? '' : `<td>${configDetails(run.config)}</td>`) +
      '</tr>'
    );
  });
  return (
    `<table class="runs"><thead><tr>${head.map((h) => `<th>${h}</th>`).join('')}<th>config</th></tr></thead>` +
    `<tbody>${rows.join('')}</tbody></table>`
  );
}

function configDetails(config: unknown): string {
  return `<details><summary>resolved</summary><pre>${escapeHtml(JSON.stringify(config, null, 2))}</pre></details>`;
}

const show = (v: unknown): string => (v === undefined || v === null ? '—' : String(v));

function sampleRow(run: string, s: SampleRow): string {
  const mark =
    s.correct === undefined
      ? '<td class="mark">?</td>'
      : s.correct
        ? '<td class="mark ok" title="correct">✓</td>'
        : '<td class="mark bad" title="incorrect">✗</td>';
  return (
    `<tr class="${s.correct === true ? 'correct' : s.correct === false ? 'incorrect' : ''}">` +
    mark +
    [run, show(s.agent)].map(cell).join('') +
    [s.prompt, s.response].map(textCell).join('') +
    [show(s.answer), show(s.gold), s.reward == null ? '—' : formatNumber(s.reward)].map(cell).join('') +
    '</tr>'
  );
}

/**
 * One turn of a workflow episode (a samples.jsonl row with `episode`): its turn and role → policy, the prompt the
 * role saw and its response, the reward with its own and team parts, and the rewards of its group (tree sampling:
 * the K candidates the episode chose from).
 */
function episodeTurnRow(run: string, s: SampleRow): string {
  const num = (v: unknown): string => (typeof v === 'number' ? formatNumber(v) : '—');
  const group = Array.isArray(s.group_rewards) ? (s.group_rewards as number[]).map(num).join(', ') : '—';
  const outcome = [s.parsed === false ? 'unparsed' : '', s.sandbox ? `sandbox ${show(s.sandbox)}` : '']
    .filter(Boolean)
    .join(', ');
  return (
    `<tr class="${s.episode_success === true ? 'correct' : 'incorrect'}">` +
    `<td class="mark">${s.correct === true ? '✓' : ''}</td>` +
    [run, `${show(s.episode)} turn ${show(s.turn)}`, `${show(s.role)} → ${show(s.agent)}`].map(cell).join('') +
    [s.prompt, s.response].map(textCell).join('') +
    [`${num(s.reward)} (own ${num(s.own)}, team ${num(s.team)})${outcome ? `; ${outcome}` : ''}`, group]
      .map(cell)
      .join('') +
    '</tr>'
  );
}

/** The workflow episodes logged at each run's last step, turn by turn (green: the episode was solved). */
function episodesTable(runs: readonly RunData[], limit: number): string {
  const rows = runs.flatMap((run) => {
    const turns = run.samples.filter((s) => s.episode !== undefined);
    if (turns.length === 0) return [];
    const last = Math.max(...turns.map((s) => s.step));
    return turns
      .filter((s) => s.step === last)
      .slice(0, limit)
      .map((s) => episodeTurnRow(run.label, s));
  });
  if (rows.length === 0) return '';
  const head = ['', 'run', 'episode', 'role → policy', 'prompt', 'response', 'reward', 'group rewards'];
  return (
    '<h3>Workflow episodes, turn by turn (last step)</h3>' +
    `<table class="samples"><thead><tr>${head.map((h) => `<th>${h}</th>`).join('')}</tr></thead>` +
    `<tbody>${rows.join('')}</tbody></table>`
  );
}

/** The completions logged at each run's last sampled step (at most `limit` per run), HTML-escaped. */
export function samplesTable(runs: readonly RunData[], limit: number): string {
  const episodes = episodesTable(runs, limit);
  if (episodes !== '') return episodes;
  const notes: string[] = [];
  const rows = runs.flatMap((run) => {
    if (run.samples.length === 0) {
      notes.push(`${run.label}: no samples logged`);
      return [];
    }
    const last = Math.max(...run.samples.map((s) => s.step));
    const atLast = run.samples.filter((s) => s.step === last);
    const correct = atLast.filter((s) => s.correct === true).length;
    notes.push(
      `${run.label}: step ${last}, ${correct}/${atLast.length} correct` +
        (atLast.length > limit ? `, showing the first ${limit}` : ''),
    );
    return atLast.slice(0, limit).map((s) => sampleRow(run.label, s));
  });
  const head = ['', 'run', 'agent', 'prompt', 'response', 'answer', 'gold', 'reward'];
  return (
    `<p class="note">${notes.map(escapeHtml).join('<br>')}</p>` +
    (rows.length === 0
      ? ''
      : `<table class="samples"><thead><tr>${head.map((h) => `<th>${h}</th>`).join('')}</tr></thead>` +
        `<tbody>${rows.join('')}</tbody></table>`)
  );
}
