/* The bf16 product of a decode step: a few rows of activations times a weight stored [out, in] (C = A·Bᵀ), written
 * here because at so few rows oneDNN's AVX512_BF16 GEMM runs far below its own speed (measured on an AVX512_BF16
 * EPYC, one thread: 16×4864×896 in 0.86–0.96 ms against 0.81 ms here, 4 rows 2× slower than here; from 32 rows on
 * oneDNN is the faster, hence HX_BF16_SKINNY_ROWS). Each weight row is read once from memory and multiplied, from L1,
 * by every activation row with VDPBF16PS (pairs of bfloat16 products summed in fp32). Compiled only where the build
 * machine has AVX512_BF16 (-march=native); elsewhere hx_bf16_skinny_ok() is 0. */
#include "bf16_skinny.h"

#ifdef __AVX512BF16__
#include <immintrin.h>

/* Sum of the 16 lanes of each of four vectors, as four floats. */
static inline __m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  /* Fold each 512-bit vector to 128 bits, then transpose-add the four 128-bit vectors. */
  __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  __m256 b8 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
  __m256 c8 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
  __m256 d8 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
  __m128 a4 = _mm_add_ps(_mm256_castps256_ps128(a8), _mm256_extractf128_ps(a8, 1));
  __m128 b4 = _mm_add_ps(_mm256_castps256_ps128(b8), _mm256_extractf128_ps(b8, 1));
  __m128 c4 = _mm_add_ps(_mm256_castps256_ps128(c8), _mm256_extractf128_ps(c8, 1));
  __m128 d4 = _mm_add_ps(_mm256_castps256_ps128(d8), _mm256_extractf128_ps(d8, 1));
  __m128 ab = _mm_hadd_ps(a4, b4), cd = _mm_hadd_ps(c4, d4);
  return _mm_hadd_ps(ab, cd);
}

/* Mask of the bfloat16 values of a 32-value step that lie before k (zeros past the end add nothing). */
static inline __mmask32 step_mask(int k, int p) { return k - p >= 32 ? 0xffffffffu : (1u << (k - p)) - 1u; }

static inline __m512bh load_bh(__mmask32 mask, const uint16_t *p) {
  return (__m512bh)_mm512_maskz_loadu_epi16(mask, p);
}

/* c[0..cols) = alpha·(the four sums) + beta·c. */
static inline void store_row(float *c, __m128 sums, int cols, float alpha, float beta) {
  float out[4];
  _mm_storeu_ps(out, sums);
  for (int j = 0; j < cols; j++) c[j] = alpha * out[j] + (beta == 0.0f ? 0.0f : beta * c[j]);
}

/* Asks for the cache line at column p of each of four weight rows. */
static inline void prefetch4(const uint16_t *const rows[4], int p) {
  for (int t = 0; t < 4; t++) _mm_prefetch((const char *)(rows[t] + p), _MM_HINT_T0);
}

/* One tile: 4 activation rows against 4 weight rows (b0..b3), 16 accumulators held in registers (written out by name:
 * an array of them was spilled to the stack at every step). */
