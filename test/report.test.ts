// `hacrl report`: HTML content from synthetic runs, input errors, and the page as headless Chromium draws it.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { inflateSync } from 'node:zlib';
import { after, describe, test } from 'node:test';
import { runReport } from '../src/cli/report.js';
import { buildReport } from '../src/report/build.js';
import { chromiumPath, runChromium } from '../src/report/chromium.js';
import { summarizeConfig } from '../src/report/config-summary.js';
import { buildGroupReport, meanRun } from '../src/report/groups.js';
import { loadRuns, uniqueLabels } from '../src/report/run-data.js';
import { formatTick, valueAxis } from '../src/report/scale.js';
import { breakAtMissing } from '../src/report/series.js';
import { renderLinePlot } from '../src/report/svg-plot.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-report-'));
after(() => rm(root, { recursive: true, force: true }));

const XSS = '<script>alert("x")</script> & <b>bold</b>';

async function writeRun(
  name: string,
  config: unknown,
  metrics: readonly object[],
  samples: readonly object[],
): Promise<string> {
  const dir = join(root, name);
  await mkdir(dir, { recursive: true });
  const jsonl = (rows: readonly object[]): string => rows.map((r) => JSON.stringify(r) + '\n').join('');
  await writeFile(join(dir, 'config.resolved.json'), JSON.stringify(config));
  await writeFile(join(dir, 'metrics.jsonl'), jsonl(metrics));
  await writeFile(join(dir, 'samples.jsonl'), jsonl(samples));
  return dir;
}

// A GRPO run with every known field (validation only every 4th step, so its lines have gaps)...
const grpoMetrics = Array.from({ length: 12 }, (_, step) => ({
  step,
  time_s: 10 + step,
  reward_mean: 0.2 + 0.05 * step,
  reward_std: 0.4 - 0.01 * step,
  accuracy: 0.2 + 0.05 * step,
  ...(step % 4 === 0 ? { val_accuracy: { gsm8k: 0.1 + 0.04 * step, math500: 0.05 + 0.02 * step } } : {}),
  length_mean: 40 + step,
  length_min: 12,
  length_max: 90 + 2 * step,
  truncated_frac: 0.05,
  entropy: 1.2 - 0.05 * step,
  kl: 0.001 * step,
  clip_frac_low: 0.01,
  clip_frac_high: 0.02 + 0.001 * step,
  ratio_mean: 1,
  ratio_min: 0.8,
  ratio_max: 1.3,
  zero_var_groups_frac: 0.3,
  loss: 0.1 - 0.005 * step,
  grad_norm: 0.5,
  lr: 3e-4,
  tokens: 5000,
  tokens_per_s: 900 + 10 * step,
  time_generate_s: 6,
  time_score_s: 0.5,
  time_train_s: 3.5,
}));
// ...and a HACPO run with two agents, fields missing (no kl, no ratios, agent b without entropy, a step without
// accuracy), HACPO's own fields and one the report does not know.
const hacpoMetrics = Array.from({ length: 8 }, (_, step) =>
  ['qwen-a', 'llama-b'].map((agent, a) => ({
    step,
    agent,
    reward_mean: 0.1 + 0.06 * step + 0.05 * a,
    ...(step === 3 ? {} : { accuracy: 0.1 + 0.06 * step + 0.05 * a }),
    ...(a === 0 ? { entropy: 1.1 - 0.04 * step } : {}),
    length_mean: 30 + 3 * step,
    p_hat: 0.4 + 0.1 * a + 0.01 * step,
    omega: 1 + 0.2 * a,
    foreign_ratio_mean: 0.9,
    foreign_in_band_frac: 0.7 + 0.02 * step,
    my_custom_metric: step * step,
    time_generate_s: 4,
    time_score_s: 1,
    time_train_s: 5,
  })),
).flat();

