/* Fused kernels (see kernels.h). Loops are written for gcc's auto-vectoriser: contiguous inner loops, restrict where
 * arrays cannot overlap, and `omp simd` reductions where the order of a sum may change (the build keeps ISO float
 * semantics: no -ffast-math, no contraction, so NaN and infinities propagate and fmaf is spelled out where wanted). */
#include "kernels.h"
#include "blas.h"
#include "threads.h"
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512F__)
#include <immintrin.h>
#endif


/* ---------------------------------------------------------------------------------------------------------------- */
/* Threads                                                                                                          */

/* Waking the OpenMP team costs a few microseconds, about what one core spends on this many simple operations. */
#define OPS_PER_THREAD 2.5e5
/* Rough operation counts per element, so exp-heavy kernels go parallel on smaller inputs than streaming ones. */
#define COST_STREAM 2.0
#define COST_EXP 24.0

static int team(double ops) { return hx_threads_for(ops, OPS_PER_THREAD, 0); }

/* The t-th of nt contiguous, nearly equal parts of [0, n). */
static void part_of(int64_t n, int t, int nt, int64_t *lo, int64_t *hi) {
  *lo = n * t / nt;
  *hi = n * (t + 1) / nt;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Vectorisable math                                                                                                */

static inline uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float float_of(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* exp(x) to about 1 ulp (measured ≤ 1.01 ulp over every 97th float), subnormal results included. glibc's expf is an
 * opaque call that gcc only replaces by libmvec's vector version under -ffast-math, which would also drop NaN/Inf
 * semantics we need; this branch-free Cephes-style version lets every loop that uses it vectorise. */
static inline float hx_expf(float x) {
  /* exp is 0 below -104 and +inf above 89 in float; clamping keeps 2^n representable below. NaN fails both
   * comparisons and flows through to the result. */
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  /* Adding 1.5·2^23 rounds x·log2(e) to the nearest integer n, readable from the low bits without a float→int
   * conversion (undefined for NaN). */
  const float shifter = 0x1.8p23f;
  float kf = fmaf(x, 0x1.715476p+0f, shifter);
  float n = kf - shifter;
  /* r = x − n·ln2 in two parts (Cody–Waite), |r| ≤ ln2/2, then e^r by Cephes' minimax polynomial. */
  float r = fmaf(n, -0.693359375f, x);
  r = fmaf(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  float er = fmaf(p, r * r, r) + 1.0f;
  /* n ∈ [-150, 128] does not fit one float exponent; two halves do, and the final product rounds subnormals and
   * overflows correctly. */
  int32_t ni = (int32_t)(bits_of(kf) - bits_of(shifter));
  int32_t n1 = ni >> 1, n2 = ni - n1;
  return er * float_of((uint32_t)(n1 + 127) << 23) * float_of((uint32_t)(n2 + 127) << 23);
}

/* 1/(1+e^−x): exact limits 0 and 1 at ∓inf. */
static inline float sigmoid(float x) { return 1.0f / (1.0f + hx_expf(-x)); }

/* ---------------------------------------------------------------------------------------------------------------- */
/* Row reductions. Float sums run in 16 lanes (blocked, so error grows with n/16); sums that feed a normalisation are
 * accumulated in double, which costs one conversion per element and keeps them exact to ~1e-15 relative. */

static float row_max(const float *x, int64_t n) {
  float m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
  return m;
}

static double row_sum(const float *x, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++) s += x[i];
  return s;
}

static double row_dot(const float *restrict a, const float *restrict b, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++) s += (double)a[i] * b[i];
  return s;
}

/* Short dot products (head dimensions) in float with fused multiply-adds. */
static float dot_f(const float *restrict a, const float *restrict b, int64_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++) s = fmaf(a[i], b[i], s);
  return s;
}

/* Σ exp(x − m). */
static double row_sum_exp(const float *x, int64_t n, float m) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++) s += hx_expf(x[i] - m);
  return s;
}

/* out = exp(x − m) (out may be x); returns Σ out. */
static double row_exp(const float *x, float *out, int64_t n, float m) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; i++) {
    float e = hx_expf(x[i] - m);
    out[i] = e;
    s += e;
  }
  return s;
}

/* memset for n floats; an empty array may be a NULL pointer, which memset must not be given even for 0 bytes. */
static void zero_floats(float *x, int64_t n) {
  if (n > 0) memset(x, 0, (size_t)n * sizeof *x);
}

