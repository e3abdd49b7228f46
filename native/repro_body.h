/* The reproducible kernels (repro.h), included by repro.c and repro_avx2.c, which compile them for different vector
 * widths into the table HX_REPRO_TABLE. What keeps the bits the same on every build and thread count: values are
 * doubles between a load and a store (a product of two floats is exact in double, so fused or not cannot differ),
 * every sum runs in index order in one accumulator (no `omp simd` reduction, no -ffast-math, -ffp-contract=off), the
 * vectoriser may only widen loops whose lanes are independent, threads split outputs and never a sum, and exp and
 * log are the polynomials below rather than libm. src/backend/reproducible.ts mirrors every expression here in the
 * same order; JavaScript numbers are IEEE doubles, so it computes the same bits. */
#include "repro.h"
#include "threads.h"
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Lets the compiler fuse a·b + c into one multiply-add. Only for functions whose every product is of two floats
 * widened to double: such a product is exact, so the fused and the unfused sum round the same (and as
 * reproducible.ts's do); anywhere else the file's -ffp-contract=off holds. */
#define EXACT_PRODUCTS __attribute__((optimize("fp-contract=fast")))

/* A few microseconds of thread wake-up is worth about this many simple operations. */
static int team(double ops) { return hx_threads_for(ops, 2.5e5, 0); }

/* Scratch memory kept per thread between calls, one buffer per use: memory fresh from malloc costs a page fault per
 * page on every call, which at the zoo's sizes is a tenth of the mode's time. Buffers above SCRATCH_KEEP doubles are
 * allocated and freed per call, so a large model does not hold them. */
enum { SCRATCH_A, SCRATCH_B, SCRATCH_ROWS, SCRATCH_SLOTS, SCRATCH_KEEP = 1 << 22 };
static _Thread_local double *scratch_buf[SCRATCH_SLOTS];
static _Thread_local size_t scratch_cap[SCRATCH_SLOTS];

/* At least n doubles (contents undefined), or NULL when memory is short; hand them back with scratch_done. */
static double *scratch_take(int slot, size_t n) {
  if (n > SCRATCH_KEEP) return malloc(n * sizeof(double));
  if (n > scratch_cap[slot]) {
    free(scratch_buf[slot]);
    scratch_buf[slot] = malloc(n * sizeof(double));
    scratch_cap[slot] = scratch_buf[slot] ? n : 0;
  }
  return scratch_buf[slot];
}

static void scratch_done(int slot, double *p) {
  if (p != scratch_buf[slot]) free(p);
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* exp and log from + − × / and floor only, each correctly rounded in C and JavaScript alike.                        */

#define LOG2E 1.4426950408889634
#define LN2_HI 6.93147180369123816490e-01 /* ln 2 with 21 trailing zero bits, so k·LN2_HI is exact */
#define LN2_LO 1.90821492927058770002e-10
#define SQRT2 1.4142135623730951

/* 1/i and 1/(2i+1), folded by the compiler with the rounding JavaScript's division gives at run time. */
static const double inv_int[14] = {0,        1.0 / 1,  1.0 / 2,  1.0 / 3,  1.0 / 4,  1.0 / 5,  1.0 / 6,
                                   1.0 / 7,  1.0 / 8,  1.0 / 9,  1.0 / 10, 1.0 / 11, 1.0 / 12, 1.0 / 13};
static const double inv_odd[13] = {1.0 / 1,  1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9,  1.0 / 11, 1.0 / 13,
                                   1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23, 1.0 / 25};

/* 2^e for an integral e in [-1022, 1023], exactly: e + 1023 lands in the low bits of e + 1023 + 2^52, whence a
 * shift moves it into the exponent field (no float-to-integer conversion, so loops calling it still vectorise). */
static inline double pow2(double e) {
  double t = e + 1023.0 + 4503599627370496.0;
  uint64_t bits;
  memcpy(&bits, &t, sizeof bits);
  bits <<= 52;
  memcpy(&t, &bits, sizeof t);
  return t;
}

/* e^x = 2^k·e^r with |r| ≤ ln2/2, e^r by its Taylor polynomial of degree 13 (truncation below 5e-18). 2^k is applied in
 * two exact halves so that subnormal and overflowing results round once, as IEEE says. Written without branches
 * (out-of-range and NaN inputs are clamped, computed and replaced at the end) so that loops over it vectorise; for x in
 * range it is operation for operation reproducible.ts's reproExp. */
static inline double r_exp(double x) {
  double xc = x > 709.8 ? 709.8 : x;
  xc = xc < -745.2 ? -745.2 : xc;
  xc = x != x ? 0.0 : xc;
  double k = floor(xc * LOG2E + 0.5);
  double r = (xc - k * LN2_HI) - k * LN2_LO;
  double p = 1.0;
  for (int i = 13; i >= 1; i--) p = 1.0 + r * p * inv_int[i];
  double k1 = floor(k * 0.5);
  double y = p * pow2(k1) * pow2(k - k1);
  return x != x ? x : x > 709.8 ? INFINITY : x < -745.2 ? 0.0 : y;
}

/* log x = e·ln2 + log m with m in (√½, √2]: log m = 2·atanh(s), s = (m−1)/(m+1), by its series to s^25. */
static inline double r_log(double x) {
  if (x != x || x < 0) return NAN;
  if (x == 0) return -INFINITY;
  if (x == INFINITY) return x;
  int64_t e = 0;
  if (x < 2.2250738585072014e-308) { /* subnormal: scale into the normal range first */
    x *= 18014398509481984.0;         /* 2^54 */
    e = -54;
  }
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  e += (int64_t)(bits >> 52) - 1023;
  bits = (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
  double m;
  memcpy(&m, &bits, sizeof m);
  if (m > SQRT2) {
    m *= 0.5;
    e += 1;
  }
  double s = (m - 1.0) / (m + 1.0), z = s * s, t = 0.0;
  for (int i = 12; i >= 1; i--) t = z * (t + inv_odd[i]);
  double ed = (double)e;
  return ed * LN2_HI + (ed * LN2_LO + (2.0 * s + 2.0 * s * t));
}

static inline double r_sigmoid(double z) { return 1.0 / (1.0 + r_exp(-z)); }

/* ---------------------------------------------------------------------------------------------------------------- */
/* gemm: C[i,j] = alpha·Σ_p op(A)[i,p]·op(B)[p,j] (+ beta·C[i,j]), the sum from p = 0 upwards in one double. Both
 * operands are packed as doubles in panels so a GR×GC tile of sums stays in registers over all of k.               */

/* The tile is as wide as the build's registers allow without spilling: 8×16 sums in 16 zmm registers with AVX-512,
 * 4×8 in 8 ymm otherwise. Each sum is the same whatever the tile, so the bits do not depend on it. */
#if defined(__AVX512F__)
enum { GR = 8, GC = 16, GROUP_PANELS = 4, CHUNK_BLOCKS = 8 };
typedef double vd __attribute__((vector_size(64), aligned(8)));
#else
enum { GR = 4, GC = 8, GROUP_PANELS = 8, CHUNK_BLOCKS = 16 };
typedef double vd __attribute__((vector_size(32), aligned(8)));
#endif
enum { VL = sizeof(vd) / sizeof(double), TILE_VECTORS = GC / VL };

/* op(X)[i,p] of X stored with leading dimension ld. */
static inline double at(const float *x, int trans, int ld, int64_t i, int64_t p) {
  return trans ? x[p * ld + i] : x[i * ld + p];
}

/* The GR×GC tile of sums of one row block of packed A by one panel of packed B, in registers over all of k. */
EXACT_PRODUCTS static void tile_sums(const double *restrict ap, const double *restrict bp, int64_t k, double out[GR][GC]) {
  vd t[GR][TILE_VECTORS] = {{{0}}};
  for (int64_t p = 0; p < k; p++) {
    vd b[TILE_VECTORS];
    memcpy(b, bp + p * GC, sizeof b);
    for (int r = 0; r < GR; r++) {
      double a = ap[p * GR + r];
      for (int v = 0; v < TILE_VECTORS; v++) t[r][v] += a * b[v];
    }
  }
  memcpy(out, t, sizeof t);
}

static void scale_only(int m, int n, double beta, float *c, int ldc) {
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0 ? 0.0f : (float)(beta * c[i * ldc + j]);
}

/* row[j] += a·b[j] for j < n, a a widened float. */
EXACT_PRODUCTS static void add_scaled_row(double *restrict row, double a, const float *restrict b, int64_t n) {
  for (int64_t j = 0; j < n; j++) row[j] += a * b[j];
}

/* C = alpha·op(A)·B (+ beta·C) for fewer than GR rows with B's rows contiguous (decode steps): each row of C adds
 * the rows of B scaled by its elements of A, p = 0 upwards, into a row of doubles, with no packing of the weights.
 * The sums are those of the tiles above, in the same order. */
static int few_rows(int ta, int m, int n, int k, double al, const float *a, int lda, const float *b, int ldb, double be,
                    float *c, int ldc) {
  double *acc = scratch_take(SCRATCH_A, (size_t)m * n);
  if (!acc) return -1;
#pragma omp parallel for num_threads(team(0.5 * (double)m * n * k) < m ? team(0.5 * (double)m * n * k) : m)
  for (int64_t i = 0; i < m; i++) {
    double *row = acc + i * n;
    for (int64_t j = 0; j < n; j++) row[j] = 0;
    for (int64_t p = 0; p < k; p++) add_scaled_row(row, at(a, ta, lda, i, p), b + p * ldb, n);
    for (int64_t j = 0; j < n; j++) {
      float *cij = c + i * ldc + j;
      double x = al * row[j];
      *cij = be == 0 ? (float)x : (float)(x + be * *cij);
    }
  }
  scratch_done(SCRATCH_A, acc);
  return 0;
}

static int r_gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                  float beta, float *c, int ldc) {
  if (m <= 0 || n <= 0) return 0;
  double al = alpha, be = beta;
  if (k <= 0 || al == 0) {
    scale_only(m, n, be, c, ldc);
    return 0;
  }
  if (m < GR && !tb) return few_rows(ta, m, n, k, al, a, lda, b, ldb, be, c, ldc);
  int64_t mb = (m + GR - 1) / GR, nb = (n + GC - 1) / GC;
  double *ap = scratch_take(SCRATCH_A, (size_t)(mb * GR * k)), *bp = scratch_take(SCRATCH_B, (size_t)(nb * GC * k));
  if (!ap || !bp) {
    scratch_done(SCRATCH_A, ap);
    scratch_done(SCRATCH_B, bp);
    return -1;
  }
  int64_t groups = (nb + GROUP_PANELS - 1) / GROUP_PANELS, chunks = (mb + CHUNK_BLOCKS - 1) / CHUNK_BLOCKS;
  int nt = team(0.5 * (double)m * n * k);
  nt = nt < groups * chunks ? nt : (int)(groups * chunks);
#pragma omp parallel num_threads(nt)
  {
#pragma omp for schedule(static)
    for (int64_t ib = 0; ib < mb; ib++)
      for (int64_t p = 0; p < k; p++)
        for (int r = 0; r < GR; r++) {
          int64_t i = ib * GR + r;
          ap[(ib * k + p) * GR + r] = i < m ? at(a, ta, lda, i, p) : 0.0;
        }
#pragma omp for schedule(static)
    for (int64_t jb = 0; jb < nb; jb++)
      for (int64_t p = 0; p < k; p++)
        for (int s = 0; s < GC; s++) {
          int64_t j = jb * GC + s;
          bp[(jb * k + p) * GC + s] = j < n ? at(b, !tb, ldb, j, p) : 0.0;
        }
#pragma omp for schedule(static)
    for (int64_t task = 0; task < groups * chunks; task++) {
      int64_t g = task % groups, ch = task / groups;
      int64_t ib1 = (ch + 1) * CHUNK_BLOCKS < mb ? (ch + 1) * CHUNK_BLOCKS : mb;
      int64_t jb1 = (g + 1) * GROUP_PANELS < nb ? (g + 1) * GROUP_PANELS : nb;
      for (int64_t ib = ch * CHUNK_BLOCKS; ib < ib1; ib++)
        for (int64_t jb = g * GROUP_PANELS; jb < jb1; jb++) {
          double t[GR][GC];
          tile_sums(ap + ib * k * GR, bp + jb * k * GC, k, t);
          for (int64_t r = 0; r < GR && ib * GR + r < m; r++)
            for (int64_t s = 0; s < GC && jb * GC + s < n; s++) {
              float *cij = c + (ib * GR + r) * ldc + jb * GC + s;
              double x = al * t[r][s];
              *cij = be == 0 ? (float)x : (float)(x + be * *cij);
            }
        }
    }
  }
  scratch_done(SCRATCH_A, ap);
  scratch_done(SCRATCH_B, bp);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Column sums over rows (weight and bias gradients): each thread owns a block of columns and adds the rows in order. */

/* dst[j] = dst[j] + Σ_r term(ctx, r, j) for j < dim, the sum over r = 0.. in double; term fills a row [lo, hi). */
typedef void (*column_terms)(const void *ctx, int64_t r, int64_t lo, int64_t hi, double *out);

static int column_sums(int64_t rows, int64_t dim, const void *ctx, column_terms terms, float *dst) {
  int nt = team(4.0 * rows * dim);
  int64_t blocks = (dim + 63) / 64;
  nt = nt < blocks ? nt : (blocks > 0 ? (int)blocks : 1);
  double *scratch = scratch_take(SCRATCH_ROWS, (size_t)(2 * dim + 1));
  if (!scratch) return -1;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t bl = 0; bl < blocks; bl++) {
    int64_t lo = bl * 64, hi = lo + 64 < dim ? lo + 64 : dim;
    double *acc = scratch + lo, *row = scratch + dim + lo;
    for (int64_t j = lo; j < hi; j++) acc[j - lo] = 0.0;
    for (int64_t r = 0; r < rows; r++) {
      terms(ctx, r, lo, hi, row);
      for (int64_t j = lo; j < hi; j++) acc[j - lo] += row[j - lo];
    }
    for (int64_t j = lo; j < hi; j++) dst[j] = (float)((double)dst[j] + acc[j - lo]);
  }
  scratch_done(SCRATCH_ROWS, scratch);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Normalisation                                                                                                    */

static void r_rms_norm(const float *x, const float *w, float *out, float *inv_rms, int64_t rows, int64_t dim,
                       double eps) {
#pragma omp parallel for num_threads(team(4.0 * rows * dim)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * dim;
    double ss = 0;
    for (int64_t j = 0; j < dim; j++) ss += (double)xr[j] * xr[j];
    double inv = 1.0 / sqrt(ss / (double)dim + eps);
    inv_rms[r] = (float)inv;
    for (int64_t j = 0; j < dim; j++) out[r * dim + j] = (float)((double)xr[j] * inv * w[j]);
  }
}

typedef struct {
  const float *dy, *x, *w, *a, *b; /* a, b: invRms, or mean and rstd */
  int64_t dim;
} norm_ctx;

static void rms_dweight(const void *ctx, int64_t r, int64_t lo, int64_t hi, double *out) {
  const norm_ctx *c = ctx;
  double inv = c->a[r];
  for (int64_t j = lo; j < hi; j++) out[j - lo] = (double)c->dy[r * c->dim + j] * c->x[r * c->dim + j] * inv;
}

static int r_rms_norm_backward(const float *dy, const float *x, const float *w, const float *inv_rms, float *dx,
                               float *dw, int64_t rows, int64_t dim) {
#pragma omp parallel for num_threads(team(6.0 * rows * dim)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *g = dy + r * dim, *xr = x + r * dim;
    double inv = inv_rms[r], dot = 0;
    for (int64_t j = 0; j < dim; j++) dot += (double)g[j] * w[j] * xr[j];
    double c = (inv * inv * inv * dot) / (double)dim;
    for (int64_t j = 0; j < dim; j++) dx[r * dim + j] = (float)(inv * g[j] * w[j] - c * xr[j]);
  }
  norm_ctx c = {dy, x, w, inv_rms, NULL, dim};
  return column_sums(rows, dim, &c, rms_dweight, dw);
}

static void r_layer_norm(const float *x, const float *w, const float *bias, float *out, float *mean, float *rstd,
                         int64_t rows, int64_t dim, double eps) {
#pragma omp parallel for num_threads(team(6.0 * rows * dim)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * dim;
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < dim; j++) sum += xr[j];
    double mu = sum / (double)dim;
    for (int64_t j = 0; j < dim; j++) sq += ((double)xr[j] - mu) * ((double)xr[j] - mu);
    double rs = 1.0 / sqrt(sq / (double)dim + eps);
    mean[r] = (float)mu;
    rstd[r] = (float)rs;
    for (int64_t j = 0; j < dim; j++) out[r * dim + j] = (float)(((double)xr[j] - mu) * rs * w[j] + bias[j]);
  }
}

