/* The reproducible kernels (HACRL_REPRODUCIBLE=1, docs/reproducible.md): every sum in one fixed order, in double, so
 * the bits depend neither on the vector width, the thread count nor the BLAS library. src/backend/reproducible.ts is
 * the same arithmetic in TypeScript, operation for operation; a change here must be made there too.
 *
 * Each entry has the signature of the fast kernel it replaces (kernels.h; gemm that of hx_sgemm without threads, and
 * returning -1 when its packed operands cannot be allocated). */
#ifndef HACRL_REPRO_H
#define HACRL_REPRO_H
#include "kernels.h"
#include <stdint.h>

typedef struct {
  /* Names the build: the vector instructions the compiler was allowed. */
  const char *isa;
  int (*gemm)(int transA, int transB, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
               int ldb, float beta, float *c, int ldc);
  void (*rms_norm)(const float *x, const float *weight, float *out, float *inv_rms, int64_t rows, int64_t dim,
                   double eps);
  int (*rms_norm_backward)(const float *dy, const float *x, const float *weight, const float *inv_rms, float *dx,
                           float *dweight, int64_t rows, int64_t dim);
  void (*layer_norm)(const float *x, const float *weight, const float *bias, float *out, float *mean, float *rstd,
                     int64_t rows, int64_t dim, double eps);
  int (*layer_norm_backward)(const float *dy, const float *x, const float *weight, const float *mean,
                             const float *rstd, float *dx, float *dweight, float *dbias, int64_t rows, int64_t dim);
  void (*softmax)(const float *x, float *out, int64_t rows, int64_t dim);
  void (*log_softmax)(const float *x, float *out, int64_t rows, int64_t dim);
  void (*gather_log_probs)(const float *logits, const int32_t *targets, float *log_prob, float *lse, float *entropy,
                           int64_t rows, int64_t vocab);
  void (*gather_log_probs_backward)(const float *logits, const int32_t *targets, const float *lse,
                                    const float *dlog_prob, float *dlogits, int64_t rows, int64_t vocab);
  void (*entropy_backward)(const float *logits, const float *lse, const float *entropy, const float *dentropy,
                           float *dlogits, int64_t rows, int64_t vocab);
  void (*rope)(float *x, const int32_t *positions, const float *cos, const float *sin, int64_t rows, int64_t heads,
               int64_t head_dim, int inverse);
  void (*swiglu)(const float *gate, const float *up, float *out, int64_t n);
  void (*swiglu_backward)(const float *dy, const float *gate, const float *up, float *dgate, float *dup, int64_t n);
  void (*gelu)(const float *x, float *out, int64_t n);
  void (*gelu_backward)(const float *dy, const float *x, float *dx, int64_t n);
  int (*attention)(const float *q, const float *k, const float *v, float *out, float *lse, const hx_attn_shape *s);
  int (*attention_backward)(const float *dout, const float *q, const float *k, const float *v, const float *out,
                            const float *lse, float *dq, float *dk, float *dv, const hx_attn_shape *s);
  int (*attention_decode)(const float *q, const float *k_cache, const float *v_cache, float *out, int64_t batch,
                          int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t capacity, int64_t length,
                          float scale, const int32_t *key_start);
  void (*adamw)(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1, double beta2,
                double eps, double weight_decay, int64_t step);
  int (*sum_rows)(const float *dy, float *dbias, int64_t rows, int64_t dim);
  void (*axpy)(float alpha, const float *x, float *y, int64_t n);
  double (*sum_squares)(const float *x, int64_t n);
} hx_repro_kernels;

/* The same kernels compiled for this machine's widest vectors, and for AVX2 at most (HACRL_FORCE_AVX2). */
extern const hx_repro_kernels hx_repro_wide, hx_repro_avx2;
/* The table in use; NULL while the mode is off (the fast kernels run). */
extern const hx_repro_kernels *hx_repro;
#endif