const runA = await writeRun(
  'grpo-run',
  {
    algorithm: 'grpo',
    agents: [{ name: 'qwen-a', lr: 3e-4 }],
    rollout: { prompts_per_step: 8, group_size: 4 },
    steps: 12,
  },
  grpoMetrics,
  [
    { step: 10, prompt: 'What is 2+2?', response: 'old', answer: '4', gold: '4', correct: true, reward: 1 },
    {
      step: 11,
      prompt: 'What is 2+2?',
      response: `Thinking ${XSS} \\boxed{4}`,
      answer: '4',
      gold: '4',
      correct: true,
      reward: 1,
    },
    {
      step: 11,
      prompt: 'What is 3·5?',
      response: 'It is \\boxed{16}',
      answer: '16',
      gold: '15',
      correct: false,
      reward: 0,
    },
  ],
);
const runB = await writeRun(
  'hacpo-run',
  {
    algorithm: 'hacpo',
    agents: [
      { name: 'qwen-a', lr: 3e-4 },
      { name: 'llama-b', lr: 1e-4 },
    ],
    promptsPerStep: 4,
    groupSize: 8,
    steps: 8,
  },
  hacpoMetrics,
  [
    {
      step: 7,
      agent: 'llama-b',
      prompt: 'What is 7-2?',
      response: '\\boxed{5}',
      answer: '5',
      gold: '5',
      correct: true,
      reward: 1,
    },
  ],
);

const count = (text: string, re: RegExp): number => (text.match(re) ?? []).length;