static void ln_dweight(const void *ctx, int64_t r, int64_t lo, int64_t hi, double *out) {
  const norm_ctx *c = ctx;
  double mu = c->a[r], rs = c->b[r];
  const float *dy = c->dy + r * c->dim, *x = c->x + r * c->dim;
  for (int64_t j = lo; j < hi; j++) out[j - lo] = (double)dy[j] * (((double)x[j] - mu) * rs);
}

static void ln_dbias(const void *ctx, int64_t r, int64_t lo, int64_t hi, double *out) {
  const norm_ctx *c = ctx;
  for (int64_t j = lo; j < hi; j++) out[j - lo] = c->dy[r * c->dim + j];
}

static int r_layer_norm_backward(const float *dy, const float *x, const float *w, const float *mean, const float *rstd,
                                 float *dx, float *dw, float *db, int64_t rows, int64_t dim) {
#pragma omp parallel for num_threads(team(8.0 * rows * dim)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *gy = dy + r * dim, *xr = x + r * dim;
    double mu = mean[r], rs = rstd[r], sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < dim; j++) {
      double g = (double)gy[j] * w[j];
      sum_g += g;
      sum_gx += g * ((double)xr[j] - mu) * rs;
    }
    double mean_g = sum_g / (double)dim, mean_gx = sum_gx / (double)dim;
    for (int64_t j = 0; j < dim; j++) {
      double xhat = ((double)xr[j] - mu) * rs;
      dx[r * dim + j] = (float)(rs * ((double)gy[j] * w[j] - mean_g - xhat * mean_gx));
    }
  }
  norm_ctx c = {dy, x, w, mean, rstd, dim};
  return column_sums(rows, dim, &c, ln_dweight, dw) || column_sums(rows, dim, &c, ln_dbias, db) ? -1 : 0;
}

