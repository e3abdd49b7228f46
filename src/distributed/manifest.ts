/**
 * What each step of an asynchronous agent consumed (exchange.mode async): one JSON line per step in the agent's run
 * folder (`manifest.jsonl`), written and flushed before the step trains, and the same bytes on the broker. Wall-clock
 * timing decides what a step takes; once written, the manifest decides it — a restarted agent (`--resume`, or a fresh
 * start after a crash before its first checkpoint) and `hacrl train --replay` take exactly what it lists, checked by
 * hash, so they end byte-equal to the run that wrote it.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { appendRows } from '../run/jsonl-log.js';
import { writeFileAtomic } from '../util/atomic-write.js';

/** The manifest's file name in an agent's run folder. */
export const MANIFEST_FILE = 'manifest.jsonl';

/** One partner step a step consumed. */
const ConsumedSchema = z.strictObject({
  agent: z.string(),
  step: z.number().int().min(1),
  /** Its position in the broker's order of stores (the stream sequence; -1 where the transport has none). */
  seq: z.number().int(),
  /** sha256 of its payload, hex. */
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});

/** One step's line. */
const EntrySchema = z.strictObject({
  step: z.number().int().min(1),
  /** Partner steps trained on, oldest first per partner, partners in config order. */
  consumed: z.array(ConsumedSchema),
  /** Per partner: the newest of its steps this step took or counted as expired (the next step starts after it). */
  upTo: z.record(z.string(), z.number().int().min(0)),
  /** Per partner: its steps counted as expired at this step (older than maxStaleness, never trained on). */
  expired: z.record(z.string(), z.number().int().min(0)),
  /** This agent's P_t history after this step (HACRL Eq. 9), oldest first: what its next step publishes from. */
  capability: z.array(z.number()),
});

/** The first line: the run's name on the broker, and the step the agent started after (0, or where it joined). */
const HeaderSchema = z.strictObject({ step: z.literal(0), run: z.string(), joinedAfter: z.number().int().min(0) });
/** A manifest's first line. */
export type ManifestHeader = z.output<typeof HeaderSchema>;

/** One partner step a step consumed. */
export type Consumed = z.output<typeof ConsumedSchema>;
/** One step's manifest line. */
export type ManifestEntry = z.output<typeof EntrySchema>;

/** An agent's manifest: the lines read at start, and the ones appended since. */
export class Manifest {
  private constructor(
    private readonly path: string,
    private readonly entries: Map<number, ManifestEntry>,
    /** Its first line; null until the agent first greets its partners. */
    public header: ManifestHeader | null,
  ) {}

  /** The manifest in run folder `dir` (empty when there is none); a last line cut short by a crash is ignored. */
  static async open(dir: string): Promise<Manifest> {
    const path = join(dir, MANIFEST_FILE);
    let text = '';
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    const lines = text.split('\n');
    // '' after the last newline, or a line a crash cut short: cut away, so the next line starts on its own.
    const torn = lines.pop()!;
    if (torn !== '') await writeFileAtomic(path, text.slice(0, text.length - torn.length));
    const entries = new Map<number, ManifestEntry>();
    let header: ManifestHeader | null = null;
    for (const [i, line] of lines.entries()) {
      const json = JSON.parse(line) as unknown;
      const first = HeaderSchema.safeParse(json);
      if (first.success) header = first.data;
      else {
        const parsed = EntrySchema.safeParse(json);
        if (!parsed.success) throw new Error(`${path} line ${i + 1} is not a manifest line: ${parsed.error.message}`);
        entries.set(parsed.data.step, parsed.data);
      }
    }
    return new Manifest(path, entries, header);
  }

  /** The line of step `step`, or undefined when it was not written. */
  get(step: number): ManifestEntry | undefined {
    return this.entries.get(step);
  }

  /** Writes the first line: the run's name and the step the agent starts after. */
  async start(header: ManifestHeader): Promise<void> {
    this.header = HeaderSchema.parse(header);
    await mkdir(dirname(this.path), { recursive: true });
    await appendRows(this.path, [this.header]);
  }

  /** The newest step it has a line of (0: none). */
  lastStep(): number {
    return Math.max(0, ...this.entries.keys());
  }

  /** Appends step `e.step`'s line and flushes it; the bytes it wrote. */
  async append(e: ManifestEntry): Promise<Uint8Array> {
    const entry = EntrySchema.parse(e);
    this.entries.set(entry.step, entry);
    await appendRows(this.path, [entry]);
    return new TextEncoder().encode(JSON.stringify(entry));
  }
}