static void row_scale(float *x, int64_t n, float a) {
  for (int64_t i = 0; i < n; i++) x[i] *= a;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Rows with accumulated column sums (the weight and bias gradients). Each thread takes a contiguous block of rows and
 * sums into its own float64 partials; the partials are then added in thread order, so there are no races and the
 * result does not depend on scheduling. */

typedef void (*row_fn)(const void *ctx, int64_t r, double *acc);

/* Calls fn(ctx, r, acc) for every row; acc is ndst·dim wide and its k-th dim-wide slice is added into dst[k]. */
static int rows_with_column_sums(int64_t rows, int64_t dim, double ops, row_fn fn, const void *ctx, float *const *dst,
                                 int ndst) {
  int nt = team(ops);
  int64_t width = dim * ndst;
  double *partial = calloc((size_t)(nt * width) + 1, sizeof *partial);
  if (!partial) return -1;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; t++) {
    int64_t lo, hi;
    part_of(rows, t, nt, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) fn(ctx, r, partial + t * width);
  }
  for (int k = 0; k < ndst; k++) {
    float *d = dst[k];
    for (int64_t j = 0; j < dim; j++) {
      double s = d[j];
      for (int t = 0; t < nt; t++) s += partial[t * width + k * dim + j];
      d[j] = (float)s;
    }
  }
  free(partial);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Normalisation                                                                                                    */

void hx_rms_norm(const float *x, const float *weight, float *out, float *inv_rms, int64_t rows, int64_t dim,
                 double eps) {
  int nt = team(4.0 * rows * dim);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * dim;
    float *o = out + r * dim;
    float inv = (float)(1.0 / sqrt(row_dot(xr, xr, dim) / (double)dim + eps));
    inv_rms[r] = inv;
    /* (x·inv)·w in this order, as Hugging Face's float32 RMSNorm rounds. */
    for (int64_t i = 0; i < dim; i++) o[i] = xr[i] * inv * weight[i];
  }
}

typedef struct {
  const float *dy, *x, *weight, *inv_rms;
  float *dx;
  int64_t dim;
} rms_back_ctx;

/* y = x·r·w with r = (mean(x²)+eps)^−½: dx = r·(g − x·r²·mean(g·x)) where g = dy·w; dW += dy·x·r. */
static void rms_back_row(const void *ctx, int64_t r, double *acc) {
  const rms_back_ctx *c = ctx;
  int64_t dim = c->dim;
  const float *restrict dy = c->dy + r * dim, *restrict x = c->x + r * dim, *restrict w = c->weight;
  float *restrict dx = c->dx + r * dim;
  double *restrict dW = acc;
  float inv = c->inv_rms[r];
  double gx = 0;
#pragma omp simd reduction(+ : gx)
  for (int64_t i = 0; i < dim; i++) gx += (double)(dy[i] * w[i]) * x[i];
  float coef = (float)((double)inv * inv * gx / (double)dim);
  for (int64_t i = 0; i < dim; i++) {
    dx[i] = inv * (dy[i] * w[i] - x[i] * coef);
    dW[i] += dy[i] * (x[i] * inv);
  }
}

int hx_rms_norm_backward(const float *dy, const float *x, const float *weight, const float *inv_rms, float *dx,
                         float *dweight, int64_t rows, int64_t dim) {
  rms_back_ctx c = {dy, x, weight, inv_rms, dx, dim};
  return rows_with_column_sums(rows, dim, 8.0 * rows * dim, rms_back_row, &c, &dweight, 1);
}

void hx_layer_norm(const float *x, const float *weight, const float *bias, float *out, float *mean, float *rstd,
                   int64_t rows, int64_t dim, double eps) {
  int nt = team(6.0 * rows * dim);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * dim;
    float *o = out + r * dim;
    /* Two passes (the row is in cache for the second): no cancellation when |mean| ≫ std. */
    double mu = row_sum(xr, dim) / (double)dim, var = 0;
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < dim; i++) var += ((double)xr[i] - mu) * ((double)xr[i] - mu);
    float m = (float)mu, rs = (float)(1.0 / sqrt(var / (double)dim + eps));
    mean[r] = m;
    rstd[r] = rs;
    for (int64_t i = 0; i < dim; i++) o[i] = (xr[i] - m) * rs * weight[i] + bias[i];
  }
}

typedef struct {
  const float *dy, *x, *weight, *mean, *rstd;
  float *dx;
  int64_t dim;
} ln_back_ctx;

/* With x̂ = (x − mean)·rstd and g = dy·w: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)); dW += dy·x̂; dB += dy. */
static void ln_back_row(const void *ctx, int64_t r, double *acc) {
  const ln_back_ctx *c = ctx;
  int64_t dim = c->dim;
  const float *restrict dy = c->dy + r * dim, *restrict x = c->x + r * dim, *restrict w = c->weight;
  float *restrict dx = c->dx + r * dim;
  float mu = c->mean[r], rs = c->rstd[r];
  double sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
  for (int64_t i = 0; i < dim; i++) {
    float g = dy[i] * w[i];
    sg += g;
    sgx += (double)g * ((x[i] - mu) * rs);
  }
  float mg = (float)(sg / (double)dim), mgx = (float)(sgx / (double)dim);
  double *restrict dW = acc, *restrict dB = acc + dim;
  for (int64_t i = 0; i < dim; i++) {
    float xh = (x[i] - mu) * rs;
    dx[i] = rs * (dy[i] * w[i] - mg - xh * mgx);
    dW[i] += dy[i] * xh;
    dB[i] += dy[i];
  }
}