describe('report content', async () => {
  const html = await buildReport([runA, runB]);

  test('one SVG plot per panel, known groups first, unknown fields too', () => {
    const panels = count(html, /<figure class="panel"/g);
    assert.ok(panels >= 10, `only ${panels} panels`);
    assert.equal(count(html, /<svg /g), panels);
    const titles = [...html.matchAll(/<title>([^<]*)<\/title>/g)].map((m) => m[1]);
    for (const t of ['Reward', 'Validation accuracy', 'Completion length', 'Clip fractions'])
      assert.ok(titles.includes(t), `no panel "${t}"`);
    assert.equal(titles[1], 'Validation accuracy', 'validation is the first plot (after the page title)');
    assert.ok(titles.includes('Capability P̂ and ω') && titles.includes('Foreign samples in the clip band'));
    assert.equal(titles.at(-1), 'my_custom_metric', 'an unknown field gets a panel after the known ones');
    assert.ok(titles.indexOf('Reward') < titles.indexOf('Entropy'));
  });

  test('both runs and each HACPO agent appear in the legends', () => {
    const legend = [...html.matchAll(/<g class="legend-item">.*?<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
    for (const name of ['grpo-run', 'hacpo-run · qwen-a', 'hacpo-run · llama-b'])
      assert.ok(legend.includes(name), `"${name}" missing from the legends`);
    assert.ok(legend.includes('val_accuracy/gsm8k'), 'nested validation fields are named dataset by dataset');
  });

  test('header has each run’s key config', () => {
    assert.deepEqual(summarizeConfig(JSON.parse(JSON.stringify({ algorithm: 'grpo', train: { B: 8, G: 4 } }))), {
      algorithm: 'grpo',
      agents: '—',
      B: '8',
      G: '4',
      lr: '—',
      steps: '—',
    });
    const row = (label: string): string => html.slice(html.indexOf(`<b>${label}</b>`)).split('</tr>')[0]!;
    const cells = (label: string): string[] => [...row(label).matchAll(/<td>([^<]*)<\/td>/g)].map((m) => m[1]!);
    assert.deepEqual(cells('grpo-run').slice(1, 7), ['grpo', '1: qwen-a', '8', '4', '0.0003', '12']);
    assert.deepEqual(cells('hacpo-run').slice(1, 7), ['hacpo', '2: qwen-a, llama-b', '4', '8', '0.0003, 0.0001', '8']);
    assert.match(row('grpo-run'), /generate 60% · score 5% · train 35%/);
  });

  test('last step’s samples, escaped and marked', () => {
    assert.ok(!html.includes('<script'), 'the report has no scripts (and sample text cannot inject one)');
    assert.ok(html.includes('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;'));
    assert.ok(!html.includes('<pre>old</pre>'), 'only the last step’s samples');
    assert.equal(count(html, /class="mark ok"/g), 2);
    assert.equal(count(html, /class="mark bad"/g), 1);
    assert.match(html, /grpo-run: step 11, 1\/2 correct/);
  });

  test('the page leads with the result: validation at the first and last evaluation, per run and agent', () => {
    const result = html.slice(html.indexOf('<h2>Result</h2>'), html.indexOf('<h2>Runs</h2>'));
    assert.ok(html.indexOf('<h2>Result</h2>') < html.indexOf('<h2>Metrics over steps'));
    const row = (label: string, metric: string): string[] => {
      const at = result.indexOf(`<td>${label}</td><td>${metric}</td>`);
      assert.ok(at >= 0, `no headline row for ${label} ${metric}`);
      return [
        ...result
          .slice(at)
          .split('</tr>')[0]!
          .matchAll(/<td>([^<]*)<\/td>/g),
      ].map((m) => m[1]!);
    };
    assert.deepEqual(row('grpo-run', 'val_accuracy/gsm8k').slice(2), ['0.1 (step 0)', '0.42 (step 8)', '+0.32']);
    // A run without validation is summarised by its training accuracy, per agent.
    assert.deepEqual(row('hacpo-run · llama-b', 'accuracy').slice(2), ['0.15 (step 0)', '0.57 (step 7)', '+0.42']);
  });

  test('panels constant for the whole run are folded into one line that says so', () => {
    const titles = [...html.matchAll(/<title>([^<]*)<\/title>/g)].map((m) => m[1]);
    assert.ok(!titles.includes('Time split') && !titles.includes('Learning rate'), 'flat panels are not plotted');
    const line = /<p class="note constant">([^]*?)<\/p>/.exec(html)?.[1] ?? '';
    assert.match(line, /^Constant for the whole run, so not plotted: /);
    assert.match(
      line,
      /<b>Time split<\/b>: time_generate_s = 6 \(grpo-run\), 4 \(hacpo-run · qwen-a, hacpo-run · llama-b\)/,
    );
    assert.match(line, /<b>Learning rate<\/b>: lr = 3e-4/);
    assert.ok(titles.includes('Clip fractions'), 'a panel with one moving line stays');
  });

  test("a demo's before/after table with intervals heads its report", async () => {
    const demo = await writeRun('demo-run', { algorithm: 'hacpo' }, hacpoMetrics, []);
    const estimate = (value: number) => ({ value, low: value - 0.04, high: value + 0.04, n: 500 });
    const rows = [{ agent: 'small', split: 'in-distribution', before: estimate(0.3), after: estimate(0.42) }];
    const change = { mean: 0.12, low: 0.08, high: 0.16, n: 500 };
    await writeFile(
      join(demo, 'demo.json'),
      JSON.stringify({ pair: 'size', rows: rows.map((r) => ({ ...r, change })) }),
    );
    const page = await buildReport([demo]);
    const result = page.slice(page.indexOf('<h2>Result</h2>'), page.indexOf('<h2>Runs</h2>'));
    assert.match(
      result,
      /<td>small<\/td><td>in-distribution<\/td><td>500<\/td><td>30\.0% \[26\.0, 34\.0\]<\/td><td>42\.0% \[38\.0, 46\.0\]<\/td><td>\+12\.0 \[\+8\.0, \+16\.0\]<\/td>/,
    );
  });

  test('a group report draws each method as its mean over runs, one row per method and agent', async () => {
    const seed2 = await writeRun(
      'grpo-seed2',
      {},
      grpoMetrics.map((r) => ({ ...r, reward_mean: r.reward_mean + 0.1 })),
      [],
    );
    const mean = meanRun('easy · grpo', await loadRuns([runA, seed2]));
    assert.equal(mean.metrics.find((r) => r.step === 2)!['reward_mean'], 0.2 + 0.05 * 2 + 0.05);
    const page = await buildGroupReport([
      { label: 'easy · grpo', dirs: [runA, seed2] },
      { label: 'easy · hacpo', dirs: [runB] },
    ]);
    const legend = [...page.matchAll(/<g class="legend-item">.*?<text[^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
    for (const name of ['easy · grpo', 'easy · hacpo · qwen-a', 'easy · hacpo · llama-b'])
      assert.ok(legend.includes(name), `"${name}" missing from the legends`);
    assert.match(page, /<td>2 runs: grpo-run, grpo-seed2<\/td>/);
  });

  test('self-contained: nothing loaded from elsewhere', () => {
    assert.ok(!/\s(src|href)=/.test(html));
    assert.ok(!/url\(/.test(html));
  });
});

describe('report inputs', () => {
  test('a folder without metrics.jsonl is named', async () => {
    const empty = join(root, 'empty-run');
    await mkdir(empty);
    await assert.rejects(runReport({ runs: [runA, empty], output: join(root, 'x.html') }), (e: Error) => {
      assert.match(e.message, /empty-run has no metrics\.jsonl/);
      return true;
    });
  });

  test('a bad line is reported as file:line', async () => {
    const bad = join(root, 'bad-run');
    await mkdir(bad);
    await writeFile(join(bad, 'metrics.jsonl'), '{"step":0,"loss":1}\n{"step":1,"loss":0.9}\n{"step":2,"loss":\n');
    await assert.rejects(runReport({ runs: [bad], output: join(root, 'x.html') }), /bad-run\/metrics\.jsonl:3: /);
    await writeFile(join(bad, 'metrics.jsonl'), '{"loss":1}\n');
    await assert.rejects(runReport({ runs: [bad], output: join(root, 'x.html') }), /metrics\.jsonl:1: .*step/);
  });

  test('gaps where a series skips its cadence, and long series thinned to the pixel columns', () => {
    const pts = (steps: number[]): [number, number][] => steps.map((x) => [x, x]);
    assert.deepEqual(breakAtMissing(pts([0, 4, 8, 12])), pts([0, 4, 8, 12]), 'every 4th step: one line');
    assert.deepEqual(breakAtMissing(pts([0, 1, 2, 4, 5])), [...pts([0, 1, 2]), [3, null], ...pts([4, 5])]);
    const long = Array.from({ length: 20_000 }, (_, i): [number, number] => [i, Math.sin(i / 50)]);
    const svg = renderLinePlot({
      title: 't',
      xLabel: 'step',
      yLabel: '',
      lines: [{ points: long, colour: '#000', dash: '' }],
      legend: [],
    });
    const d = /<path class="series" d="([^"]*)"/.exec(svg)![1]!;
    const n = d.split('L').length;
    assert.ok(n < 2_000, `${n} path points for a 368 px wide plot`);
  });

  test('labels, ticks', () => {
    assert.deepEqual(uniqueLabels(['/a/x/run', '/b/y/run', '/c/z']), ['x/run', 'y/run', 'z']);
    assert.deepEqual(valueAxis(0.03, 0.97).ticks, [0, 0.2, 0.4, 0.6, 0.8, 1]);
    assert.deepEqual(valueAxis(3, 3).ticks.length > 1, true, 'a flat series still gets an axis');
    assert.equal(formatTick(1.0004, 0.0002), '1.0004');
    assert.equal(formatTick(1.5e-4, 5e-5), '1.5e-4');
  });
});

/** RGBA pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's screenshots are). */
function decodePng(png: Buffer): { width: number; height: number; rgba: Uint8Array } {
  assert.ok(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'PNG signature');
  let width = 0;
  let height = 0;
  let channels = 0;
  const idat: Buffer[] = [];
  for (let off = 8; off < png.length;) {
    const len = png.readUInt32BE(off);
    const type = png.toString('latin1', off + 4, off + 8);
    const data = png.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      assert.equal(data[8], 8, 'bit depth 8');
      assert.equal(data[12], 0, 'not interlaced');
      channels = { 2: 3, 6: 4 }[data[9]!] ?? 0;
      assert.ok(channels > 0, `colour type ${data[9]} is not RGB or RGBA`);
    } else if (type === 'IDAT') idat.push(data);
    off += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const out = new Uint8Array(width * height * 4);
  const prev = new Uint8Array(stride);
  const cur = new Uint8Array(stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? cur[i - channels]! : 0;
      const b = prev[i]!;
      const c = i >= channels ? prev[i - channels]! : 0;
      const p = a + b - c;
      const pa = Math.abs(p - a);
      const pb = Math.abs(p - b);
      const pc = Math.abs(p - c);
      const pred = [0, a, b, (a + b) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? b : c][filter];
      assert.ok(pred !== undefined, `bad filter ${filter}`);
      cur[i] = (line[i]! + pred) & 0xff;
    }
    for (let x = 0; x < width; x++)
      for (let ch = 0; ch < 4; ch++) out[(y * width + x) * 4 + ch] = ch < channels ? cur[x * channels + ch]! : 255;
    prev.set(cur);
  }
  return { width, height, rgba: out };
}

describe('report in headless Chromium', async () => {
  const htmlPath = join(root, 'report.html');
  const pngPath = join(root, 'report.png');

  test('the plots are drawn: every SVG has series paths with non-empty d', async () => {
    chromiumPath(); // fails with "install chromium (apt-get install chromium)" where it is missing
    await runReport({ runs: [runA, runB], output: htmlPath });
    const dom = await runChromium(['--window-size=1400,900', '--dump-dom', pathToFileURL(htmlPath).href]);
    const svgs = dom.split('<svg ').slice(1);
    assert.ok(svgs.length >= 10, `${svgs.length} SVGs in the rendered DOM`);
    for (const svg of svgs) {
      const ds = [...svg.matchAll(/<path class="series" d="([^"]*)"/g)].map((m) => m[1]!);
      assert.ok(ds.length > 0 && ds.every((d) => /^M[\d.]+ [\d.]+ L/.test(d)), `no drawn line in ${svg.slice(0, 200)}`);
    }
  });

  test('the PNG export is a full-page image with the runs’ colours in it', async () => {
    chromiumPath();
    await runReport({ runs: [runA, runB], output: htmlPath, png: pngPath });
    const file = await readFile(pngPath);
    assert.ok(file.length > 50_000, `PNG is only ${file.length} bytes`);
    const { width, height, rgba } = decodePng(file);
    assert.equal(width, 1400);
    assert.ok(height > 1500, `height ${height}: the whole page, not one window`);
    let nonWhite = 0;
    const near = (hex: string): number => {
      const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
      let n = 0;
      for (let i = 0; i < rgba.length; i += 4)
        if (Math.abs(rgba[i]! - r!) + Math.abs(rgba[i + 1]! - g!) + Math.abs(rgba[i + 2]! - b!) < 40) n++;
      return n;
    };
    for (let i = 0; i < rgba.length; i += 4) if (rgba[i]! + rgba[i + 1]! + rgba[i + 2]! < 600) nonWhite++;
    assert.ok(nonWhite / (width * height) > 0.01, `only ${nonWhite} non-white pixels`);
    // Source colours: grpo-run, hacpo-run · qwen-a, hacpo-run · llama-b.
    for (const colour of ['#0072B2', '#D55E00', '#009E73'])
      assert.ok(near(colour) > 200, `hardly any ${colour} pixels: a run's lines are not drawn`);
  });
});
