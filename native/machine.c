/* Measurements of the machine itself, so benchmarks report fractions of what this CPU can do in the same run. */
#include "napi_util.h"
#include "threads.h"
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* FLOPs of one pass of the register-only FMA loop below on one thread. */
#if defined(__AVX512F__)
typedef __m512 vec;
#define VLEN 16
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VSET(x) _mm512_set1_ps(x)
static float vsum(vec v) { return _mm512_reduce_add_ps(v); }
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define VLEN 8
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VSET(x) _mm256_set1_ps(x)
static float vsum(vec v) {
  float t[8];
  _mm256_storeu_ps(t, v);
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#else
typedef float vec;
#define VLEN 1
#define VFMA(a, b, c) ((a) * (b) + (c))
#define VSET(x) (x)
static float vsum(vec v) { return v; }
#endif

/* Twelve independent accumulators hide the FMA latency (4 cycles × 2 pipes on current cores, with margin). */
static double fma_block(long iters) {
  vec x = VSET(0.999999f), y = VSET(1e-7f);
  vec c0 = VSET(0), c1 = VSET(1), c2 = VSET(2), c3 = VSET(3), c4 = VSET(4), c5 = VSET(5);
  vec c6 = VSET(6), c7 = VSET(7), c8 = VSET(8), c9 = VSET(9), c10 = VSET(10), c11 = VSET(11);
  for (long i = 0; i < iters; i++) {
    c0 = VFMA(c0, x, y); c1 = VFMA(c1, x, y); c2 = VFMA(c2, x, y); c3 = VFMA(c3, x, y);
    c4 = VFMA(c4, x, y); c5 = VFMA(c5, x, y); c6 = VFMA(c6, x, y); c7 = VFMA(c7, x, y);
    c8 = VFMA(c8, x, y); c9 = VFMA(c9, x, y); c10 = VFMA(c10, x, y); c11 = VFMA(c11, x, y);
  }
  /* The sum keeps the loop from being optimised away. */
  return vsum(c0) + vsum(c1) + vsum(c2) + vsum(c3) + vsum(c4) + vsum(c5) + vsum(c6) + vsum(c7) + vsum(c8) + vsum(c9) +
         vsum(c10) + vsum(c11);
}

/* fmaPeak(threads, milliseconds) → GFLOP/s of single-precision FMA over all threads. */
static napi_value js_fma_peak(napi_env env, napi_callback_info info) {
  napi_value v[2];
  int64_t threads, ms;
  if (hx_args(env, info, "fmaPeak", 2, 2, v, NULL) || hx_size(env, v[0], "fmaPeak", "threads", &threads) ||
      hx_size(env, v[1], "fmaPeak", "milliseconds", &ms))
    return NULL;
  int nt = hx_threads_for(1, 1, threads > 0 ? (int)threads : 1);
  const long iters = 1L << 20;
  double best = 0, sink = 0;
  double end = now() + ms * 1e-3;
  do {
    double t = now();
#pragma omp parallel for num_threads(nt) reduction(+ : sink)
    for (int i = 0; i < nt; i++) sink += fma_block(iters);
    t = now() - t;
    double gf = 2.0 * 12 * VLEN * (double)iters * nt / t / 1e9;
    if (gf > best) best = gf;
  } while (now() < end);
  if (sink == 12345.678) best += 0; /* use sink */
  return hx_number(env, best);
}

/* memoryBandwidth(threads, megabytes) → GB/s of a streaming copy (bytes read + bytes written) over two buffers of
 * `megabytes` each; the best of several passes. */
static napi_value js_memory_bandwidth(napi_env env, napi_callback_info info) {
  napi_value v[2];
  int64_t threads, mb;
  if (hx_args(env, info, "memoryBandwidth", 2, 2, v, NULL) ||
      hx_size(env, v[0], "memoryBandwidth", "threads", &threads) ||
      hx_size(env, v[1], "memoryBandwidth", "megabytes", &mb))
    return NULL;
  if (mb < 1 || mb > 4096) return hx_throw(env, "memoryBandwidth", "megabytes must be in [1, 4096], got %lld", (long long)mb);
  int nt = hx_threads_for(1, 1, threads > 0 ? (int)threads : 1);
  size_t n = (size_t)mb * 1024 * 1024 / sizeof(float);
  float *src = aligned_alloc(64, n * sizeof(float)), *dst = aligned_alloc(64, n * sizeof(float));
  if (!src || !dst) {
    free(src);
    free(dst);
    return hx_throw(env, "memoryBandwidth", "out of memory for %lld MB", (long long)mb);
  }
#pragma omp parallel for num_threads(nt) schedule(static)
  for (size_t i = 0; i < n; i++) src[i] = dst[i] = (float)(i & 1023);
  double best = 0;
  for (int pass = 0; pass < 6; pass++) {
    double t = now();
#pragma omp parallel for num_threads(nt) schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = src[i] * 1.0001f;
    t = now() - t;
    double gbs = 2.0 * n * sizeof(float) / t / 1e9;
    if (gbs > best) best = gbs;
  }
  free(src);
  free(dst);
  return hx_number(env, best);
}

void hx_register_machine(napi_env env, napi_value exports) {
  hx_export(env, exports, "fmaPeak", js_fma_peak);
  hx_export(env, exports, "memoryBandwidth", js_memory_bandwidth);
}
