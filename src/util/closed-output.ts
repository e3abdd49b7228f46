/**
 * Standard output closed by its reader (`hacrl train … | head -1`): writes then fail with EPIPE, which by default
 * kills the process with a stack trace. Long runs keep everything in their run folder, so the output is dropped
 * instead and the work goes on.
 */

/** Makes a closed standard output (EPIPE) drop further output, with one note on standard error, instead of crashing. */
export function surviveClosedStdout(note: string): void {
  let told = false;
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code !== 'EPIPE') throw e;
    if (!told) process.stderr.write(`${note}\n`);
    told = true;
  });
}