int hx_layer_norm_backward(const float *dy, const float *x, const float *weight, const float *mean, const float *rstd,
                           float *dx, float *dweight, float *dbias, int64_t rows, int64_t dim) {
  ln_back_ctx c = {dy, x, weight, mean, rstd, dx, dim};
  float *dst[2] = {dweight, dbias};
  return rows_with_column_sums(rows, dim, 12.0 * rows * dim, ln_back_row, &c, dst, 2);
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Softmax family. Rows of all-−inf give NaN (−inf − −inf), as in PyTorch.                                           */

void hx_softmax(const float *x, float *out, int64_t rows, int64_t dim) {
  int nt = team(COST_EXP * rows * dim);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    float *o = out + r * dim;
    double s = row_exp(x + r * dim, o, dim, row_max(x + r * dim, dim));
    row_scale(o, dim, (float)(1.0 / s));
  }
}

/* The first index holding the row's largest value, as a scan keeping the first strictly larger element finds it:
 * NaN never wins a comparison, so a row starting with NaN gives 0 and later NaNs are skipped. */
static int32_t row_argmax(const float *x, int64_t n) {
  if (n == 0 || isnan(x[0])) return 0;
  float m = row_max(x, n); /* ≥ x[0], so some element equals it */
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 mv = _mm512_set1_ps(m);
  for (; i + 16 <= n; i += 16) {
    __mmask16 hit = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), mv, _CMP_EQ_OQ);
    if (hit) return (int32_t)(i + __builtin_ctz(hit));
  }
#endif
  for (; i < n; i++)
    if (x[i] == m) break;
  return (int32_t)i;
}

void hx_argmax_rows(const float *x, int32_t *out, int64_t rows, int64_t dim) {
  int nt = team(COST_STREAM * rows * dim);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) out[r] = row_argmax(x + r * dim, dim);
}

void hx_log_softmax(const float *x, float *out, int64_t rows, int64_t dim) {
  int nt = team(COST_EXP * rows * dim);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * dim;
    float *o = out + r * dim;
    float m = row_max(xr, dim);
    float ls = (float)log(row_sum_exp(xr, dim, m));
    for (int64_t i = 0; i < dim; i++) o[i] = (xr[i] - m) - ls;
  }
}

/* Σ e and Σ e·(x − m) with e = exp(x − m); a zero probability contributes 0 even at x = −inf (0·−inf would be NaN),
 * since p·log p → 0. */
static double row_sum_exp_shifted(const float *x, int64_t n, float m, double *weighted) {
  double s = 0, t = 0;
#pragma omp simd reduction(+ : s, t)
  for (int64_t i = 0; i < n; i++) {
    float y = x[i] - m, e = hx_expf(y);
    s += e;
    t += e > 0.0f ? (double)e * y : 0.0;
  }
  *weighted = t;
  return s;
}

void hx_gather_log_probs(const float *logits, const int32_t *targets, float *log_prob, float *lse, float *entropy,
                         int64_t rows, int64_t vocab) {
  int nt = team(COST_EXP * rows * vocab);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *x = logits + r * vocab;
    float m = row_max(x, vocab);
    double t = 0, s = entropy ? row_sum_exp_shifted(x, vocab, m, &t) : row_sum_exp(x, vocab, m);
    double ls = log(s), l = m + ls;
    lse[r] = (float)l;
    log_prob[r] = targets[r] >= 0 ? (float)(x[targets[r]] - l) : 0.0f;
    /* H = −Σ p·log p = log s − Σ e·(x−m)/s: both terms ≥ 0, so no cancellation. */
    if (entropy) entropy[r] = (float)(ls - t / s);
  }
}

void hx_gather_log_probs_backward(const float *logits, const int32_t *targets, const float *lse,
                                  const float *dlog_prob, float *dlogits, int64_t rows, int64_t vocab) {
  int nt = team(COST_EXP * rows * vocab);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *x = logits + r * vocab;
    float *d = dlogits + r * vocab; /* may be x: each element is read before it is written */
    int32_t t = targets[r];
    if (t < 0) {
      zero_floats(d, vocab);
      continue;
    }
    float g = dlog_prob[r], l = lse[r];
    for (int64_t j = 0; j < vocab; j++) d[j] = -(g * hx_expf(x[j] - l));
    d[t] += g;
  }
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Rotary embedding                                                                                                 */