static void dy_row(const void *ctx, int64_t r, int64_t lo, int64_t hi, double *out) {
  const norm_ctx *c = ctx;
  for (int64_t j = lo; j < hi; j++) out[j - lo] = c->dy[r * c->dim + j];
}

static int r_sum_rows(const float *dy, float *db, int64_t rows, int64_t dim) {
  norm_ctx c = {dy, NULL, NULL, NULL, NULL, dim};
  return column_sums(rows, dim, &c, dy_row, db);
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Softmax family. The maximum is order-free (NaN never wins a comparison), so a plain scan is enough.               */

static double row_max(const float *x, int64_t n) {
  double m = -INFINITY;
  for (int64_t j = 0; j < n; j++)
    if (x[j] > m) m = x[j];
  return m;
}

static double row_lse(const float *x, int64_t n) {
  double m = row_max(x, n), sum = 0;
  for (int64_t j = 0; j < n; j++) sum += r_exp(x[j] - m);
  return m + r_log(sum);
}

static void r_softmax(const float *x, float *out, int64_t rows, int64_t dim) {
#pragma omp parallel for num_threads(team(30.0 * rows * dim)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    double l = row_lse(x + r * dim, dim);
    for (int64_t j = 0; j < dim; j++) out[r * dim + j] = (float)r_exp(x[r * dim + j] - l);
  }
}

