/* The entropy bonus's backward: kept apart from kernels.c so the bonus adds a kernel without touching the others. */
#include "entropy.h"
#include "threads.h"
#include <math.h>
#include <omp.h>

/* Rows are independent; a row whose seed is 0 (prompt rows, or no bonus) is skipped. */
void hx_entropy_backward(const float *logits, const float *lse, const float *entropy, const float *dentropy,
                         float *dlogits, int64_t rows, int64_t vocab) {
  int nt = hx_threads_for(24.0 * (double)rows * (double)vocab, 2.5e5, 0);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    float g = dentropy[r];
    if (g == 0.0f) continue;
    const float *x = logits + r * vocab;
    float *d = dlogits + r * vocab;
    float l = lse[r], h = entropy[r];
    for (int64_t j = 0; j < vocab; j++) {
      float log_p = x[j] - l;
      d[j] -= g * expf(log_p) * (log_p + h);
    }
  }
}
