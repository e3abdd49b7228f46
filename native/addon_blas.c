/* N-API glue of the matrix multiply: library selection and the strided, batched sgemm. */
#include "blas.h"
#include "napi_util.h"
#include "repro.h"
#include "threads.h"
#include <stdlib.h>
#include <string.h>

static int ensure_blas(napi_env env, const char *op) {
  if (hx_blas_name()) return 0;
  char err[640];
  const char *want = getenv("HACRL_BLAS");
  if (hx_blas_select(want, err, sizeof err)) return hx_throw(env, op, "%s", err), -1;
  return 0;
}

/* init(): loads the BLAS named by HACRL_BLAS (or the fastest available) and returns its description. */
static napi_value js_init(napi_env env, napi_callback_info info) {
  (void)info;
  if (ensure_blas(env, "init")) return NULL;
  return hx_string(env, hx_blas_describe());
}

static napi_value js_select_blas(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  if (hx_args(env, info, "selectBlas", 1, 1, argv, NULL)) return NULL;
  char name[64];
  size_t len;
  if (napi_get_value_string_utf8(env, argv[0], name, sizeof name, &len) != napi_ok)
    return hx_throw(env, "selectBlas", "name must be a string");
  char err[640];
  if (hx_blas_select(name, err, sizeof err)) return hx_throw(env, "selectBlas", "%s", err);
  return hx_string(env, hx_blas_describe());
}

static napi_value js_available_blas(napi_env env, napi_callback_info info) {
  (void)info;
  static const char *names[] = {"onednn", "blis", "openblas"};
  napi_value arr;
  napi_create_array(env, &arr);
  uint32_t n = 0;
  for (int i = 0; i < 3; i++)
    if (hx_blas_available(names[i])) napi_set_element(env, arr, n++, hx_string(env, names[i]));
  return arr;
}

/* bf16Native(): whether bf16 products run on oneDNN's bf16 kernel (AMX or AVX512_BF16) rather than emulated. */
static napi_value js_bf16_native(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value out;
  napi_get_boolean(env, hx_bf16_native(), &out);
  return out;
}

static napi_value js_max_threads(napi_env env, napi_callback_info info) {
  (void)info;
  return hx_number(env, hx_max_threads());
}

/* Last element index touched by a [rows×cols] matrix stored with leading dimension ld, plus one. */
static int64_t extent(int64_t rows, int64_t cols, int64_t ld) { return rows == 0 || cols == 0 ? 0 : (rows - 1) * ld + cols; }

/* The first `count` bfloat16 values of `bits` as float32, exactly (a bfloat16 is the top half of a float32), in a new
 * buffer the caller frees; NULL when it cannot be allocated. */
static float *widened(const uint16_t *bits, int64_t count) {
  uint32_t *out = malloc((size_t)(count > 0 ? count : 1) * sizeof *out);
  for (int64_t i = 0; out && i < count; i++) out[i] = (uint32_t)bits[i] << 16;
  return (float *)out;
}

/* One product of the batch through the reproducible gemm (repro.h), bf16 operands (ha, hb) widened first; -1 when
 * out of memory. */
static int reproducible_product(int ta, int tb, int m, int n, int k, float alpha, const float *a, const uint16_t *ha,
                                int lda, const float *b, const uint16_t *hb, int ldb, float beta, float *c, int ldc) {
  float *wa = ha ? widened(ha, extent(ta ? k : m, ta ? m : k, lda)) : NULL;
  float *wb = hb ? widened(hb, extent(tb ? n : k, tb ? k : n, ldb)) : NULL;
  int rc = -1;
  if ((!ha || wa) && (!hb || wb))
    rc = hx_repro->gemm(ta, tb, m, n, k, alpha, ha ? wa : a, lda, hb ? wb : b, ldb, beta, c, ldc);
  free(wa);
  free(wb);
  return rc;
}

/* gemmRaw(transA, transB, m, n, k, alpha, a, aOff, lda, b, bOff, ldb, beta, c, cOff, ldc, batch, strideA, strideB,
 *         strideC, threads) — the positional form of GemmArgs, all defaults already filled in. A and B are both
 *         Float32Arrays, or both Uint16Arrays of bfloat16 bits (a bf16 product with fp32 accumulation, hx_gemm_bf16). */
