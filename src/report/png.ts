/** PNG export of a report page (for papers and slides) through headless Chromium. */
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { runChromium } from './chromium.js';

/** Options of the PNG export. */
export interface PngOptions {
  /** Window width in CSS px; default 1400 (three plot panels a row). */
  width?: number;
  /** Device pixels per CSS px, e.g. 2 for print; default 1. */
  scale?: number;
  /** Limit for each Chromium run in ms; default 60000. */
  timeoutMs?: number;
}

// Chromium cannot paint a bitmap taller than its largest texture; longer pages are cut at the bottom.
const MAX_PIXELS = 16_384;
const HEIGHT_ATTR = 'data-hacrl-height';

/**
 * The page's full height at `width`: Chromium's --screenshot captures only the window, so a throw-away copy with a
 * one-line measuring script is loaded first and its dumped DOM carries the height (the report itself stays free of
 * scripts).
 */
async function pageHeight(html: string, width: number, timeoutMs: number): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'hacrl-measure-'));
  try {
    const probe = join(dir, 'measure.html');
    const script =
      `<script>document.body.setAttribute('${HEIGHT_ATTR}', ` +
      `String(Math.ceil(document.documentElement.scrollHeight)))</script>`;
    const at = html.lastIndexOf('</body>');
    await writeFile(probe, at < 0 ? html + script : html.slice(0, at) + script + html.slice(at));
    const dom = await runChromium([`--window-size=${width},800`, '--dump-dom', pathToFileURL(probe).href], timeoutMs);
    const m = new RegExp(`${HEIGHT_ATTR}="(\\d+)"`).exec(dom);
    if (!m) throw new Error('could not measure the page height in headless Chromium');
    return Number(m[1]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Width and height of a PNG file from its IHDR chunk; throws when the file is not a PNG. */
export async function pngSize(path: string): Promise<{ width: number; height: number }> {
  const b = await readFile(path);
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  if (b.length < 24 || !b.subarray(0, 8).equals(signature) || b.toString('latin1', 12, 16) !== 'IHDR')
    throw new Error(`${path} is not a PNG file`);
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

/** Renders an HTML report to a PNG of the whole page with headless Chromium; resolves to the image's size. */
export async function renderPng(
  htmlPath: string,
  pngPath: string,
  options: PngOptions = {},
): Promise<{ width: number; height: number }> {
  const width = options.width ?? 1400;
  const scale = options.scale ?? 1;
  const timeoutMs = options.timeoutMs ?? 60_000;
  const html = await readFile(htmlPath, 'utf8');
  const height = Math.min(await pageHeight(html, width, timeoutMs), Math.floor(MAX_PIXELS / scale));
  const out = resolve(pngPath);
  await rm(out, { force: true }); // so a stale image cannot pass for a new one if Chromium writes nothing
  await runChromium(
    [
      `--window-size=${width},${height}`,
      `--force-device-scale-factor=${scale}`,
      `--screenshot=${out}`,
      pathToFileURL(resolve(htmlPath)).href,
    ],
    timeoutMs,
  );
  if (!(await stat(out).catch(() => null))) throw new Error(`chromium wrote no screenshot to ${out}`);
  return pngSize(out);
}