static void r_log_softmax(const float *x, float *out, int64_t rows, int64_t dim) {
#pragma omp parallel for num_threads(team(30.0 * rows * dim)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    double l = row_lse(x + r * dim, dim);
    for (int64_t j = 0; j < dim; j++) out[r * dim + j] = (float)(x[r * dim + j] - l);
  }
}

static void r_gather_log_probs(const float *logits, const int32_t *targets, float *log_prob, float *lse,
                               float *entropy, int64_t rows, int64_t vocab) {
#pragma omp parallel for num_threads(team(30.0 * rows * vocab)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *x = logits + r * vocab;
    double mx = row_max(x, vocab), sum = 0, weighted = 0;
    for (int64_t j = 0; j < vocab; j++) {
      double z = x[j] - mx, e = r_exp(z);
      sum += e;
      weighted += e > 0 ? e * z : 0.0; /* p·log p → 0 as p → 0, where e·z would be 0·−∞ */
    }
    double ls = r_log(sum), l = mx + ls;
    lse[r] = (float)l;
    log_prob[r] = targets[r] < 0 ? 0.0f : (float)(x[targets[r]] - l);
    if (entropy) entropy[r] = (float)(ls - weighted / sum);
  }
}

static void r_gather_log_probs_backward(const float *logits, const int32_t *targets, const float *lse,
                                        const float *dlog_prob, float *dlogits, int64_t rows, int64_t vocab) {
#pragma omp parallel for num_threads(team(30.0 * rows * vocab)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *x = logits + r * vocab;
    float *d = dlogits + r * vocab; /* may be x: each element is read before it is written */
    int32_t t = targets[r];
    double g = dlog_prob[r], l = lse[r];
    for (int64_t j = 0; j < vocab; j++) d[j] = t < 0 ? 0.0f : (float)((j == t ? g : 0.0) - g * r_exp(x[j] - l));
  }
}