static napi_value js_gemm(napi_env env, napi_callback_info info) {
  const char *op = "gemm";
  napi_value v[21];
  if (hx_args(env, info, op, 21, 21, v, NULL)) return NULL;
  int ta, tb;
  int64_t m, n, k, aOff, lda, bOff, ldb, cOff, ldc, batch, sA, sB, sC, threads;
  double alpha, beta;
  float *a = NULL, *b = NULL, *c;
  uint16_t *ha = NULL, *hb = NULL;
  size_t la, lb, lc;
  int bf16 = hx_is_u16(env, v[6]);
  if (hx_bool(env, v[0], op, "transA", &ta) || hx_bool(env, v[1], op, "transB", &tb) ||
      hx_size(env, v[2], op, "m", &m) || hx_size(env, v[3], op, "n", &n) || hx_size(env, v[4], op, "k", &k) ||
      hx_double(env, v[5], op, "alpha", &alpha) ||
      (bf16 ? hx_u16(env, v[6], op, "a", &ha, &la) : hx_f32(env, v[6], op, "a", &a, &la)) ||
      hx_size(env, v[7], op, "a.offset", &aOff) || hx_size(env, v[8], op, "a.ld", &lda) ||
      (bf16 ? hx_u16(env, v[9], op, "b", &hb, &lb) : hx_f32(env, v[9], op, "b", &b, &lb)) || hx_size(env, v[10], op, "b.offset", &bOff) ||
      hx_size(env, v[11], op, "b.ld", &ldb) || hx_double(env, v[12], op, "beta", &beta) ||
      hx_f32(env, v[13], op, "c", &c, &lc) || hx_size(env, v[14], op, "c.offset", &cOff) ||
      hx_size(env, v[15], op, "c.ld", &ldc) || hx_size(env, v[16], op, "batch", &batch) ||
      hx_size(env, v[17], op, "strideA", &sA) || hx_size(env, v[18], op, "strideB", &sB) ||
      hx_size(env, v[19], op, "strideC", &sC) || hx_size(env, v[20], op, "threads", &threads))
    return NULL;
  int64_t aRows = ta ? k : m, aCols = ta ? m : k, bRows = tb ? n : k, bCols = tb ? k : n;
  if (lda < (aCols > 1 ? aCols : 1) || ldb < (bCols > 1 ? bCols : 1) || ldc < (n > 1 ? n : 1))
    return hx_throw(env, op, "leading dimensions (lda %lld, ldb %lld, ldc %lld) are smaller than the stored widths "
                    "(%lld, %lld, %lld)", (long long)lda, (long long)ldb, (long long)ldc, (long long)aCols,
                    (long long)bCols, (long long)n);
  if (m > 2147483647 || n > 2147483647 || k > 2147483647 || lda > 2147483647 || ldb > 2147483647 || ldc > 2147483647)
    return hx_throw(env, op, "dimensions exceed 2^31-1");
  if (batch > 1 && sC < extent(m, n, ldc))
    return hx_throw(env, op, "strideC %lld makes the %lld products of a batch overlap in C", (long long)sC,
                    (long long)batch);
  int64_t last = batch > 0 ? batch - 1 : 0;
  if (batch > 0 && (hx_need(env, op, "a", la, aOff + last * sA + extent(aRows, aCols, lda)) ||
                    hx_need(env, op, "b", lb, bOff + last * sB + extent(bRows, bCols, ldb)) ||
                    hx_need(env, op, "c", lc, cOff + last * sC + extent(m, n, ldc))))
    return NULL;
  if (ensure_blas(env, op)) return NULL;
  if (hx_repro) {
    for (int64_t i = 0; i < batch; i++)
      if (reproducible_product(ta, tb, (int)m, (int)n, (int)k, (float)alpha, bf16 ? NULL : a + aOff + i * sA,
                               bf16 ? ha + aOff + i * sA : NULL, (int)lda, bf16 ? NULL : b + bOff + i * sB,
                               bf16 ? hb + bOff + i * sB : NULL, (int)ldb, (float)beta, c + cOff + i * sC, (int)ldc))
        return hx_throw(env, op, "out of memory for the operands of a %lldx%lldx%lld product", (long long)m,
                        (long long)n, (long long)k);
    return hx_undefined(env);
  }
  if (bf16) {
    /* One product at a time: the emulated kernel's scratch is shared, and oneDNN threads each bf16 product itself. */
    for (int64_t i = 0; i < batch; i++)
      if (hx_gemm_bf16(ta, tb, (int)m, (int)n, (int)k, (float)alpha, ha + aOff + i * sA, (int)lda, hb + bOff + i * sB,
                       (int)ldb, (float)beta, c + cOff + i * sC, (int)ldc, (int)threads))
        return hx_throw(env, op, "out of memory widening the bf16 operands of a %lldx%lldx%lld product",
                        (long long)m, (long long)n, (long long)k);
    return hx_undefined(env);
  }
  /* Many products each too small to split: one thread each, the batch split across threads (by weight bytes when
   * they have few rows, like the products of a decode step, else by arithmetic). A decode step's batch of products
   * that would each be split across as many threads as it has products (gate and up) is split the same way: one
   * parallel region, each thread multiplying whole products (1–9% faster than splitting each one's columns). */
  int nt = 1, skinny = m <= HX_SKINNY_ROWS;
  int each = skinny ? hx_skinny_threads((int)m, (int)n, (int)k) : hx_gemm_threads((int)m, (int)n, (int)k);
  if (batch > 1 && threads != 1 && (each == 1 || (skinny && batch % each == 0)))
    nt = skinny ? hx_skinny_work_threads((double)m, (double)n, (double)k * batch, (int)threads)
                : hx_threads_for(2.0 * m * n * k * batch, 4e6, (int)threads);
  if (nt <= 1) {
    for (int64_t i = 0; i < batch; i++)
      hx_sgemm(ta, tb, (int)m, (int)n, (int)k, (float)alpha, a + aOff + i * sA, (int)lda, b + bOff + i * sB, (int)ldb,
               (float)beta, c + cOff + i * sC, (int)ldc, (int)threads);
  } else {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t i = 0; i < batch; i++)
      hx_sgemm(ta, tb, (int)m, (int)n, (int)k, (float)alpha, a + aOff + i * sA, (int)lda, b + bOff + i * sB, (int)ldb,
               (float)beta, c + cOff + i * sC, (int)ldc, 1);
  }
  return hx_undefined(env);
}

void hx_register_blas(napi_env env, napi_value exports) {
  hx_export(env, exports, "init", js_init);
  hx_export(env, exports, "gemmRaw", js_gemm);
  hx_export(env, exports, "selectBlas", js_select_blas);
  hx_export(env, exports, "availableBlas", js_available_blas);
  hx_export(env, exports, "maxThreads", js_max_threads);
  hx_export(env, exports, "bf16Native", js_bf16_native);
}
