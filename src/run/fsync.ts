/** Making a folder's contents durable before it is published by a rename. */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncPath } from '../util/fsync.js';

/** fsyncs every file and folder below `dir`, children before parents, then `dir` itself. */
export async function fsyncTree(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await fsyncTree(path);
    else if (entry.isFile()) await fsyncPath(path, false);
  }
  await fsyncPath(dir, true);
}
