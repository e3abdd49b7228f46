/**
 * Refusing, before any work, an output that would overwrite or delete what a command reads (`export gguf --out
 * DIR/model.safetensors`, `lora merge --out BASE`), and an existing output without --force.
 */
import { readdir, realpath, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve, sep } from 'node:path';

/** A path a command reads or writes, with the flag that named it (for the messages). */
export interface NamedPath {
  flag: string;
  path: string;
}

/**
 * The real path of `path`: symlinks, `..` and trailing slashes resolved. A path that does not exist yet resolves
 * through its nearest existing folder, so a new output under a symlinked folder still compares as the real place.
 */
async function realPath(path: string): Promise<string> {
  const abs = resolve(path);
  try {
    return await realpath(abs);
  } catch (e) {
    // ENOTDIR: part of the path is a file; the writer says so, naming its flag.
    const code = (e as NodeJS.ErrnoException).code;
    if ((code !== 'ENOENT' && code !== 'ENOTDIR') || dirname(abs) === abs) throw e;
    return join(await realPath(dirname(abs)), basename(abs));
  }
}

const within = (inner: string, outer: string): boolean => inner.startsWith(outer.endsWith(sep) ? outer : outer + sep);

/**
 * Throws, naming both paths and what to change, when `out` is one of `inputs` or lies inside one (the write would
 * replace what is read), or an input lies inside `out` (a folder the command replaces or deletes).
 */
export async function refuseOverlap(out: NamedPath, inputs: readonly NamedPath[]): Promise<void> {
  const o = await realPath(out.path);
  for (const input of inputs) {
    const i = await realPath(input.path);
    const both = `${out.flag} ${out.path} and ${input.flag} ${input.path}`;
    if (o === i)
      throw new Error(
        `${both} are the same path (${o}): the output would replace the input; choose another ${out.flag}`,
      );
    if (within(o, i))
      throw new Error(
        `${out.flag} ${out.path} lies inside ${input.flag} ${input.path}, which this command reads: choose an ` +
          `${out.flag} outside ${input.path}`,
      );
    if (within(i, o))
      throw new Error(
        `${input.flag} ${input.path} lies inside ${out.flag} ${out.path}, which this command replaces: choose an ` +
          `${out.flag} that does not contain ${input.path}`,
      );
  }
}

/**
 * refuseOverlap, then refuses an `out` that already holds an output (a file, or a `folder` that is not empty) unless
 * `force`: replacing a finished model must be asked for. Anything else in the way (a file where a folder goes) is
 * left to the writer's own checks, whose messages say what is wrong.
 */
export async function checkOutput(
  out: NamedPath,
  inputs: readonly NamedPath[],
  o: { force: boolean; folder: boolean },
): Promise<void> {
  await refuseOverlap(out, inputs);
  if (o.force) return;
  const s = await stat(out.path).catch(() => null);
  if (s !== null && (o.folder ? s.isDirectory() && (await readdir(out.path)).length > 0 : !s.isDirectory()))
    throw new Error(`${out.flag} ${out.path} already exists: pass --force to replace it, or choose another path`);
}