void hx_rope(float *x, const int32_t *positions, const float *cos, const float *sin, int64_t rows, int64_t heads,
             int64_t head_dim, int inverse) {
  int64_t half = head_dim / 2;
  /* Rotating by −angle is exact: only the sign of sin changes. */
  float sign = inverse ? -1.0f : 1.0f;
  int nt = team(6.0 * rows * heads * head_dim);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *restrict c = cos + (int64_t)positions[r] * half, *restrict s = sin + (int64_t)positions[r] * half;
    for (int64_t h = 0; h < heads; h++) {
      float *restrict x1 = x + (r * heads + h) * head_dim, *restrict x2 = x1 + half;
      for (int64_t i = 0; i < half; i++) {
        float a = x1[i], b = x2[i], si = sign * s[i];
        x1[i] = a * c[i] - b * si;
        x2[i] = b * c[i] + a * si;
      }
    }
  }
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Activations                                                                                                      */

void hx_swiglu(const float *gate, const float *up, float *out, int64_t n) {
  int nt = team(COST_EXP * n);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = gate[i] * sigmoid(gate[i]) * up[i];
}

/* silu'(g) = σ(g)·(1 + g·(1 − σ(g))). */
void hx_swiglu_backward(const float *dy, const float *gate, const float *up, float *dgate, float *dup, int64_t n) {
  int nt = team(COST_EXP * n);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    float g = gate[i], s = sigmoid(g), d = dy[i];
    dgate[i] = d * up[i] * (s * (1.0f + g * (1.0f - s)));
    dup[i] = d * (g * s);
  }
}

/* GELU's tanh approximation through the identity ½(1 + tanh u) = σ(2u): the same function, but a float tanh near −1
 * would cancel in 1 + tanh u and lose most digits of gelu(x) for x ≲ −3, while σ keeps full relative accuracy. */
#define GELU_K 0.7978845608028654f /* √(2/π) */
#define GELU_C 0.044715f

static inline float gelu_u(float x) { return GELU_K * (x + GELU_C * x * x * x); }

void hx_gelu(const float *x, float *out, int64_t n) {
  int nt = team(COST_EXP * n);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = x[i] * sigmoid(2.0f * gelu_u(x[i]));
}

/* d/dx x·σ(2u) = σ + x·2σ(1−σ)·u′, u′ = √(2/π)(1 + 3c·x²). */
void hx_gelu_backward(const float *dy, const float *x, float *dx, int64_t n) {
  int nt = team(COST_EXP * n);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    float xi = x[i], s = sigmoid(2.0f * gelu_u(xi));
    float du = GELU_K * (1.0f + 3.0f * GELU_C * xi * xi);
    dx[i] = dy[i] * (s + xi * 2.0f * s * (1.0f - s) * du);
  }
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Attention tasks: one per (sequence, head or head group), each thread with its own scratch floats.                */

/* Everything an attention task reads and writes; kernels leave the fields they do not use NULL. */
typedef struct {
  hx_attn_shape s;
  const float *q, *k, *v, *out, *lse, *dout;
  float *w_out, *w_lse, *dq, *dk, *dv;
  int64_t capacity, length; /* decode only */
} attn_job;

typedef void (*attn_task)(const attn_job *job, int64_t i, float *scratch);

/* Runs task(job, i, scratch) for i < n on nt threads. One thread runs outside any OpenMP region: inside one, even a
 * region of a single thread, hx_sgemm's choice of library threads would apply to that region's private copy of the
 * OpenMP settings and the BLAS would open nested teams on every call. */
static int run_tasks(int nt, int64_t n, size_t per, attn_task task, const attn_job *job) {
  float *scratch = malloc((size_t)nt * per * sizeof *scratch);
  if (!scratch) return -1;
  if (nt == 1) {
    for (int64_t i = 0; i < n; i++) task(job, i, scratch);
  } else {
    hx_blas_enter_parallel();
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < n; i++) task(job, i, scratch + (size_t)omp_get_thread_num() * per);
  }
  free(scratch);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Training attention. Each (sequence, head) is processed in blocks of QB query rows: scores against the keys the
 * block can see (causal, from keyStart) come from one BLAS product, so the causal half above the diagonal is skipped
 * except inside the block itself. Query rows before keyStart see no key: out = 0, lse = −inf, zero gradients.      */

enum { QB = 64 };

/* One head of one sequence: its rows of q (ld q_heads·D) and of its key/value head (ld kv_heads·D). */
typedef struct {
  const float *q, *k, *v;
  int ldq, ldk, d, seq, ks;
  float scale;
} head_view;

static head_view head_at(const attn_job *j, int b, int h) {
  const hx_attn_shape *s = &j->s;
  int g = h / (s->q_heads / s->kv_heads);
  int64_t qo = ((int64_t)b * s->seq * s->q_heads + h) * s->head_dim;
  int64_t ko = ((int64_t)b * s->seq * s->kv_heads + g) * s->head_dim;
  head_view hv = {j->q + qo, j->k + ko, j->v + ko, s->q_heads * s->head_dim, s->kv_heads * s->head_dim, s->head_dim,
                  s->seq, s->key_start ? s->key_start[b] : 0, s->scale};
  return hv;
}