static void r_entropy_backward(const float *logits, const float *lse, const float *entropy, const float *dentropy,
                               float *dlogits, int64_t rows, int64_t vocab) {
#pragma omp parallel for num_threads(team(30.0 * rows * vocab)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    double g = dentropy[r], l = lse[r], h = entropy[r];
    if (g == 0) continue;
    for (int64_t j = 0; j < vocab; j++) {
      double log_p = logits[r * vocab + j] - l;
      dlogits[r * vocab + j] = (float)(dlogits[r * vocab + j] - g * r_exp(log_p) * (log_p + h));
    }
  }
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Rotary embedding and activations                                                                                 */

static void r_rope(float *x, const int32_t *positions, const float *cos, const float *sin, int64_t rows, int64_t heads,
                   int64_t head_dim, int inverse) {
  int64_t half = head_dim / 2;
  double sign = inverse ? -1.0 : 1.0;
#pragma omp parallel for num_threads(team(6.0 * rows * heads * head_dim)) schedule(static)
  for (int64_t r = 0; r < rows; r++) {
    const float *cr = cos + (int64_t)positions[r] * half, *sr = sin + (int64_t)positions[r] * half;
    for (int64_t h = 0; h < heads; h++) {
      float *x1 = x + (r * heads + h) * head_dim, *x2 = x1 + half;
      for (int64_t i = 0; i < half; i++) {
        double c = cr[i], s = sign * sr[i], a = x1[i], b = x2[i];
        x1[i] = (float)(a * c - b * s);
        x2[i] = (float)(b * c + a * s);
      }
    }
  }
}

static void r_swiglu(const float *gate, const float *up, float *out, int64_t n) {
#pragma omp parallel for num_threads(team(30.0 * n)) schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = (float)((double)gate[i] * r_sigmoid(gate[i]) * up[i]);
}

static void r_swiglu_backward(const float *dy, const float *gate, const float *up, float *dgate, float *dup,
                              int64_t n) {
#pragma omp parallel for num_threads(team(30.0 * n)) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    double g = gate[i], u = up[i], d = dy[i], s = r_sigmoid(g);
    dup[i] = (float)(d * g * s);
    dgate[i] = (float)(d * u * s * (1.0 + g * (1.0 - s)));
  }
}

