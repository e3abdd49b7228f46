/* Thread-count policy shared by every native kernel. Kernels parallelise with OpenMP (the same runtime oneDNN uses),
 * and pick the team size from the amount of work so small, decode-sized calls stay on one thread. */
#ifndef HACRL_THREADS_H
#define HACRL_THREADS_H
#include <stdint.h>

/* Upper bound on threads: HACRL_THREADS if set, else the number of processors. */
int hx_max_threads(void);
/* Threads for a call doing about `work` scalar operations: 1 below `per_thread` operations per thread, never more than
 * hx_max_threads(). `requested` > 0 overrides the choice (clamped to the maximum). */
int hx_threads_for(double work, double per_thread, int requested);
#endif