/* The offset of head (b, h) in an array laid out [batch, seq, heads, D]. */
static int64_t head_offset(const hx_attn_shape *s, int heads, int b, int h) {
  return ((int64_t)b * s->seq * heads + h) * s->head_dim;
}

static void zero_rows(float *x, int rows, int ld, int width) {
  for (int i = 0; i < rows; i++) zero_floats(x + (int64_t)i * ld, width);
}

/* S[r, c] = scale·q_{i0+r}·k_{ks+c} for rows × nk. */
static void block_scores(const head_view *hv, int i0, int rows, int nk, float *S) {
  hx_sgemm(0, 1, rows, nk, hv->d, hv->scale, hv->q + (int64_t)i0 * hv->ldq, hv->ldq, hv->k + (int64_t)hv->ks * hv->ldk,
           hv->ldk, 0.0f, S, nk, 1);
}

/* Softmax of the first `valid` scores of a row in place, zeros after them; returns the log-sum-exp. */
static float causal_softmax_row(float *s, int valid, int nk) {
  float m = row_max(s, valid);
  double sum = row_exp(s, s, valid, m);
  row_scale(s, valid, (float)(1.0 / sum));
  zero_floats(s + valid, nk - valid);
  return (float)(m + log(sum));
}

/* Task i = b·q_heads + h. */
static void attend_head(const attn_job *j, int64_t i, float *S) {
  int b = (int)(i / j->s.q_heads), h = (int)(i % j->s.q_heads);
  head_view hv = head_at(j, b, h);
  float *out = j->w_out + head_offset(&j->s, j->s.q_heads, b, h), *lse = j->w_lse + i * hv.seq;
  zero_rows(out, hv.ks, hv.ldq, hv.d);
  for (int t = 0; t < hv.ks; t++) lse[t] = -INFINITY;
  for (int i0 = hv.ks; i0 < hv.seq; i0 += QB) {
    int i1 = i0 + QB < hv.seq ? i0 + QB : hv.seq, rows = i1 - i0, nk = i1 - hv.ks;
    block_scores(&hv, i0, rows, nk, S);
    for (int r = 0; r < rows; r++) lse[i0 + r] = causal_softmax_row(S + (int64_t)r * nk, i0 + r - hv.ks + 1, nk);
    hx_sgemm(0, 0, rows, hv.d, nk, 1.0f, S, nk, hv.v + (int64_t)hv.ks * hv.ldk, hv.ldk, 0.0f,
             out + (int64_t)i0 * hv.ldq, hv.ldq, 1);
  }
}

static int attention_threads(const hx_attn_shape *s) {
  return team(2.0 * s->batch * s->q_heads * (double)s->seq * s->seq * s->head_dim);
}

int hx_attention(const float *q, const float *k, const float *v, float *out, float *lse, const hx_attn_shape *s) {
  attn_job j = {.s = *s, .q = q, .k = k, .v = v, .w_out = out, .w_lse = lse};
  return run_tasks(attention_threads(s), (int64_t)s->batch * s->q_heads, (size_t)QB * s->seq + 1, attend_head, &j);
}

/* Gradients of one query head, flash-attention style: P = exp(S − lse) is recomputed per block, then
 * dV += Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − rowsum(dO∘O)), dQ = scale·dS·K, dK += scale·dSᵀ·Q. */