static void tile4(int k, float alpha, float beta, const uint16_t *a, int lda, const uint16_t *const b[4], float *c,
                  int ldc, int cols, const uint16_t *const next[4]) {
  __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00,
         c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00;
  for (int p = 0; p < k; p += 32) {
    __mmask32 mask = step_mask(k, p);
    if (next) prefetch4(next, p);
    __m512bh w0 = load_bh(mask, b[0] + p), w1 = load_bh(mask, b[1] + p), w2 = load_bh(mask, b[2] + p),
             w3 = load_bh(mask, b[3] + p);
    __m512bh x = load_bh(mask, a + p);
    c00 = _mm512_dpbf16_ps(c00, x, w0), c01 = _mm512_dpbf16_ps(c01, x, w1);
    c02 = _mm512_dpbf16_ps(c02, x, w2), c03 = _mm512_dpbf16_ps(c03, x, w3);
    x = load_bh(mask, a + lda + p);
    c10 = _mm512_dpbf16_ps(c10, x, w0), c11 = _mm512_dpbf16_ps(c11, x, w1);
    c12 = _mm512_dpbf16_ps(c12, x, w2), c13 = _mm512_dpbf16_ps(c13, x, w3);
    x = load_bh(mask, a + 2 * (size_t)lda + p);
    c20 = _mm512_dpbf16_ps(c20, x, w0), c21 = _mm512_dpbf16_ps(c21, x, w1);
    c22 = _mm512_dpbf16_ps(c22, x, w2), c23 = _mm512_dpbf16_ps(c23, x, w3);
    x = load_bh(mask, a + 3 * (size_t)lda + p);
    c30 = _mm512_dpbf16_ps(c30, x, w0), c31 = _mm512_dpbf16_ps(c31, x, w1);
    c32 = _mm512_dpbf16_ps(c32, x, w2), c33 = _mm512_dpbf16_ps(c33, x, w3);
  }
  store_row(c, reduce4(c00, c01, c02, c03), cols, alpha, beta);
  store_row(c + ldc, reduce4(c10, c11, c12, c13), cols, alpha, beta);
  store_row(c + 2 * (size_t)ldc, reduce4(c20, c21, c22, c23), cols, alpha, beta);
  store_row(c + 3 * (size_t)ldc, reduce4(c30, c31, c32, c33), cols, alpha, beta);
}

/* The rows left over by tile4: one activation row against 4 weight rows. */
static void tile1(int k, float alpha, float beta, const uint16_t *a, const uint16_t *const b[4], float *c, int cols,
                  const uint16_t *const next[4]) {
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
  for (int p = 0; p < k; p += 32) {
    __mmask32 mask = step_mask(k, p);
    if (next) prefetch4(next, p);
    __m512bh x = load_bh(mask, a + p);
    c0 = _mm512_dpbf16_ps(c0, x, load_bh(mask, b[0] + p)), c1 = _mm512_dpbf16_ps(c1, x, load_bh(mask, b[1] + p));
    c2 = _mm512_dpbf16_ps(c2, x, load_bh(mask, b[2] + p)), c3 = _mm512_dpbf16_ps(c3, x, load_bh(mask, b[3] + p));
  }
  store_row(c, reduce4(c0, c1, c2, c3), cols, alpha, beta);
}

int hx_bf16_skinny_ok(void) { return __builtin_cpu_supports("avx512bf16"); }

/* How many weight rows ahead of the tile being multiplied the next tile's rows are prefetched (measured on an
 * AVX512_BF16 EPYC, 24 layers of decode products streaming their weights: 4 rows ahead 1.5× at 16 activation rows,
 * 8 also 1.3–1.7× at 1–8 rows, 16 no better). */
#define PREFETCH_AHEAD 8

void hx_bf16_skinny_nt(int m, int n, int k, float alpha, const uint16_t *a, int lda, const uint16_t *b, int ldb,
                       float beta, float *c, int ldc) {
  for (int j = 0; j < n; j += 4) {
    int cols = n - j < 4 ? n - j : 4;
    /* A last tile of fewer columns reads its first weight row again for the missing ones (never stored). */
    const uint16_t *bj[4], *bn[4];
    for (int t = 0; t < 4; t++) bj[t] = b + (size_t)(j + (t < cols ? t : 0)) * ldb;
    /* Four weight rows further on, fetched while the first activation rows multiply these: the weights stream from
     * memory once per product, and without the prefetch each tile waited for them (a third of the in-cache rate). */
    for (int t = 0; t < 4; t++) bn[t] = b + (size_t)(j + PREFETCH_AHEAD + t < n ? j + PREFETCH_AHEAD + t : n - 1) * ldb;
    int i = 0;
    for (; i + 4 <= m; i += 4)
      tile4(k, alpha, beta, a + (size_t)i * lda, lda, bj, c + (size_t)i * ldc + j, ldc, cols, i == 0 ? bn : NULL);
    for (; i < m; i++) tile1(k, alpha, beta, a + (size_t)i * lda, bj, c + (size_t)i * ldc + j, cols, i == 0 ? bn : NULL);
  }
}
#else
int hx_bf16_skinny_ok(void) { return 0; }

void hx_bf16_skinny_nt(int m, int n, int k, float alpha, const uint16_t *a, int lda, const uint16_t *b, int ldb,
                       float beta, float *c, int ldc) {
  (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
}
#endif
