/** Making files and folders durable: the fsync helpers every atomic write uses. */
import { open, type FileHandle } from 'node:fs/promises';

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
