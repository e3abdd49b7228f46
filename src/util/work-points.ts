/**
 * The safe points of long synchronous computations: `generate` reports every decode step and every finished call,
 * the update loop every mini-batch, scoring every forward pass. A training run installs a watcher while it runs (its
 * live progress lines, and its stop request, which throws from a safe point to abandon the step); with none
 * installed a report costs one comparison. The watcher is process-wide: computing is synchronous, so only one piece
 * of work reports at a time.
 */

/** What a run does at the safe points; any method may throw to abandon the work in progress. */
export interface WorkWatcher {
  /** A decode step generated `tokens` tokens (one per running sequence). */
  generated(tokens: number): void;
  /** A generate call finished its `sequences` sequences. */
  finished(sequences: number): void;
  /** Mini-batch update `done` of `total` finished, having trained on `tokens` tokens (prompts and responses). */
  updated(done: number, total: number, tokens: number): void;
  /** A safe point with nothing to count (between the forward passes of scoring). */
  passed(): void;
}

let watcher: WorkWatcher | null = null;

/**
 * Installs `w` and returns the function that puts back the watcher it replaced (only while `w` is still the one
 * installed: two runs in one process may end in either order).
 */
export function watchWork(w: WorkWatcher): () => void {
  const before = watcher;
  watcher = w;
  return () => {
    if (watcher === w) watcher = before;
  };
}

/** The reports of the safe points, forwarded to the installed watcher. */
export const workPoint = {
  generated: (tokens: number): void => watcher?.generated(tokens),
  finished: (sequences: number): void => watcher?.finished(sequences),
  updated: (done: number, total: number, tokens: number): void => watcher?.updated(done, total, tokens),
  passed: (): void => watcher?.passed(),
};