static void attend_head_backward(const attn_job *j, int b, int h, float *dk, float *dv, float *P, float *dP) {
  head_view hv = head_at(j, b, h);
  int64_t qo = head_offset(&j->s, j->s.q_heads, b, h);
  const float *dout = j->dout + qo, *out = j->out + qo, *lse = j->lse + ((int64_t)b * j->s.q_heads + h) * hv.seq;
  float *dq = j->dq + qo;
  int ldq = hv.ldq, ldk = hv.ldk;
  const float *kk = hv.k + (int64_t)hv.ks * ldk, *vk = hv.v + (int64_t)hv.ks * ldk;
  float *dkk = dk + (int64_t)hv.ks * ldk, *dvk = dv + (int64_t)hv.ks * ldk;
  zero_rows(dq, hv.ks, ldq, hv.d);
  for (int i0 = hv.ks; i0 < hv.seq; i0 += QB) {
    int i1 = i0 + QB < hv.seq ? i0 + QB : hv.seq, rows = i1 - i0, nk = i1 - hv.ks;
    const float *dob = dout + (int64_t)i0 * ldq, *qb = hv.q + (int64_t)i0 * ldq;
    block_scores(&hv, i0, rows, nk, P);
    for (int r = 0; r < rows; r++) {
      float *p = P + (int64_t)r * nk, l = lse[i0 + r];
      int valid = i0 + r - hv.ks + 1;
      for (int c = 0; c < valid; c++) p[c] = hx_expf(p[c] - l);
      zero_floats(p + valid, nk - valid);
    }
    hx_sgemm(1, 0, nk, hv.d, rows, 1.0f, P, nk, dob, ldq, 1.0f, dvk, ldk, 1);
    hx_sgemm(0, 1, rows, nk, hv.d, 1.0f, dob, ldq, vk, ldk, 0.0f, dP, nk, 1);
    for (int r = 0; r < rows; r++) {
      float *p = P + (int64_t)r * nk, *dp = dP + (int64_t)r * nk;
      float di = dot_f(dob + (int64_t)r * ldq, out + (int64_t)(i0 + r) * ldq, hv.d);
      for (int c = 0; c < nk; c++) dp[c] = p[c] * (dp[c] - di);
    }
    hx_sgemm(0, 0, rows, hv.d, nk, hv.scale, dP, nk, kk, ldk, 0.0f, dq + (int64_t)i0 * ldq, ldq, 1);
    hx_sgemm(1, 0, nk, hv.d, rows, hv.scale, dP, nk, qb, ldq, 1.0f, dkk, ldk, 1);
  }
}

/* Task i = b·kv_heads + g: the task owns the rows of dk and dv of kv head g, shared by the query heads of its group,
 * so no two threads add into them. */
static void attend_group_backward(const attn_job *j, int64_t i, float *P) {
  const hx_attn_shape *s = &j->s;
  int b = (int)(i / s->kv_heads), g = (int)(i % s->kv_heads), group = s->q_heads / s->kv_heads;
  int64_t ko = head_offset(s, s->kv_heads, b, g);
  zero_rows(j->dk + ko, s->seq, s->kv_heads * s->head_dim, s->head_dim);
  zero_rows(j->dv + ko, s->seq, s->kv_heads * s->head_dim, s->head_dim);
  for (int h = g * group; h < (g + 1) * group; h++)
    attend_head_backward(j, b, h, j->dk + ko, j->dv + ko, P, P + (size_t)QB * s->seq);
}