/* GELU's tanh form as x·σ(2u) (½(1 + tanh u) = σ(2u)), which keeps its precision for x ≲ −3. */
#define GELU_K sqrt(2.0 / 3.141592653589793) /* folded, correctly rounded, as Math.sqrt(2 / Math.PI) */
#define GELU_A 0.044715

static inline double gelu_u(double v) { return GELU_K * (v + GELU_A * v * v * v); }

static void r_gelu(const float *x, float *out, int64_t n) {
#pragma omp parallel for num_threads(team(30.0 * n)) schedule(static)
  for (int64_t i = 0; i < n; i++) out[i] = (float)(x[i] * r_sigmoid(2.0 * gelu_u(x[i])));
}

static void r_gelu_backward(const float *dy, const float *x, float *dx, int64_t n) {
#pragma omp parallel for num_threads(team(30.0 * n)) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    double v = x[i], s = r_sigmoid(2.0 * gelu_u(v)), du = GELU_K * (1.0 + 3.0 * GELU_A * v * v);
    dx[i] = (float)(dy[i] * (s + v * 2.0 * s * (1.0 - s) * du));
  }
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Attention: one query row at a time against the keys it sees, as the TypeScript reference does. Keys (and, for the
 * backward, values) are first transposed into doubles, so the dot products of one query with all its keys run as
 * lane-wise sums over the key index, each still summed over d = 0.. in order.                                       */

/* The keys and values one query sees: rows j < count at off + j·stride of k and v, each dim long; kt and vt hold
 * them transposed (element d of row j at d·ldt + j). */
typedef struct {
  const float *k, *v;
  int64_t off, stride, count, dim;
  const double *kt, *vt;
  int64_t ldt;
} key_span;

/* The `count` rows of x from `off` (rows `stride` apart, `dim` long) transposed into doubles: xt[d·count + j]. */
static void transpose_rows(const float *x, int64_t off, int64_t stride, int64_t count, int64_t dim, double *xt) {
  for (int64_t j = 0; j < count; j++)
    for (int64_t d = 0; d < dim; d++) xt[d * count + j] = x[off + j * stride + d];
}

/* out[j] = Σ_d a[d]·xt[d·ldt + j] for j < count, each summed over d = 0.. from 0. */
EXACT_PRODUCTS static void dots_t(const float *a, const double *xt, int64_t ldt, int64_t count, int64_t dim, double *out) {
  for (int64_t j = 0; j < count; j++) out[j] = 0;
  for (int64_t d = 0; d < dim; d++) {
    double ad = a[d];
    const double *row = xt + d * ldt;
    for (int64_t j = 0; j < count; j++) out[j] += ad * row[j];
  }
}

/* scores[j] = (q·k_j)·scale; returns their maximum. */
static double score_keys(const float *q, const key_span *sp, double scale, double *scores) {
  dots_t(q, sp->kt, sp->ldt, sp->count, sp->dim, scores);
  double mx = -INFINITY;
  for (int64_t j = 0; j < sp->count; j++) {
    scores[j] *= scale;
    if (scores[j] > mx) mx = scores[j];
  }
  return mx;
}

/* out = softmax(scores)·V over the span; returns the log-sum-exp (−∞, out = 0, for an empty span). */
static float attend_one(const float *q, const key_span *sp, double scale, float *out, double *scores, double *acc) {
  double mx = score_keys(q, sp, scale, scores), sum = 0;
  for (int64_t d = 0; d < sp->dim; d++) acc[d] = 0;
  /* The exponentials first, in a loop of independent lanes, then the sums in order. */
  for (int64_t j = 0; j < sp->count; j++) scores[j] = r_exp(scores[j] - mx);
  for (int64_t j = 0; j < sp->count; j++) {
    double p = scores[j];
    sum += p;
    const float *vj = sp->v + sp->off + j * sp->stride;
    for (int64_t d = 0; d < sp->dim; d++) acc[d] += p * vj[d];
  }
  double inv = sum > 0 ? 1.0 / sum : 0.0;
  for (int64_t d = 0; d < sp->dim; d++) out[d] = (float)(acc[d] * inv);
  return sum > 0 ? (float)(mx + r_log(sum)) : -INFINITY;
}

/* The span of query t of sequence b (kv head g) in a [B, T, Hkv, D] tensor: keys from keyStart to t. kt and vt hold
 * all the head's keys from keyStart on, transposed. */
static key_span causal_span(const float *k, const float *v, const hx_attn_shape *s, int64_t b, int64_t g, int64_t t,
                            const double *kt, const double *vt) {
  int64_t stride = (int64_t)s->kv_heads * s->head_dim, first = s->key_start ? s->key_start[b] : 0;
  int64_t off = b * s->seq * stride + g * s->head_dim + first * stride, count = t + 1 - first;
  key_span sp = {k, v, off, stride, count > 0 ? count : 0, s->head_dim, kt, vt, s->seq - first};
  return sp;
}

