/* The entropy bonus's backward (Kernels.entropyBackward in src/backend/kernels.ts). */
#ifndef HACRL_ENTROPY_H
#define HACRL_ENTROPY_H
#include <stdint.h>

/* dlogits[r,:] += dentropy[r]·∂H_r/∂x[r,:] = −dentropy[r]·p·(log p + H_r), p = exp(x − lse[r]). dlogits must not be
 * logits. */
void hx_entropy_backward(const float *logits, const float *lse, const float *entropy, const float *dentropy,
                         float *dlogits, int64_t rows, int64_t vocab);
#endif
