/** A learning-rate schedule: linear warm-up, then constant, linear or cosine decay to minRatio·peak. */
export interface ScheduleOptions {
  /** Peak learning rate. */
  peak: number;
  /** Steps of linear warm-up from 0 to the peak; default 0. */
  warmupSteps?: number;
  /** Total optimizer steps (where linear/cosine decay ends); required for decays. */
  totalSteps?: number;
  /** Shape after warm-up; default 'constant'. */
  kind?: 'constant' | 'linear' | 'cosine';
  /** Final learning rate as a fraction of the peak; default 0. */
  minRatio?: number;
}

/** Learning rate at optimizer step `step` (0-based: the rate used by the step-th update). */
export function learningRate(step: number, o: ScheduleOptions): number {
  const warm = o.warmupSteps ?? 0;
  if (step < warm) return (o.peak * (step + 1)) / (warm + 1);
  const kind = o.kind ?? 'constant';
  if (kind === 'constant') return o.peak;
  if (o.totalSteps === undefined || o.totalSteps <= warm)
    throw new Error(`a ${kind} schedule needs totalSteps greater than warmupSteps (${warm})`);
  const minLr = o.peak * (o.minRatio ?? 0);
  const progress = Math.min(1, (step - warm) / Math.max(1, o.totalSteps - warm));
  const factor = kind === 'linear' ? 1 - progress : 0.5 * (1 + Math.cos(Math.PI * progress));
  return minLr + (o.peak - minLr) * factor;
}