/* Transposes the keys (and values, when vt) of kv head g of sequence b from keyStart on into kt and vt. */
static void transpose_head(const float *k, const float *v, const hx_attn_shape *s, int64_t b, int64_t g, double *kt,
                           double *vt) {
  key_span sp = causal_span(k, v, s, b, g, s->seq - 1, NULL, NULL);
  transpose_rows(k, sp.off, sp.stride, sp.ldt, sp.dim, kt);
  if (vt) transpose_rows(v, sp.off, sp.stride, sp.ldt, sp.dim, vt);
}

static int r_attention(const float *q, const float *k, const float *v, float *out, float *lse, const hx_attn_shape *s) {
  int64_t tasks = (int64_t)s->batch * s->q_heads, per = s->seq + s->head_dim + (int64_t)s->seq * s->head_dim;
  int nt = team(4.0 * tasks * s->seq * (double)s->seq * s->head_dim);
  double *scratch = scratch_take(SCRATCH_A, (size_t)(nt * per + 1));
  if (!scratch) return -1;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t task = 0; task < tasks; task++) {
    double *scores = scratch + (int64_t)omp_get_thread_num() * per, *acc = scores + s->seq, *kt = acc + s->head_dim;
    int64_t b = task / s->q_heads, h = task % s->q_heads, g = h / (s->q_heads / s->kv_heads);
    transpose_head(k, v, s, b, g, kt, NULL);
    for (int64_t t = 0; t < s->seq; t++) {
      int64_t qo = ((b * s->seq + t) * s->q_heads + h) * s->head_dim;
      key_span sp = causal_span(k, v, s, b, g, t, kt, NULL);
      lse[task * s->seq + t] = attend_one(q + qo, &sp, s->scale, out + qo, scores, acc);
    }
  }
  scratch_done(SCRATCH_A, scratch);
  return 0;
}

/* Where the backward of one query row reads and adds: dk and dv of its kv head are double sums over its rows. */
typedef struct {
  const float *dout, *out;
  float *dq;
  double *dk, *dv, *dq_acc, *scores, *dps;
} grads_t;

static void backward_one(const float *q, int64_t qo, const key_span *sp, double scale, double lse, grads_t *g) {
  int64_t dim = sp->dim;
  const float *dout = g->dout + qo;
  double row_dot = 0;
  for (int64_t d = 0; d < dim; d++) row_dot += (double)dout[d] * g->out[qo + d];
  for (int64_t d = 0; d < dim; d++) g->dq_acc[d] = 0;
  score_keys(q + qo, sp, scale, g->scores);
  dots_t(dout, sp->vt, sp->ldt, sp->count, dim, g->dps);
  for (int64_t j = 0; j < sp->count; j++) g->scores[j] = r_exp(g->scores[j] - lse);
  for (int64_t j = 0; j < sp->count; j++) {
    const float *kj = sp->k + sp->off + j * sp->stride;
    double p = g->scores[j], ds = scale * p * (g->dps[j] - row_dot);
    /* The double sums are laid out like k and v. */
    double *dk = g->dk + (sp->off + j * sp->stride), *dv = g->dv + (sp->off + j * sp->stride);
    for (int64_t d = 0; d < dim; d++) {
      dv[d] += p * dout[d];
      dk[d] += ds * q[qo + d];
      g->dq_acc[d] += ds * kj[d];
    }
  }
  for (int64_t d = 0; d < dim; d++) g->dq[qo + d] = (float)g->dq_acc[d];
}

static int r_attention_backward(const float *dout, const float *q, const float *k, const float *v, const float *out,
                                const float *lse, float *dq, float *dk, float *dv, const hx_attn_shape *s) {
  int64_t tasks = (int64_t)s->batch * s->kv_heads, group = s->q_heads / s->kv_heads;
  int64_t nkv = (int64_t)s->batch * s->seq * s->kv_heads * s->head_dim;
  int nt = team(8.0 * s->batch * s->q_heads * s->seq * (double)s->seq * s->head_dim);
  int64_t per = 2 * s->seq + s->head_dim + 2 * (int64_t)s->seq * s->head_dim;
  /* Double sums of dk and dv in the layout of k; each task owns the rows of its kv head. */
  double *sums = scratch_take(SCRATCH_A, (size_t)(2 * nkv + nt * per + 1));
  if (!sums) return -1;
  memset(sums, 0, (size_t)(2 * nkv) * sizeof *sums);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t task = 0; task < tasks; task++) {
    double *scores = sums + 2 * nkv + (int64_t)omp_get_thread_num() * per, *dps = scores + s->seq;
    double *dq_acc = dps + s->seq, *kt = dq_acc + s->head_dim, *vt = kt + (int64_t)s->seq * s->head_dim;
    grads_t gr = {dout, out, dq, sums, sums + nkv, dq_acc, scores, dps};
    int64_t b = task / s->kv_heads, g = task % s->kv_heads;
    transpose_head(k, v, s, b, g, kt, vt);
    for (int64_t h = g * group; h < (g + 1) * group; h++)
      for (int64_t t = 0; t < s->seq; t++) {
        int64_t qo = ((b * s->seq + t) * s->q_heads + h) * s->head_dim;
        key_span sp = causal_span(k, v, s, b, g, t, kt, vt);
        backward_one(q, qo, &sp, s->scale, lse[(b * s->q_heads + h) * s->seq + t], &gr);
      }
    for (int64_t t = 0; t < s->seq; t++)
      for (int64_t d = 0; d < s->head_dim; d++) {
        int64_t i = ((b * s->seq + t) * s->kv_heads + g) * s->head_dim + d;
        dk[i] = (float)sums[i];
        dv[i] = (float)sums[nkv + i];
      }
  }
  scratch_done(SCRATCH_A, sums);
  return 0;
}

