/* The fused kernels of the native backend: plain C over float arrays, parallelised with OpenMP. The semantics of each
 * kernel are those of the matching method of the Kernels interface in src/backend/kernels.ts; callers (the N-API glue)
 * have already checked every length and index, so these functions trust their arguments.
 *
 * Functions returning int return 0, or -1 when they could not allocate their scratch memory (nothing is written
 * then). */
#ifndef HACRL_KERNELS_H
#define HACRL_KERNELS_H
#include <stdint.h>

void hx_rms_norm(const float *x, const float *weight, float *out, float *inv_rms, int64_t rows, int64_t dim,
                 double eps);
int hx_rms_norm_backward(const float *dy, const float *x, const float *weight, const float *inv_rms, float *dx,
                         float *dweight, int64_t rows, int64_t dim);
void hx_layer_norm(const float *x, const float *weight, const float *bias, float *out, float *mean, float *rstd,
                   int64_t rows, int64_t dim, double eps);
int hx_layer_norm_backward(const float *dy, const float *x, const float *weight, const float *mean, const float *rstd,
                           float *dx, float *dweight, float *dbias, int64_t rows, int64_t dim);

/* out may be x. */
void hx_softmax(const float *x, float *out, int64_t rows, int64_t dim);
void hx_log_softmax(const float *x, float *out, int64_t rows, int64_t dim);
/* out[r] = the first index of row r's largest value (NaN never counts as larger; a row starting with NaN gives 0). */
void hx_argmax_rows(const float *x, int32_t *out, int64_t rows, int64_t dim);
/* entropy may be NULL. Targets must be < vocab; negative targets mark ignored rows. */
void hx_gather_log_probs(const float *logits, const int32_t *targets, float *log_prob, float *lse, float *entropy,
                         int64_t rows, int64_t vocab);
/* dlogits may be logits. */
void hx_gather_log_probs_backward(const float *logits, const int32_t *targets, const float *lse,
                                  const float *dlog_prob, float *dlogits, int64_t rows, int64_t vocab);

/* cos and sin are [maxPos, headDim/2]; every position must be below maxPos. */
void hx_rope(float *x, const int32_t *positions, const float *cos, const float *sin, int64_t rows, int64_t heads,
             int64_t head_dim, int inverse);

void hx_swiglu(const float *gate, const float *up, float *out, int64_t n);
void hx_swiglu_backward(const float *dy, const float *gate, const float *up, float *dgate, float *dup, int64_t n);
void hx_gelu(const float *x, float *out, int64_t n);
void hx_gelu_backward(const float *dy, const float *x, float *dx, int64_t n);

/* Geometry of training attention: q, out [batch, seq, q_heads, head_dim]; k, v [batch, seq, kv_heads, head_dim];
 * lse [batch, q_heads, seq]. key_start (NULL or [batch], values in [0, seq]) masks keys before it. The products run
 * through hx_sgemm, so a BLAS must have been selected. */
typedef struct {
  int batch, seq, q_heads, kv_heads, head_dim;
  float scale;
  const int32_t *key_start;
} hx_attn_shape;

int hx_attention(const float *q, const float *k, const float *v, float *out, float *lse, const hx_attn_shape *s);
int hx_attention_backward(const float *dout, const float *q, const float *k, const float *v, const float *out,
                          const float *lse, float *dq, float *dk, float *dv, const hx_attn_shape *s);
/* q, out [batch, q_heads, head_dim]; caches [batch, kv_heads, capacity, head_dim] filled for positions < length;
 * key_start NULL or [batch] with values in [0, length]. */
int hx_attention_decode(const float *q, const float *k_cache, const float *v_cache, float *out, int64_t batch,
                        int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t capacity, int64_t length,
                        float scale, const int32_t *key_start);

void hx_adamw(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1, double beta2,
              double eps, double weight_decay, int64_t step);

/* out may be x. */
void hx_add_bias(const float *x, const float *bias, float *out, int64_t rows, int64_t dim);
int hx_sum_rows(const float *dy, float *dbias, int64_t rows, int64_t dim);
void hx_axpy(float alpha, const float *x, float *y, int64_t n);
/* out may be a or b. */
void hx_mul(const float *a, const float *b, float *out, int64_t n);
void hx_scale(float *x, float alpha, int64_t n);
/* out[i] = x[i] rounded to bfloat16 bits, to nearest even (subnormals kept, NaN quiet): TypeScript's f32ToBf16. */
void hx_round_bf16(const float *x, uint16_t *out, int64_t n);
double hx_sum_squares(const float *x, int64_t n);
int hx_all_finite(const float *x, int64_t n);
/* dst[r·dst_ld + c] = src[r·src_ld + c] for r < rows, c < cols; the two must not overlap. */
void hx_copy_rows(const float *src, int64_t src_ld, float *dst, int64_t dst_ld, int64_t rows, int64_t cols);
/* ids must lie in [0, rows of the table). */
void hx_embedding(const float *table, const int32_t *ids, float *out, int64_t rows, int64_t dim);
void hx_embedding_backward(const float *dout, const int32_t *ids, float *dtable, int64_t rows, int64_t dim);
#endif
