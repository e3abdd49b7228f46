/**
 * Checkpoint folders committed as a whole: a checkpoint is written into a temporary sibling folder, every file and
 * folder in it is fsynced, and one rename publishes it as `step-000123`. A crash therefore leaves either no folder of
 * that name or a complete one; temporary folders (names starting with ".") are never taken for checkpoints.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/atomic-write.js';
import { fsyncPath, fsyncTree } from '../util/fsync.js';

/** The pointer file in the checkpoints folder naming the newest checkpoint (for people and other tools). */
export const LATEST_FILE = 'latest';

const COMPLETE = /^step-(\d+)$/;

/** A complete checkpoint: its step and folder. */
export interface CheckpointRef {
  step: number;
  dir: string;
}

/** The folder name of step `step`: `step-000123` (six digits at least, so names sort by step). */
export function checkpointName(step: number): string {
  if (!Number.isInteger(step) || step < 0) throw new Error(`checkpoint step must be a whole number ≥ 0, got ${step}`);
  return `step-${String(step).padStart(6, '0')}`;
}

/** The complete checkpoints in `root` (the checkpoints folder), oldest first; none when it does not exist. */
export async function listCheckpoints(root: string): Promise<CheckpointRef[]> {
  let names: string[];
  try {
    names = await readdir(root);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const refs: CheckpointRef[] = [];
  for (const name of names) {
    const m = COMPLETE.exec(name);
    if (m && (await stat(join(root, name))).isDirectory()) refs.push({ step: Number(m[1]), dir: join(root, name) });
  }
  return refs.sort((a, b) => a.step - b.step);
}

/** The newest complete checkpoint in `root`, or null. */
export async function latestCheckpoint(root: string): Promise<CheckpointRef | null> {
  return (await listCheckpoints(root)).at(-1) ?? null;
}

/** The folder name the `latest` pointer holds, or null when there is none. */
export async function readLatestPointer(root: string): Promise<string | null> {
  try {
    return (await readFile(join(root, LATEST_FILE), 'utf8')).trim();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

/**
 * Writes the checkpoint of `step` into `root`: `fill` writes the files into an empty temporary folder, which is
 * fsynced and renamed into place (replacing an earlier checkpoint of the same step); then the `latest` pointer is
 * updated, and older checkpoints beyond the newest `keepLast`, later ones (an abandoned continuation) and temporary
 * folders left by crashes are removed.
 */
export async function commitCheckpoint(
  root: string,
  step: number,
  fill: (dir: string) => Promise<void>,
  keepLast: number,
): Promise<CheckpointRef> {
  if (!Number.isInteger(keepLast) || keepLast < 1) throw new Error(`keepLast must be at least 1, got ${keepLast}`);
  const name = checkpointName(step);
  const dir = join(root, name);
  await mkdir(root, { recursive: true });
  const tmp = tempSibling(root, name, 'tmp');
  await mkdir(tmp);
  try {
    await fill(tmp);
    await fsyncTree(tmp);
    await publish(tmp, dir, tempSibling(root, name, 'old'));
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e;
  }
  await fsyncPath(root, true);
  await writeFileAtomic(join(root, LATEST_FILE), `${name}\n`);
  await prune(root, step, keepLast);
  return { step, dir };
}

function tempSibling(root: string, name: string, kind: 'tmp' | 'old' | 'trash'): string {
  return join(root, `.${name}.${kind}-${process.pid}-${randomBytes(4).toString('hex')}`);
}

// rename() cannot replace a non-empty folder, so an existing one is moved aside first and deleted after.
async function publish(tmp: string, dir: string, aside: string): Promise<void> {
  let moved = false;
  try {
    await rename(dir, aside);
    moved = true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  await rename(tmp, dir);
  if (moved) await rm(aside, { recursive: true, force: true });
}

// Folders are renamed out of the complete-name pattern before deletion, so a crash half-way through a recursive
// delete never leaves a damaged folder that looks like a checkpoint.
async function prune(root: string, step: number, keepLast: number): Promise<void> {
  const all = await listCheckpoints(root);
  const older = all.filter((c) => c.step < step);
  const doomed = [...older.slice(0, Math.max(0, older.length - (keepLast - 1))), ...all.filter((c) => c.step > step)];
  for (const c of doomed) {
    const trash = tempSibling(root, checkpointName(c.step), 'trash');
    await rename(c.dir, trash);
    await rm(trash, { recursive: true, force: true });
  }
  const stale = (await readdir(root)).filter((n) => n.startsWith('.step-'));
  for (const n of stale) await rm(join(root, n), { recursive: true, force: true });
}