static int r_attention_decode(const float *q, const float *k_cache, const float *v_cache, float *out, int64_t batch,
                              int64_t q_heads, int64_t kv_heads, int64_t head_dim, int64_t capacity, int64_t length,
                              float scale, const int32_t *key_start) {
  int64_t tasks = batch * kv_heads, per = length + head_dim + length * head_dim, group = q_heads / kv_heads;
  int nt = team(4.0 * batch * q_heads * (double)length * head_dim);
  double *scratch = scratch_take(SCRATCH_A, (size_t)(nt * per + 1));
  if (!scratch) return -1;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t task = 0; task < tasks; task++) {
    double *scores = scratch + (int64_t)omp_get_thread_num() * per, *acc = scores + length, *kt = acc + head_dim;
    int64_t b = task / kv_heads, first = key_start ? key_start[b] : 0;
    key_span sp = {k_cache, v_cache, (task * capacity + first) * head_dim, head_dim, length - first, head_dim, kt,
                   NULL, length - first};
    transpose_rows(k_cache, sp.off, sp.stride, sp.count, head_dim, kt);
    for (int64_t h = (task % kv_heads) * group; h < (task % kv_heads + 1) * group; h++) {
      int64_t qo = (b * q_heads + h) * head_dim;
      attend_one(q + qo, &sp, scale, out + qo, scores, acc);
    }
  }
  scratch_done(SCRATCH_A, scratch);
  return 0;
}

/* ---------------------------------------------------------------------------------------------------------------- */
/* Optimiser and vector helpers                                                                                     */

/* x^n by binary powering: a fixed sequence of products, unlike pow, whose last bit varies between libraries. */
static double powi(double x, int64_t n) {
  double r = 1.0;
  for (; n > 0; n >>= 1) {
    if (n & 1) r *= x;
    x *= x;
  }
  return r;
}

static void r_adamw(float *param, const float *grad, float *m, float *v, int64_t n, double lr, double beta1,
                    double beta2, double eps, double weight_decay, int64_t step) {
  double decay = 1.0 - lr * weight_decay, step_size = lr / (1.0 - powi(beta1, step));
  double bc2_sqrt = sqrt(1.0 - powi(beta2, step));
#pragma omp parallel for num_threads(team(12.0 * n)) schedule(static)
  for (int64_t i = 0; i < n; i++) {
    double g = grad[i];
    float p = (float)(param[i] * decay);
    float mi = (float)(beta1 * m[i] + (1.0 - beta1) * g);
    float vi = (float)(beta2 * v[i] + (1.0 - beta2) * g * g);
    m[i] = mi;
    v[i] = vi;
    param[i] = (float)(p - (step_size * mi) / (sqrt((double)vi) / bc2_sqrt + eps));
  }
}

static void r_axpy(float alpha, const float *x, float *y, int64_t n) {
#pragma omp parallel for num_threads(team(2.0 * n)) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = (float)(y[i] + (double)alpha * x[i]);
}

static double r_sum_squares(const float *x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

const hx_repro_kernels HX_REPRO_TABLE = {
    .isa = HX_REPRO_ISA,
    .gemm = r_gemm,
    .rms_norm = r_rms_norm,
    .rms_norm_backward = r_rms_norm_backward,
    .layer_norm = r_layer_norm,
    .layer_norm_backward = r_layer_norm_backward,
    .softmax = r_softmax,
    .log_softmax = r_log_softmax,
    .gather_log_probs = r_gather_log_probs,
    .gather_log_probs_backward = r_gather_log_probs_backward,
    .entropy_backward = r_entropy_backward,
    .rope = r_rope,
    .swiglu = r_swiglu,
    .swiglu_backward = r_swiglu_backward,
    .gelu = r_gelu,
    .gelu_backward = r_gelu_backward,
    .attention = r_attention,
    .attention_backward = r_attention_backward,
    .attention_decode = r_attention_decode,
    .adamw = r_adamw,
    .sum_rows = r_sum_rows,
    .axpy = r_axpy,
    .sum_squares = r_sum_squares,
};
