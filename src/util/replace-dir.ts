/** Writing a whole folder so that readers see the old folder or the complete new one, never a mix of both. */
import { randomBytes } from 'node:crypto';
import { copyFile, cp, link, lstat, mkdir, readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fsyncPath, fsyncTree } from './fsync.js';

/**
 * Fills a fresh hidden sibling of `dir` with `write`, then puts it in `dir`'s place. Entries of an existing `dir` that
 * the new save did not write and `carry(name)` accepts (default: all) are carried over first (files hard-linked, or
 * copied where links fail; folders copied), so a save never deletes what it did not write. When `write` fails (a full disk, a file size limit),
 * `dir` is left as it was and the error names `dir`. The swap is two renames: a crash between them leaves the old
 * folder next to the missing one, as `.NAME.old-…`.
 */
export async function replaceDir(
  dir: string,
  write: (tmp: string) => Promise<void>,
  carry: (name: string) => boolean = () => true,
): Promise<void> {
  const parent = dirname(dir);
  const tag = `${process.pid}-${randomBytes(4).toString('hex')}`;
  const tmp = join(parent, `.${basename(dir)}.saving-${tag}`);
  const aside = join(parent, `.${basename(dir)}.old-${tag}`);
  await mkdir(parent, { recursive: true });
  try {
    await mkdir(tmp);
    await write(tmp);
    const old = await readdir(dir).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return null;
      throw e;
    });
    if (old !== null) {
      const written = new Set(await readdir(tmp));
      for (const name of old.filter((n) => !written.has(n) && carry(n))) {
        const from = join(dir, name);
        if ((await lstat(from)).isDirectory()) await cp(from, join(tmp, name), { recursive: true });
        // A file system without hard links gets a copy.
        else await link(from, join(tmp, name)).catch(() => copyFile(from, join(tmp, name)));
      }
    }
    await fsyncTree(tmp);
    if (old !== null) await rename(dir, aside);
    try {
      await rename(tmp, dir);
    } catch (e) {
      if (old !== null) await rename(aside, dir);
      throw e;
    }
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    const err = e as NodeJS.ErrnoException;
    throw Object.assign(new Error(`saving ${dir}: ${err.message} (the folder is unchanged)`, { cause: e }), {
      code: err.code,
    });
  }
  await fsyncPath(parent, true);
  await rm(aside, { recursive: true, force: true });
}
