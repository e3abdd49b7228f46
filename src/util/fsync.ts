/** Making files and folders durable: the fsync helpers every atomic write and checkpoint commit uses. */
import { open, readdir, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

/** fsyncs one file or folder. Folders that the platform cannot open or sync (Windows, some network file systems) are
 * skipped: the data is still written there, only its survival of a power cut is weaker. */
export async function fsyncPath(path: string, isDir: boolean): Promise<void> {
  let fh: FileHandle | undefined;
  try {
    fh = await open(path, 'r');
    await fh.sync();
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (!isDir || !['EISDIR', 'EPERM', 'EINVAL', 'EACCES'].includes(code ?? '')) throw e;
  } finally {
    await fh?.close();
  }
}

/** fsyncs every file and folder below `dir`, children before parents, then `dir` itself (before a publishing rename). */
export async function fsyncTree(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) await fsyncTree(path);
    else if (entry.isFile()) await fsyncPath(path, false);
  }
  await fsyncPath(dir, true);
}