int hx_attention_backward(const float *dout, const float *q, const float *k, const float *v, const float *out,
                          const float *lse, float *dq, float *dk, float *dv, const hx_attn_shape *s) {
  attn_job j = {.s = *s, .q = q, .k = k, .v = v, .out = out, .lse = lse, .dout = dout, .dq = dq, .dk = dk, .dv = dv};
  return run_tasks(attention_threads(s), (int64_t)s->batch * s->kv_heads, 2 * (size_t)QB * s->seq + 1,
                   attend_group_backward, &j);
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Decoding attention: one query per sequence, memory-bound on the cache, so plain loops; the query heads of a group
 * are handled together so each cached key and value row is read once.                                              */

/* Task p = b·kv_heads + g; scratch: group softmax normalisers, then group rows of scores. */
#if defined(__AVX512F__)
/* Lane j of the result = the sum of the 16 lanes of v[j]: a transpose-and-add tree, 16 vectors at once instead of 16
 * horizontal sums (each a latency-bound chain). */
static __m512 hsum16(const __m512 *v) {
  __m512 w[4];
  for (int m = 0; m < 4; m++) {
    const __m512 *x = v + 4 * m;
    __m512 s01 = _mm512_add_ps(_mm512_unpacklo_ps(x[0], x[1]), _mm512_unpackhi_ps(x[0], x[1]));
    __m512 s23 = _mm512_add_ps(_mm512_unpacklo_ps(x[2], x[3]), _mm512_unpackhi_ps(x[2], x[3]));
    w[m] = _mm512_add_ps(_mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_f32x4(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
  __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(w[2], w[3], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_f32x4(w[2], w[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
}
#endif

/* out[t] = scale · q·k_t for the n keys of k ([n, d] rows). With AVX-512 and d a multiple of 16 each key's 16 lane
 * products are summed 16 keys at a time (hsum16): the decode step's hot loop, 4× faster than one dot per key. The
 * order of the sum differs from dot_f's, so the last bit of a score may too. */
static void decode_scores(const float *q, const float *k, float *out, int64_t n, int64_t d, float scale) {
  int64_t t = 0;
#if defined(__AVX512F__)
  if (d % 16 == 0) {
    const __m512 sv = _mm512_set1_ps(scale);
    for (; t < n; t += 16) {
      int64_t m = n - t < 16 ? n - t : 16;
      __m512 v[16];
      for (int64_t j = 0; j < 16; j++) {
        __m512 acc = _mm512_setzero_ps();
        if (j < m)
          for (int64_t i = 0; i < d; i += 16)
            acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), _mm512_loadu_ps(k + (t + j) * d + i), acc);
        v[j] = acc;
      }
      _mm512_mask_storeu_ps(out + t, (__mmask16)((1u << m) - 1), _mm512_mul_ps(sv, hsum16(v)));
    }
    return;
  }
#endif
  for (; t < n; t++) out[t] = scale * dot_f(q, k + t * d, d);
}

/* o = Σ_t w[t]·v_t over the n value rows of v ([n, d]), each element summed in key order with fmaf. With AVX-512 and
 * d a multiple of 16 up to 128 the row of o stays in registers over all keys (the same sums, bit for bit). */
static void decode_values(const float *w, const float *v, float *o, int64_t n, int64_t d) {
#if defined(__AVX512F__)
  if (d % 16 == 0 && d <= 128) {
    __m512 acc[8];
    int64_t c = d / 16;
    for (int64_t i = 0; i < c; i++) acc[i] = _mm512_setzero_ps();
    for (int64_t t = 0; t < n; t++) {
      __m512 wt = _mm512_set1_ps(w[t]);
      for (int64_t i = 0; i < c; i++) acc[i] = _mm512_fmadd_ps(wt, _mm512_loadu_ps(v + t * d + 16 * i), acc[i]);
    }
    for (int64_t i = 0; i < c; i++) _mm512_storeu_ps(o + 16 * i, acc[i]);
    return;
  }
#endif
  zero_floats(o, d);
  for (int64_t t = 0; t < n; t++)
    for (int64_t i = 0; i < d; i++) o[i] = fmaf(w[t], v[t * d + i], o[i]);
}

/* The keys and values task p reads: rows ks.. of its [capacity, D] blocks. */
static void decode_rows(const attn_job *j, int64_t p, const float **kb, const float **vb, int64_t *n) {
  int64_t b = p / j->s.kv_heads, ks = j->s.key_start ? j->s.key_start[b] : 0, d = j->s.head_dim;
  *kb = j->k + (p * j->capacity + ks) * d;
  *vb = j->v + (p * j->capacity + ks) * d;
  *n = j->length - ks;
}

static void decode_group(const attn_job *j, int64_t p, float *inv) {
  const hx_attn_shape *s = &j->s;
  int64_t group = s->q_heads / s->kv_heads, d = s->head_dim, n;
  const float *kb, *vb;
  decode_rows(j, p, &kb, &vb, &n);
  /* The cache is read once per step, from memory: the next task's rows (the same thread's, under the static
   * schedule) are requested into L2 while this one computes, which overlaps most of their latency (≈15% faster at
   * batch 64 when the cache does not fit in L3). */
  if (p + 1 < (int64_t)s->batch * s->kv_heads) {
    const float *nk, *nv;
    int64_t nn;
    decode_rows(j, p + 1, &nk, &nv, &nn);
    for (int64_t i = 0; i < nn * d; i += 16) {
      __builtin_prefetch(nk + i, 0, 2);
      __builtin_prefetch(nv + i, 0, 2);
    }
  }
  const float *qg = j->q + p * group * d;
  float *og = j->w_out + p * group * d, *sc = inv + group;
  for (int64_t h = 0; h < group; h++) decode_scores(qg + h * d, kb, sc + h * n, n, d, s->scale);
  for (int64_t h = 0; h < group; h++) {
    float *sh = sc + h * n;
    inv[h] = n > 0 ? (float)(1.0 / row_exp(sh, sh, n, row_max(sh, n))) : 0.0f;
  }
  for (int64_t h = 0; h < group; h++) {
    decode_values(sc + h * n, vb, og + h * d, n, d);
    row_scale(og + h * d, d, inv[h]);
  }
}

int hx_attention_decode(const float *q, const float *k_cache, const float *v_cache, float *out, int64_t batch,
                        int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t capacity, int64_t length,
                        float scale, const int32_t *key_start) {
  attn_job j = {.s = {.batch = (int)batch, .q_heads = (int)q_heads, .kv_heads = (int)kv_heads, .head_dim = (int)head_dim,
                      .scale = scale, .key_start = key_start},
                .q = q, .k = k_cache, .v = v_cache, .w_out = out, .capacity = capacity, .length = length};
  int nt = team(4.0 * batch * q_heads * (double)length * head_dim);
  int64_t group = q_heads / kv_heads;
  return run_tasks(nt, batch * kv_heads, (size_t)(group * length + group) + 1, decode_group, &j);
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Optimiser                                                                                                        */

/* torch.optim.AdamW (single-tensor): the bias corrections and the step size are Python floats there, so they are
 * computed in double here and rounded once to float, like PyTorch's scalar arguments. */
void hx_adamw(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1, double beta2,
              double eps, double weight_decay, int64_t step) {
  const float decay = (float)(1.0 - lr * weight_decay), b1 = (float)beta1, c1 = (float)(1.0 - beta1);
  const float b2 = (float)beta2, c2 = (float)(1.0 - beta2), e = (float)eps;
  const double bc1 = 1.0 - pow(beta1, (double)step), bc2 = 1.0 - pow(beta2, (double)step);
  const float neg_step = (float)(-lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float *restrict p = param, *restrict mm = m, *restrict vv = v;
  const float *restrict g = grad;
  int nt = team(12.0 * n);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    float mi = b1 * mm[i] + c1 * g[i], vi = b2 * vv[i] + c2 * g[i] * g[i];
    mm[i] = mi;
    vv[i] = vi;
    p[i] = p[i] * decay + neg_step * mi / (sqrtf(vi) / bc2_sqrt + e);
  }
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Small elementwise and bookkeeping kernels                                                                        */

void hx_add_bias(const float *x, const float *bias, float *out, int64_t rows, int64_t dim) {
  int nt = team(COST_STREAM * rows * dim);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < dim; i++) out[r * dim + i] = x[r * dim + i] + bias[i];
}

typedef struct {
  const float *dy;
  int64_t dim;
} sum_rows_ctx;

static void sum_row(const void *ctx, int64_t r, double *acc) {
  const sum_rows_ctx *c = ctx;
  const float *restrict dy = c->dy + r * c->dim;
  double *restrict dB = acc;
  for (int64_t i = 0; i < c->dim; i++) dB[i] += dy[i];
}

int hx_sum_rows(const float *dy, float *dbias, int64_t rows, int64_t dim) {
  sum_rows_ctx c = {dy, dim};
  return rows_with_column_sums(rows, dim, COST_STREAM * rows * dim, sum_row, &c, &dbias, 1);
}

void hx_axpy(float alpha, const float *x, float *y, int64_t n) {
  int nt = team(COST_STREAM * n);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = fmaf(alpha, x[i], y[i]);
}

void hx_mul(const float *a, const float *b, float *out, int64_t n) {
  int nt = team(COST_STREAM * n);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = a[i] * b[i];
}

/* In integer arithmetic, not VCVTNEPS2BF16, which flushes subnormal inputs to zero: the bits must equal the
 * TypeScript backend's and PyTorch's. The loop vectorises. */
void hx_round_bf16(const float *x, uint16_t *out, int64_t n) {
  int nt = team(COST_STREAM * n);
  const uint32_t *bits = (const uint32_t *)x;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    uint32_t b = bits[i];
    uint32_t nan = (b & 0x7f800000u) == 0x7f800000u && (b & 0x7fffffu) != 0;
    out[i] = nan ? (uint16_t)((b >> 16) | 0x40) : (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  }
}

void hx_scale(float *x, float alpha, int64_t n) {
  int nt = team(COST_STREAM * n);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t i = 0; i < n; i++) x[i] *= alpha;
}

double hx_sum_squares(const float *x, int64_t n) {
  int nt = team(COST_STREAM * n);
  double s = 0;
#pragma omp parallel for simd num_threads(nt) schedule(static) reduction(+ : s)
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

int hx_all_finite(const float *x, int64_t n) {
  int nt = team(COST_STREAM * n), bad = 0;
  /* x − x is 0 for every finite x and NaN for ±inf and NaN. */
#pragma omp parallel for simd num_threads(nt) schedule(static) reduction(| : bad)
  for (int64_t i = 0; i < n; i++) bad |= !(x[i] - x[i] == 0.0f);
  return !bad;
}

void hx_embedding(const float *table, const int32_t *ids, float *out, int64_t rows, int64_t dim) {
  int nt = team(COST_STREAM * rows * dim);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t r = 0; r < rows; r++) memcpy(out + r * dim, table + (int64_t)ids[r] * dim, (size_t)dim * sizeof *out);
}

void hx_copy_rows(const float *src, int64_t src_ld, float *dst, int64_t dst_ld, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++) memcpy(dst + r * dst_ld, src + r * src_ld, (size_t)cols * sizeof *dst);
}

/* Ids repeat, so rows cannot be split between threads; columns can: each thread adds its own slice of every row. */
void hx_embedding_backward(const float *dout, const int32_t *ids, float *dtable, int64_t rows, int64_t dim) {
  int64_t slices = dim / 16 > 0 ? dim / 16 : 1;
  int nt = team(COST_STREAM * rows * dim);
  nt = nt < slices ? nt : (int)slices;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; t++) {
    int64_t lo, hi;
    part_of(slices, t, nt, &lo, &hi);
    lo *= 16;
    hi = hi == slices ? dim : hi * 16;
    for (int64_t r = 0; r < rows; r++) {
      float *restrict d = dtable + (int64_t)ids[r] * dim;
      const float *restrict g = dout + r * dim;
      for (int64_t i = lo; i < hi; i++) d[i] += g[i];
    }
  }
}
